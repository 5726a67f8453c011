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
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dateeval.sandbox import cgroups, seccomp
from dateeval.sandbox.bwrap import Limits, bwrap_command, ensure_available, process_memory_mb
from dateeval.sandbox.programs import CHECKER, SOLUTION

OUTCOMES = ("passed", "failed", "timeout", "error")
MAX_SOURCE_BYTES = 100_000  # code travels as an argument (see _argument); Linux caps one argument at 128 KiB


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
                map(str, (limits.cpu_s, process_memory_mb(limits, bool(found)), limits.file_mb, limits.processes))
            )
            command = [*bwrap_command(limits, filter_read), code, *argv[:-1], rlimits, argv[-1]]
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
