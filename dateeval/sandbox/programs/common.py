"""What both sandboxed programs share (``dateeval.sandbox.programs`` writes it out in place of each one's
``from common import`` line: a program runs alone in a fresh interpreter, with nothing of dateeval importable).

Shared by both sandboxes: limits (set here, inside the sandbox, so they count only its own processes),
and how values cross between solution and checker: pickles, read back by the checker only into the standard
library's own types (numbers, strings, bytes, containers and their stdlib subclasses), so that the tests compare
exactly what OpenAI's harness compares (a Counter stays a Counter, NaN stays NaN, 10**5000 stays exact) while no
object of the model's can run code, or its own ``__eq__``, in the checker.
"""

import collections.abc
import io
import os
import pickle
import resource
import struct
import sys


def limit(cpu_s, memory_mb, file_mb, processes):
    "memory_mb 0: no address-space limit (a cgroup counts the program's memory, and threads' reserved stacks are not memory)."
    if os.getuid() == 0:  # started privileged by bwrap (we run as root): become a user id no other sandbox has
        uid = os.stat("/proc/self/ns/pid").st_ino  # our PID namespace's inode: unique among live ones, host-wide
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    for name, value in (
        ("RLIMIT_CPU", cpu_s),
        ("RLIMIT_AS", (memory_mb << 20) or resource.RLIM_INFINITY),
        ("RLIMIT_FSIZE", file_mb << 20),
        ("RLIMIT_NPROC", processes),
        ("RLIMIT_CORE", 0),
    ):
        resource.setrlimit(getattr(resource, name), (value, value))


# The classes a value may be made of, by (module, name): the checker imports them itself.
STANDARD = {
    ("builtins", n)
    for n in (
        "int",
        "float",
        "complex",
        "bool",
        "str",
        "bytes",
        "bytearray",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "range",
        "slice",
        "Ellipsis",
        "NotImplemented",
    )
}
STANDARD |= {
    ("collections", n)
    for n in ("Counter", "OrderedDict", "defaultdict", "deque", "ChainMap", "UserDict", "UserList", "UserString")
}
STANDARD |= {("fractions", "Fraction"), ("decimal", "Decimal")}
STANDARD |= {("datetime", n) for n in ("date", "datetime", "time", "timedelta", "timezone")}
# What a subclass may define and still be sent as its standard base: nothing that changes how its value behaves.
HARMLESS = {
    "__module__",
    "__qualname__",
    "__doc__",
    "__dict__",
    "__weakref__",
    "__slots__",
    "__annotations__",
    "__init__",
    "__new__",
    "__repr__",
    "__getnewargs__",
    "__match_args__",
    "__orig_bases__",
    "__parameters__",
    "__firstlineno__",
    "__static_attributes__",
    "__classcell__",
    "__dataclass_fields__",
    "__dataclass_params__",
}
# The arguments that rebuild a subclass's value as its standard base, ``base(*arguments)`` (by default ``base(value)``;
# a str's own text, not what an Enum's __str__ makes of it).
ARGUMENTS = {
    "defaultdict": lambda base, v: (v.default_factory, dict(v)),
    "deque": lambda base, v: (list(v), v.maxlen),
    "str": lambda base, v: (str.__str__(v),),
}
ARGUMENTS |= dict.fromkeys(("date", "datetime", "time", "timedelta", "timezone"), lambda base, v: base.__reduce__(v)[1])


def call(target, attribute, args, kwargs):
    "What every Remote calls: the checker's main replaces it with one that holds the channel."
    raise RuntimeError("no channel to the solution")


class Remote:
    "An object of the solution's that is not a standard value (the function under test, one it returned, an instance"

    "of its own class): calling it or reading its attributes runs there; it equals only itself, as objects do."

    def __init__(self, handle, name):
        self.handle, self.name = handle, name

    def __call__(self, *args, **kwargs):
        return call(self.handle, None, args, kwargs)

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return call(self.handle, attribute, (), {})

    def __repr__(self):
        return f"<{self.name} of the solution>"


class Unsupported:
    "An argument the checker cannot send (the benchmark's tests pass plain data): equal to nothing but itself."

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name} object>"


# The functions a pickle may call besides the standard classes (named __main__.x on both sides).
def remote(handle, name):
    return Remote(handle, name)


def unsupported(name):
    return Unsupported(name)


def iterator(items):
    return iter(items)


def keys(items):
    return dict.fromkeys(items).keys()


def values(items):
    return dict(enumerate(items)).values()


def items(pairs):
    return dict(pairs).items()


HELPERS = {function.__name__: function for function in (remote, unsupported, iterator, keys, values, items)}


def standard(kind):
    module = sys.modules.get(getattr(kind, "__module__", None))
    return (kind.__module__, kind.__qualname__) in STANDARD and getattr(module, kind.__qualname__, None) is kind


def plain(kind, base):
    "Whether a subclass of a standard class keeps its base's behaviour (a namedtuple does, a class with __eq__ does not)."
    return not any(
        (name.startswith("__") or hasattr(base, name))
        and name not in HARMLESS
        and not restated(klass, base, name, value)
        for klass in kind.__mro__[: kind.__mro__.index(base)]
        for name, value in vars(klass).items()
    )


def restated(klass, base, name, value):
    "The base's own attribute, or what the enum module's classes define or give an enum class (names, display, flag"
    "operators): an IntEnum member compares and computes as its int, as in OpenAI's harness."
    return value is getattr(base, name, None) or "enum" in (klass.__module__, getattr(value, "__module__", None))


class Sender(pickle.Pickler):
    "Pickles standard values as they are; anything else as the nearest thing the checker can hold."

    def __init__(self, file, handles):
        super().__init__(file, protocol=5)
        self.handles = handles

    def reducer_override(self, value):
        kind = type(value)
        if (
            standard(kind)
            or value is ...
            or value is NotImplemented
            or (isinstance(value, type) and standard(value))
            or HELPERS.get(getattr(value, "__name__", None)) is value
        ):
            return NotImplemented  # pickled as itself, or by name
        base = next((k for k in kind.__mro__[1:] if standard(k)), None)
        if base is not None and plain(kind, base):
            return base, ARGUMENTS.get(base.__name__, lambda base, v: (base(v),))(base, value)
        if isinstance(value, type({}.keys())):
            return keys, (list(value),)
        if isinstance(value, type({}.values())):
            return values, (list(value),)
        if isinstance(value, type({}.items())):
            return items, (list(value),)
        if isinstance(value, collections.abc.Iterator):
            return iterator, (list(value),)
        if self.handles is None:
            return unsupported, (kind.__qualname__,)
        self.handles.append(value)
        return remote, (len(self.handles) - 1, getattr(value, "__qualname__", kind.__qualname__))


class Receiver(pickle.Unpickler):
    "Builds only standard values and the functions above: a pickle naming anything else is refused."

    def find_class(self, module, name):
        if (module, name) in STANDARD:
            __import__(module)
            return getattr(sys.modules[module], name)
        if module == "__main__" and name in HELPERS:
            return HELPERS[name]
        raise pickle.UnpicklingError(f"{module}.{name} is not a value the sandbox passes on")


def send(fd, message, handles=None):
    buffer = io.BytesIO()
    Sender(buffer, handles).dump(message)
    data = struct.pack(">I", len(buffer.getvalue())) + buffer.getvalue()
    while data:
        data = data[os.write(fd, data) :]


def source(argument):
    "The code exactly as the parent had it, NUL bytes and lone surrogates included (see sandbox._argument)."
    return os.fsencode(argument).replace(b"\xff", b"\0").decode("utf-8", "surrogatepass")


def read(handle, size):
    data = handle.read(size)
    if len(data) != size:
        raise EOFError("the other side closed the channel")
    return data


def receive(handle, limit_bytes, trusted):
    (size,) = struct.unpack(">I", read(handle, 4))
    if size > limit_bytes:
        raise EOFError("the other side sent more than the size limit")
    data = read(handle, size)
    return pickle.loads(data) if trusted else Receiver(io.BytesIO(data)).load()
