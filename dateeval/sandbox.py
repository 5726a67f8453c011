"""Run untrusted generated programs (HumanEval completions) away from the tool's own process.

Each program runs in a fresh Python interpreter, in its own session and
process group, in a new temporary working directory that is removed
afterwards, with:

* a wall-clock timeout (the whole process group is killed), and CPU-time,
  address-space, process-count and file-size limits (``setrlimit``);
* an environment with nothing inherited (no tokens, no keys);
* no network, through a new network namespace where the OS allows it
  (``unshare --net``), and a drop to the unprivileged ``nobody`` user when
  the tool runs as root, so nothing outside the sandbox can be written or
  deleted;
* a pass verdict that the program cannot fake by exiting early
  (``sys.exit(0)``, ``os._exit(0)``): the harness reports success through a
  secret token read from a pipe before the program starts, written only
  after the tests have run.

Programs run in parallel, one per core by default.
"""

from __future__ import annotations

import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("passed", "failed", "timeout", "error")
# The harness: read the token, run the program, then report. Exceptions in the program are
# failures (AssertionError) or errors (anything else); reaching the end writes the token.
_HARNESS = r"""
def main():
    import os, traceback
    assertion_error = AssertionError  # bound before the program can rebind the builtin
    token = os.read(0, 64)
    os.close(0)
    source = open("program.py", encoding="utf-8").read()
    try:
        exec(compile(source, "program.py", "exec"), {"__name__": "__main__"})
    except assertion_error:
        traceback.print_exc()
        os._exit(3)
    except BaseException:
        traceback.print_exc()
        os._exit(4)
    os.write(1, b"\n" + token + b"\n")
    os._exit(0)


main()
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one program."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    processes: int = 64
    file_mb: int = 16
    output_kb: int = 64


@dataclass(frozen=True)
class Outcome:
    """``status`` is passed, failed (an assertion failed), timeout or error, with the program's message."""

    status: str
    message: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _isolation() -> list[str]:
    """The command prefix that isolates a program as far as this OS allows.

    ``unshare --net --pid --fork --kill-child``: no network interfaces but a
    down loopback, and a PID namespace whose processes all die with it (a
    fork bomb cannot outlive its run). As root, ``setpriv`` then drops to
    ``nobody`` so nothing outside the sandbox folder can be written.
    """
    prefix = []
    unshare = shutil.which("unshare")
    candidate = [unshare, "--net", "--pid", "--fork", "--kill-child"] if unshare else []
    if candidate and subprocess.run([*candidate, "true"], capture_output=True).returncode == 0:
        prefix = candidate
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv and _nobody():
        uid, gid = _nobody()
        prefix += [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    return prefix


def _nobody() -> tuple[int, int] | None:
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return user.pw_uid, user.pw_gid


_ISOLATION = _isolation()
NETWORK_ISOLATED = "--net" in _ISOLATION
UNPRIVILEGED = any(part.endswith("setpriv") for part in _ISOLATION) or os.geteuid() != 0


def _limit(limits: Limits):  # noqa: ANN202 - a preexec_fn
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        size = limits.file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))

    return apply


def _tail(path: Path, limit: int) -> str:
    with path.open("rb") as handle:
        data = handle.read(limit)
    return data.decode("utf-8", "replace")


def run_program(program: str, limits: Limits = Limits()) -> Outcome:
    """Run one program (code plus its tests) in the sandbox and classify the result."""
    folder = Path(tempfile.mkdtemp(prefix="dateeval-sandbox-"))
    user = _nobody() if os.geteuid() == 0 and "--clear-groups" in _ISOLATION else None
    token = secrets.token_hex(16).encode()
    started = time.perf_counter()
    try:
        (folder / "program.py").write_text(program, encoding="utf-8")
        (folder / "harness.py").write_text(_HARNESS, encoding="utf-8")
        if user is not None:
            os.chown(folder, *user)
        stdout, stderr = (folder / "stdout"), (folder / "stderr")
        env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        command = [*_ISOLATION, sys.executable, "-I", "-S", "harness.py"]
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err,
                                       preexec_fn=_limit(limits), close_fds=True)  # fmt: skip
            try:
                process.stdin.write(token)
                process.stdin.close()
            except BrokenPipeError:
                pass
            try:
                code = process.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                return Outcome("timeout", f"no result within {limits.timeout_s:g} s", time.perf_counter() - started)
            finally:
                _kill_group(process)  # children the program left behind
        seconds = time.perf_counter() - started
        output, errors = _tail(stdout, limits.output_kb * 1024), _tail(stderr, limits.output_kb * 1024)
        if code == 0 and output.rstrip().endswith(token.decode()):
            return Outcome("passed", "", seconds)
        if code == 3:
            return Outcome("failed", errors.strip().splitlines()[-1] if errors.strip() else "AssertionError", seconds)
        reason = errors.strip().splitlines()[-1] if errors.strip() else f"exit status {code} before the tests finished"
        if code < 0:
            reason = f"killed by signal {signal.Signals(-code).name}"
        return Outcome("error", reason, seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def run_many(programs: Sequence[str], limits: Limits = Limits(), workers: int | None = None) -> list[Outcome]:
    """Run programs in parallel (one per core by default), results in input order."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda program: run_program(program, limits), programs))
