"""The checker's sandbox: the benchmark's tests against a proxy of the solution's function; the verdict goes out on a
pipe only it holds."""

import builtins
import json
import os
import sys
import traceback

from common import Remote, limit, receive, send, source


class SolutionError(Exception):
    "The solution raised an exception of its own class, or could not be loaded or reached."


def main():
    global call  # what every Remote calls: defined below, where it holds the channel
    requests, replies, verdict, limits = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        [int(v) for v in sys.argv[4].split(",")],
    )
    code = source(sys.argv[5])
    del sys.argv[1:]
    limit(*limits)
    handle = os.fdopen(replies, "rb")
    assertion_error = AssertionError
    ready = []

    def reply():
        return receive(handle, 1 << 24, trusted=False)

    def call(target, attribute, args, kwargs):
        if not ready:
            ready.append(reply())
        if ready[0][0] != "ready":
            raise SolutionError(ready[0][1])
        send(requests, (target, attribute, args, kwargs))
        answer = reply()
        if answer[0] == "raise":
            raise rebuilt(*answer[1:])
        return answer[1]

    try:
        exec(compile(code, "checker.py", "exec"), {"__name__": "__main__", "candidate": Remote(0, "candidate")})
    except assertion_error as error:
        status, message = "failed", traceback.format_exception_only(error)[-1].strip()
    except EOFError:
        status, message = "error", "the solution exited before answering"
    except BaseException as error:
        status, message = "error", traceback.format_exception_only(error)[-1].strip()
    else:
        status, message = "passed", ""
    data = json.dumps({"status": status, "message": message[:2000]}).encode() + b"\n"
    while data:
        data = data[os.write(verdict, data) :]


def rebuilt(name, builtin, message):
    "The solution's exception as the tests would have caught it: a built-in class is raised as itself."
    kind = getattr(builtins, name, None) if builtin else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:
            pass
    return SolutionError(f"{name}: {message}")


if __name__ == "__main__":
    main()
