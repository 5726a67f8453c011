"""The solution's sandbox: load the model's code, then answer calls until the checker closes the channel."""

import builtins
import os
import sys

from common import limit, receive, send, source


def main():
    requests, replies, name, limits = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3],
        [int(v) for v in sys.argv[4].split(",")],
    )
    code = source(sys.argv[5])
    del sys.argv[1:]
    limit(*limits)
    handle = os.fdopen(requests, "rb")
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(code, "solution.py", "exec"), namespace)
        handles = [namespace[name]]
    except BaseException as error:
        send(replies, ("unloadable", f"{type(error).__name__} while loading the solution: {error}"[:2000]))
        return
    send(replies, ("ready",))
    while True:
        try:
            target, attribute, args, kwargs = receive(
                handle, 1 << 24, trusted=True
            )  # from the checker: the benchmark's tests
        except EOFError:
            return
        try:
            value = handles[target](*args, **kwargs) if attribute is None else getattr(handles[target], attribute)
            send(replies, ("value", value), handles)
        except BaseException as error:
            builtin = getattr(builtins, type(error).__name__, None) is type(error)
            send(replies, ("raise", type(error).__name__, builtin, str(error)[:2000]))


if __name__ == "__main__":
    main()
