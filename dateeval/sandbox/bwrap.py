"""The bubblewrap command a sandbox runs under: what it sees (read-only binds of only what the interpreter needs, no
site-packages, a size-capped tmpfs), how it is isolated (namespaces, its own user id, its syscall filter) and its
limits; :func:`ensure_available` fails once, clearly, where no sandbox can start. :mod:`dateeval.sandbox` runs the
programs in it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dateeval.errors import DateEvalError
from dateeval.sandbox import seccomp


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


def bwrap_command(limits: Limits, seccomp_fd: int) -> list[str]:
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


def process_memory_mb(limits: Limits, counted: bool) -> int:
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
    command = [*bwrap_command(Limits(), filter_read), "pass"]
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
