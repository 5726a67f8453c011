"""Run untrusted generated code (HumanEval completions) where it cannot reach the host, other programs or the grade.

Every check runs as **two** sandboxes, each a fresh ``bwrap`` (bubblewrap)
container with new user, mount, PID, network, IPC, UTS and cgroup
namespaces, creating further user namespaces disabled, its own ``/proc``,
a private size-capped tmpfs for ``/tmp`` (its working folder) and
``/dev/shm``, and read-only binds of only what the interpreter needs: no
site-packages (the benchmark's canonical solutions live there), no data
folder, no store, no ``/etc``, no host sockets.

* The **solution** sandbox runs the model's code and answers calls to its
  function over a pipe.
* The **checker** sandbox runs the benchmark's own tests against a proxy of
  that function, so the grade is OpenAI's harness's (pass iff the tests raise
  nothing): values cross as pickles that the checker rebuilds only into the
  standard library's own types (a ``Counter`` stays a ``Counter``, a
  ``Fraction`` a ``Fraction``, NaN, tuples and 5,000-digit integers exactly
  themselves). A subclass that keeps its base's behaviour crosses as its base;
  anything else (a function, an object with its own ``__eq__``) stays in the
  solution and is reached through a proxy equal only to itself. So a returned
  object cannot override ``==``, and the model's code cannot patch the
  checker's builtins, read its memory or write its verdict: the verdict leaves
  the checker on a pipe only the checker holds. Exiting early, faking a pass
  token, ``sys.exit(0)`` in the solution: none of them can produce "passed".

The parent never opens a path either program controls: code goes in as an
argument, exactly as the model wrote it (NUL bytes and lone surrogates
included, see ``_argument``), output comes back through pipes it created,
drained continuously (a program printing megabytes is not blocked) and kept
up to a cap. Memory is
limited per program, in total: each sandbox starts inside its own cgroup
(:mod:`dateeval.cgroups`: memory with no swap, and process count), which
counts every process, shared memory and tmpfs page (and then no address-space
limit is set: it would count reserved, unused memory); where no cgroup can be
made, the program may not create processes (threads are fine), so its
per-process address-space limit, less its tmpfs, is its total. memfd and
SysV shared memory are refused everywhere. CPU seconds, file size and process
count are also limited inside each sandbox, under a user id that no other
live sandbox on the host has. A wall-clock timeout kills the whole container
(its PID namespace dies with ``bwrap``).
"""

from __future__ import annotations

import json
import os
import platform
import select
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dateeval import cgroups, seccomp
from dateeval.errors import DateEvalError

OUTCOMES = ("passed", "failed", "timeout", "error")
MAX_SOURCE_BYTES = 100_000  # code travels as an argument (see _argument); Linux caps one argument at 128 KiB

# Shared by both sandboxes: limits (set here, inside the sandbox, so they count only its own processes),
# and how values cross between solution and checker: pickles, read back by the checker only into the standard
# library's own types (numbers, strings, bytes, containers and their stdlib subclasses), so that the tests compare
# exactly what OpenAI's harness compares (a Counter stays a Counter, NaN stays NaN, 10**5000 stays exact) while no
# object of the model's can run code, or its own ``__eq__``, in the checker.
_COMMON = r"""
import builtins, collections.abc, io, os, pickle, resource, struct, sys

def limit(cpu_s, memory_mb, file_mb, processes):
    "memory_mb 0: no address-space limit (a cgroup counts the program's memory, and threads' reserved stacks are not memory)."
    if os.getuid() == 0:  # started privileged by bwrap (we run as root): become a user id no other sandbox has
        uid = os.stat("/proc/self/ns/pid").st_ino  # our PID namespace's inode: unique among live ones, host-wide
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    for name, value in (("RLIMIT_CPU", cpu_s), ("RLIMIT_AS", (memory_mb << 20) or resource.RLIM_INFINITY), ("RLIMIT_FSIZE", file_mb << 20),
                        ("RLIMIT_NPROC", processes), ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))

# The classes a value may be made of, by (module, name): the checker imports them itself.
STANDARD = {("builtins", n) for n in ("int", "float", "complex", "bool", "str", "bytes", "bytearray", "list", "tuple", "dict",
                                      "set", "frozenset", "range", "slice", "Ellipsis", "NotImplemented")}
STANDARD |= {("collections", n) for n in ("Counter", "OrderedDict", "defaultdict", "deque", "ChainMap", "UserDict", "UserList", "UserString")}
STANDARD |= {("fractions", "Fraction"), ("decimal", "Decimal")}
STANDARD |= {("datetime", n) for n in ("date", "datetime", "time", "timedelta", "timezone")}
# What a subclass may define and still be sent as its standard base: nothing that changes how its value behaves.
HARMLESS = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__", "__annotations__", "__init__",
            "__new__", "__repr__", "__getnewargs__", "__match_args__", "__orig_bases__", "__parameters__", "__firstlineno__",
            "__static_attributes__", "__classcell__", "__dataclass_fields__", "__dataclass_params__"}
# The arguments that rebuild a subclass's value as its standard base, ``base(*arguments)`` (by default ``base(value)``;
# a str's own text, not what an Enum's __str__ makes of it).
ARGUMENTS = {"defaultdict": lambda base, v: (v.default_factory, dict(v)), "deque": lambda base, v: (list(v), v.maxlen),
             "str": lambda base, v: (str.__str__(v),)}
ARGUMENTS |= dict.fromkeys(("date", "datetime", "time", "timedelta", "timezone"), lambda base, v: base.__reduce__(v)[1])

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
    return not any((name.startswith("__") or hasattr(base, name)) and name not in HARMLESS and not restated(klass, base, name, value)
                   for klass in kind.__mro__[:kind.__mro__.index(base)] for name, value in vars(klass).items())

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
        if standard(kind) or value is ... or value is NotImplemented or (isinstance(value, type) and standard(value)) \
                or HELPERS.get(getattr(value, "__name__", None)) is value:
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
        data = data[os.write(fd, data):]

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
"""

# The solution side: load the model's code, then answer calls until the checker closes the channel.
_SOLUTION = _COMMON + r"""
def main():
    requests, replies, name, limits = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], [int(v) for v in sys.argv[4].split(",")]
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
            target, attribute, args, kwargs = receive(handle, 1 << 24, trusted=True)  # from the checker: the benchmark's tests
        except EOFError:
            return
        try:
            value = handles[target](*args, **kwargs) if attribute is None else getattr(handles[target], attribute)
            send(replies, ("value", value), handles)
        except BaseException as error:
            builtin = getattr(builtins, type(error).__name__, None) is type(error)
            send(replies, ("raise", type(error).__name__, builtin, str(error)[:2000]))

main()
"""

# The checker side: the benchmark's tests against a proxy; the verdict goes out on a pipe only it holds.
_CHECKER = _COMMON + r"""
import json, traceback

class SolutionError(Exception):
    "The solution raised an exception of its own class, or could not be loaded or reached."

def main():
    global call  # what every Remote calls: defined below, where it holds the channel
    requests, replies, verdict, limits = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), [int(v) for v in sys.argv[4].split(",")]
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
        data = data[os.write(verdict, data):]

def rebuilt(name, builtin, message):
    "The solution's exception as the tests would have caught it: a built-in class is raised as itself."
    kind = getattr(builtins, name, None) if builtin else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:
            pass
    return SolutionError(f"{name}: {message}")

main()
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one check (each of its two sandboxes)."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    processes: int = 64
    file_mb: int = 16
    tmp_mb: int = 64
    output_mb: int = 8  # beyond this the program is stopped: output is drained, never left to block it
    message_kb: int = 64  # how much of each output stream is kept for the outcome message


@dataclass(frozen=True)
class Outcome:
    """``status`` is passed, failed (an assertion failed), timeout or error, with a message."""

    status: str
    message: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Check:
    """What to grade: the model's ``solution`` (defines ``entry_point``) and a ``checker`` that calls ``candidate``."""

    solution: str
    checker: str
    entry_point: str


class SandboxUnavailable(DateEvalError):
    """bubblewrap is missing or cannot create namespaces here: generated code is never run unsandboxed."""


def bwrap_path() -> str:
    """The bwrap binary, or one clear error naming how to install it (or why this machine cannot sandbox)."""
    if not seccomp.supported():
        raise SandboxUnavailable(f"the sandbox's syscall filter supports x86_64 and aarch64, not {platform.machine()}")
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "running generated code (HumanEval) needs bubblewrap: install it with `apt-get install -y bubblewrap` "
            "(./run.sh does this when it can)"
        )
    return path


def _interpreter() -> Path:
    """The real interpreter behind this (possibly virtual) environment: the venv itself is never bound."""
    return Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))


def _hidden_package_dirs(bound: Sequence[Path]) -> list[Path]:
    """Installed-package folders inside the binds (where a benchmark's solutions could be read): each is masked."""
    candidates = {Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    candidates |= {Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})[key]) for key in ("purelib", "platlib")}
    candidates |= set(Path("/usr/lib").glob("python3*/dist-packages")) | set(Path("/usr/local/lib").glob("python3*/*-packages"))
    return sorted(p for p in candidates if p.is_dir() and any(p.is_relative_to(root) for root in bound))


AS_ROOT = os.geteuid() == 0
# Run as root, bwrap starts each sandbox privileged and the harness drops, before any program code, to a host
# user id no other live sandbox on this host has (its PID namespace's inode number, which the kernel allocates
# host-wide, so two grader processes or two containers cannot collide): never to a root-mapped id, which the
# kernel exempts from the per-user process limit. Run as a user, bwrap's own user namespace gives each its own.
USER_UID = 65534
_ISOLATION_AS_ROOT = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                      "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # fmt: skip
_ISOLATION_AS_USER = ["--unshare-all", "--unshare-user", "--disable-userns"]


# Two malloc arenas per process, not eight per core: each arena reserves 64 MB of address space, which the
# single-process mode's address-space limit counts (13 threads fitted in 1 GB; 63 with two arenas).
_ARENAS = ("--setenv", "MALLOC_ARENA_MAX", "2")


@lru_cache(maxsize=1)
def _base_command() -> tuple[str, ...]:
    """The bwrap arguments every sandbox shares: what is visible, and how it is isolated."""
    roots = [Path("/usr")]
    prefix = Path(sys.base_prefix).resolve()
    if not prefix.is_relative_to("/usr"):
        roots.append(prefix)
    roots += [Path(link) for link in ("/lib", "/lib64", "/bin") if Path(link).is_dir() and not Path(link).is_symlink()]
    args = [bwrap_path(), *(_ISOLATION_AS_ROOT if AS_ROOT else _ISOLATION_AS_USER), "--die-with-parent", "--new-session",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
            "--setenv", "PYTHONHASHSEED", "0", "--setenv", "PYTHONDONTWRITEBYTECODE", "1", *_ARENAS]  # fmt: skip
    for root in roots:
        for folder in reversed(root.parents[:-1]):  # made world-traversable: bwrap would create /root as 0700
            args += ["--perms", "0755", "--dir", str(folder)]
        args += ["--ro-bind", str(root), str(root)]
    for link, target in (("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/bin", "usr/bin")):
        if Path(link).is_symlink():
            args += ["--symlink", target, link]
    for hidden in _hidden_package_dirs(roots):
        args += ["--tmpfs", str(hidden), "--remount-ro", str(hidden)]
    return (*args, "--proc", "/proc", "--dev", "/dev")


def _command(limits: Limits, seccomp_fd: int) -> list[str]:
    """One sandbox's command line up to the interpreter: fresh size-capped tmpfs, its own user id, its syscall filter."""
    tmp = str(limits.tmp_mb << 20)
    identity = [] if AS_ROOT else ["--uid", str(USER_UID), "--gid", str(USER_UID)]
    return [*_base_command(), "--perms", "1777", "--size", tmp, "--tmpfs", "/tmp", "--perms", "1777", "--size", tmp, "--tmpfs", "/dev/shm", "--chdir", "/tmp",
            *identity, "--seccomp", str(seccomp_fd), str(_interpreter()), "-I", "-S", "-c"]  # fmt: skip


def _process_memory_mb(limits: Limits, counted: bool) -> int:
    """The per-process address-space limit: none (0) under a cgroup, else what the tmpfs scratch leaves.

    A cgroup already counts every page the program holds; an address-space
    limit on top would count what it only reserves (each thread's stack and
    malloc arena: 14 threads filled 1 GB), failing correct threaded solutions
    that OpenAI's harness, which sets no such limit, passes.
    """
    return 0 if counted else max(limits.memory_mb - 2 * limits.tmp_mb, 64)


@lru_cache(maxsize=1)
def ensure_available() -> None:
    """Fail once, clearly, when sandboxes cannot start here (no bwrap, or namespaces refused)."""
    filter_read, filter_write = os.pipe()
    os.write(filter_write, seccomp.program())
    os.close(filter_write)
    command = [*_command(Limits(), filter_read), "pass"]
    try:
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={}, pass_fds=(filter_read,)) as probe:
            _, stderr = probe.communicate(timeout=30)
    finally:
        os.close(filter_read)
    if probe.returncode != 0:
        reason = stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxUnavailable(f"bubblewrap cannot start a sandbox here: {reason[-1] if reason else f'exit status {probe.returncode}'}")


class _Stream:
    """One output pipe, drained to the end; keeps its head and tail up to ``keep`` bytes each."""

    def __init__(self, keep: int) -> None:
        self.keep, self.head, self.tail, self.total = keep, bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = max(self.keep - len(self.head), 0)
        self.head += data[:room]
        if len(data) > room:
            self.tail = (self.tail + data[room:])[-self.keep :]

    def text(self) -> str:
        cut = self.total > len(self.head) + len(self.tail)
        return (bytes(self.head) + (b"\n[...]\n" if cut else b"") + bytes(self.tail)).decode("utf-8", "replace")


class _Container:
    """One running sandbox: the ``bwrap`` process, the host PID of its namespace's init, and its cgroups if any."""

    def __init__(self, code: str, argv: list[str | bytes], pass_fds: tuple[int, ...], limits: Limits, found: tuple[cgroups.Hierarchy, ...]) -> None:
        status_read, status_write = os.pipe()
        filter_read, filter_write = os.pipe()
        self.group = cgroups.ProgramGroup(found, limits.memory_mb << 20, limits.processes + 2) if found else None  # + bwrap, init
        self.out_of_memory = False
        try:
            os.write(filter_write, seccomp.program(single_process=not found))  # a few hundred bytes: fits the pipe
            os.close(filter_write)
            rlimits = ",".join(map(str, (limits.cpu_s, _process_memory_mb(limits, bool(found)), limits.file_mb, limits.processes)))
            command = [*_command(limits, filter_read), code, *argv[:-1], rlimits, argv[-1]]
            command[1:1] = ["--json-status-fd", str(status_write)]
            launcher = self.group.launcher() if self.group else []
            self.process = subprocess.Popen([*launcher, *command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            env={}, pass_fds=(*pass_fds, status_write, filter_read), start_new_session=True)  # fmt: skip
        except BaseException:
            self.remove_group()
            raise
        finally:
            os.close(status_write)
            os.close(filter_read)
        with os.fdopen(status_read, "rb") as status:
            line = status.readline(4096)  # written by bwrap right after it creates the namespaces, before any program code
        self.init = _pidfd(line)

    def remove_group(self) -> None:
        """Note whether the kernel killed for memory (the outcome says so), then remove the emptied cgroups."""
        if self.group is not None:
            self.out_of_memory = self.group.out_of_memory()
            self.group.remove()
            self.group = None

    def kill(self) -> None:
        """Kill the namespace's init (through a pidfd: never a recycled PID), so the kernel kills all in it, then bwrap."""
        if self.init is not None:
            try:
                signal.pidfd_send_signal(self.init, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # our own child, not yet reaped: its group is still ours
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self) -> None:
        """Reap bwrap and wait until init has exited, which the kernel allows only once its namespace is empty."""
        self.process.wait()
        if self.init is not None:
            select.select([self.init], [], [], 5)
            os.close(self.init)
            self.init = None
        self.remove_group()


def _pidfd(status: bytes) -> int | None:
    """A pidfd for the namespace's init, from bwrap's ``--json-status-fd`` line (None when it already exited)."""
    try:
        return os.pidfd_open(int(json.loads(status)["child-pid"]))
    except (ValueError, KeyError, TypeError, ProcessLookupError):
        return None


def _argument(code: str) -> bytes:
    """Code as one command-line argument, exactly: a model's reply may hold NUL bytes (which no argument can) and lone
    surrogates (which UTF-8 cannot encode). UTF-8 with each surrogate as its three bytes, NUL as 0xFF (a byte UTF-8
    never uses); the sandbox's ``source`` reverses it, and Python then refuses both, as in OpenAI's harness."""
    return code.encode("utf-8", "surrogatepass").replace(b"\0", b"\xff")


def run_check(check: Check, limits: Limits = Limits()) -> Outcome:
    """Grade one solution against its checker, each in its own sandbox; the verdict comes only from the checker."""
    started = time.perf_counter()
    solution, checker = _argument(check.solution), _argument(check.checker)
    if max(len(solution), len(checker)) > MAX_SOURCE_BYTES:
        return Outcome("error", f"program longer than {MAX_SOURCE_BYTES} bytes", 0.0)
    ensure_available()
    to_solution, from_checker = os.pipe()  # checker writes calls, solution reads them
    from_solution, to_checker = os.pipe()  # solution writes replies, checker reads them
    verdict_read, verdict_write = os.pipe()
    found = cgroups.hierarchies()  # each program's memory counted in total; without them, each runs as one process
    containers: list[_Container] = []
    try:
        containers.append(_Container(_SOLUTION, [str(to_solution), str(to_checker), check.entry_point, solution],
                                     (to_solution, to_checker), limits, found))  # fmt: skip
        containers.append(_Container(_CHECKER, [str(from_checker), str(from_solution), str(verdict_write), checker],
                                     (from_checker, from_solution, verdict_write), limits, found))  # fmt: skip
    finally:
        for fd in (to_solution, to_checker, from_checker, from_solution, verdict_write):
            os.close(fd)
    try:
        outcome = _collect([c.process for c in containers], verdict_read, limits, started)
    finally:
        for container in containers:
            container.kill()
        for container in containers:
            container.wait()
        os.close(verdict_read)
    if not outcome.passed and any(c.out_of_memory for c in containers):
        return Outcome("error", f"out of memory: the program's processes held more than {limits.memory_mb} MB", outcome.seconds)
    return outcome


def _collect(processes: list[subprocess.Popen], verdict_fd: int, limits: Limits, started: float) -> Outcome:
    """Drain every pipe until the checker's verdict is complete, the output cap is passed or time runs out."""
    solution, checker = processes
    streams = {
        solution.stdout.fileno(): _Stream(limits.message_kb << 10), solution.stderr.fileno(): _Stream(limits.message_kb << 10),
        checker.stdout.fileno(): _Stream(limits.message_kb << 10), checker.stderr.fileno(): _Stream(limits.message_kb << 10),
    }  # fmt: skip
    verdict = bytearray()
    deadline = started + limits.timeout_s
    with selectors.DefaultSelector() as selector:
        for fd in [*streams, verdict_fd]:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return Outcome("timeout", f"no result within {limits.timeout_s:g} s", time.perf_counter() - started)
            for key, _ in selector.select(remaining):
                data = os.read(key.fd, 1 << 16)
                if not data and key.fd == verdict_fd:
                    return _verdict(bytes(verdict), checker, streams[checker.stderr.fileno()], time.perf_counter() - started)
                if not data:
                    selector.unregister(key.fd)
                elif key.fd == verdict_fd:
                    verdict += data[: 1 << 16]
                else:
                    streams[key.fd].add(data)
            if sum(stream.total for stream in streams.values()) > limits.output_mb << 20:
                return Outcome("error", f"more than {limits.output_mb} MB of output", time.perf_counter() - started)
            if verdict.endswith(b"\n"):
                break
    return _verdict(bytes(verdict), checker, streams[checker.stderr.fileno()], time.perf_counter() - started)


def _verdict(verdict: bytes, checker: subprocess.Popen, errors: _Stream, seconds: float) -> Outcome:
    try:
        message = json.loads(verdict)
        return Outcome(message["status"], str(message["message"]), seconds)
    except (ValueError, KeyError, TypeError):
        try:
            code = checker.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        detail = errors.text().strip().splitlines()
        if code is not None and code < 0:
            return Outcome("error", f"checker killed by signal {signal.Signals(-code).name}", seconds)
        return Outcome("error", detail[-1] if detail else f"checker exited (status {code}) without a verdict", seconds)


def run_many(checks: Sequence[Check], limits: Limits = Limits(), workers: int | None = None) -> list[Outcome]:
    """Run checks in parallel (one per core by default), results in input order."""
    if checks:
        ensure_available()
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda check: run_check(check, limits), checks))
