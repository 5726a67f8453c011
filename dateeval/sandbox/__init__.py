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
(:mod:`dateeval.sandbox.cgroups`: memory with no swap, and process count), which
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

from dateeval.errors import DateEvalError
from dateeval.sandbox import cgroups, seccomp
from dateeval.sandbox.programs import CHECKER, SOLUTION

OUTCOMES = ("passed", "failed", "timeout", "error")
MAX_SOURCE_BYTES = 100_000  # code travels as an argument (see _argument); Linux caps one argument at 128 KiB


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
    candidates |= {
        Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})[key])
        for key in ("purelib", "platlib")
    }
    candidates |= set(Path("/usr/lib").glob("python3*/dist-packages")) | set(
        Path("/usr/local/lib").glob("python3*/*-packages")
    )
    return sorted(p for p in candidates if p.is_dir() and any(p.is_relative_to(root) for root in bound))


AS_ROOT = os.geteuid() == 0
# Run as root, bwrap starts each sandbox privileged and the harness drops, before any program code, to a host
# user id no other live sandbox on this host has (its PID namespace's inode number, which the kernel allocates
# host-wide, so two grader processes or two containers cannot collide): never to a root-mapped id, which the
# kernel exempts from the per-user process limit. Run as a user, bwrap's own user namespace gives each its own.
USER_UID = 65534
_ISOLATION_AS_ROOT = [
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-add",
    "CAP_SETUID",
    "--cap-add",
    "CAP_SETGID",
]
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
    args = [
        bwrap_path(),
        *(_ISOLATION_AS_ROOT if AS_ROOT else _ISOLATION_AS_USER),
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "PYTHONHASHSEED",
        "0",
        "--setenv",
        "PYTHONDONTWRITEBYTECODE",
        "1",
        *_ARENAS,
    ]
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
    return [
        *_base_command(),
        "--perms",
        "1777",
        "--size",
        tmp,
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        tmp,
        "--tmpfs",
        "/dev/shm",
        "--chdir",
        "/tmp",
        *identity,
        "--seccomp",
        str(seccomp_fd),
        str(_interpreter()),
        "-I",
        "-S",
        "-c",
    ]


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
        with subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={}, pass_fds=(filter_read,)
        ) as probe:
            _, stderr = probe.communicate(timeout=30)
    finally:
        os.close(filter_read)
    if probe.returncode != 0:
        reason = stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxUnavailable(
            f"bubblewrap cannot start a sandbox here: {reason[-1] if reason else f'exit status {probe.returncode}'}"
        )


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

    def __init__(
        self,
        code: str,
        argv: list[str | bytes],
        pass_fds: tuple[int, ...],
        limits: Limits,
        found: tuple[cgroups.Hierarchy, ...],
    ) -> None:
        status_read, status_write = os.pipe()
        filter_read, filter_write = os.pipe()
        self.group = (
            cgroups.ProgramGroup(found, limits.memory_mb << 20, limits.processes + 2) if found else None
        )  # + bwrap, init
        self.out_of_memory = False
        try:
            os.write(filter_write, seccomp.program(single_process=not found))  # a few hundred bytes: fits the pipe
            os.close(filter_write)
            rlimits = ",".join(
                map(str, (limits.cpu_s, _process_memory_mb(limits, bool(found)), limits.file_mb, limits.processes))
            )
            command = [*_command(limits, filter_read), code, *argv[:-1], rlimits, argv[-1]]
            command[1:1] = ["--json-status-fd", str(status_write)]
            launcher = self.group.launcher() if self.group else []
            self.process = subprocess.Popen(
                [*launcher, *command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                pass_fds=(*pass_fds, status_write, filter_read),
                start_new_session=True,
            )
        except BaseException:
            self.remove_group()
            raise
        finally:
            os.close(status_write)
            os.close(filter_read)
        with os.fdopen(status_read, "rb") as status:
            line = status.readline(
                4096
            )  # written by bwrap right after it creates the namespaces, before any program code
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
        containers.append(
            _Container(
                SOLUTION,
                [str(to_solution), str(to_checker), check.entry_point, solution],
                (to_solution, to_checker),
                limits,
                found,
            )
        )
        containers.append(
            _Container(
                CHECKER,
                [str(from_checker), str(from_solution), str(verdict_write), checker],
                (from_checker, from_solution, verdict_write),
                limits,
                found,
            )
        )
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
        return Outcome(
            "error", f"out of memory: the program's processes held more than {limits.memory_mb} MB", outcome.seconds
        )
    return outcome


def _collect(processes: list[subprocess.Popen], verdict_fd: int, limits: Limits, started: float) -> Outcome:
    """Drain every pipe until the checker's verdict is complete, the output cap is passed or time runs out."""
    solution, checker = processes
    streams = {
        solution.stdout.fileno(): _Stream(limits.message_kb << 10),
        solution.stderr.fileno(): _Stream(limits.message_kb << 10),
        checker.stdout.fileno(): _Stream(limits.message_kb << 10),
        checker.stderr.fileno(): _Stream(limits.message_kb << 10),
    }
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
                    return _verdict(
                        bytes(verdict), checker, streams[checker.stderr.fileno()], time.perf_counter() - started
                    )
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
