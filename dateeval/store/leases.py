"""Leases on work units: who computes a unit now, renewed by a heartbeat, taken over when its owner is gone.

A PID lock cannot tell a dead owner from a live one on another host, nor a
reused PID from its first owner; a lease can. Each lease is a small file
beside the unit (``.{unit}.lease``) holding its owner (host, PID and a
random id, so a reused PID is never mistaken for the owner) and a time to
live; its modification time is the heartbeat, renewed by the holder every
``ttl / 4``. Another driver takes a lease over when

* its owner is a dead process on this host (no need to wait: a killed
  sweep's units are taken at once), or
* its heartbeat is older than its time to live (the owner's host is gone,
  or it hangs): which works across hosts on a shared filesystem.

A live owner on another host keeps its lease for as long as it beats.
Checking and taking a lease happen under an exclusive ``flock`` on the
folder's guard file, so of several drivers racing for an expired lease exactly
one gets it. A driver told not to wait (``run --no-wait``) waits for the guard
at most ``GUARD_PATIENCE_S`` (other drivers hold it for milliseconds), then
names it. A lease or guard that is not a regular file (a FIFO would block
every open) is never opened as one; a heartbeat more than
``MAX_CLOCK_SKEW_S`` in the future is not believed; expired leases a killed
driver left beside finished units are removed when a sweep starts
(:meth:`Leases.remove_expired`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dateeval import leftovers
from dateeval.errors import DateEvalError

DEFAULT_TTL_S = 60.0
# A lease's time to live beyond which it is not believed: dateeval writes 60 s, and a lease that claims more
# (or Infinity, or NaN) would keep a unit from every other driver for as long as it claims, i.e. forever.
MAX_TTL_S = 3600.0
# Linux PIDs fit in a pid_t (and never exceed pid_max, at most 2**22); anything else is not a process.
_MAX_PID = 2**31 - 1
_MAX_LEASE_BYTES = 4096
# How far ahead of this host's clock a heartbeat may be and still be believed (clocks of hosts sharing a store
# drift by far less under NTP); one further ahead would hold its unit for as long as it is ahead.
MAX_CLOCK_SKEW_S = 60.0
# How long a driver told not to wait waits for the folder's guard: others hold it while they check and take a lease.
GUARD_PATIENCE_S = 1.0
GUARD = ".leases.guard"


@dataclass(frozen=True)
class Owner:
    """One driver process: the host, its PID and an id no other process shares."""

    host: str
    pid: int
    token: str

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), uuid.uuid4().hex)

    def describe(self) -> str:
        return f"{self.host} (pid {self.pid})"


@dataclass(frozen=True)
class Holder:
    """What a lease file says, and how old its heartbeat is."""

    owner: Owner
    ttl_s: float
    age_s: float
    problem: str | None = None

    @property
    def expired(self) -> bool:
        """Whether another driver may take the lease: a malformed one names no owner that could still hold it."""
        if self.problem is not None:
            return True
        dead_here = self.owner.host == socket.gethostname() and not leftovers.process_alive(self.owner.pid)
        return dead_here or self.age_s > self.ttl_s


def lease_path(unit: Path) -> Path:
    return unit.with_name(f".{unit.name}.lease")


def holder(unit: Path) -> Holder | None:
    """The lease's holder, None when there is none.

    A lease that cannot be read, or whose fields are out of range (half
    written by a driver killed between create and write, or edited by hand),
    is held by nobody: its ``problem`` says why, and it has expired. A
    driver writing a lease holds the folder's guard, as does every check
    that takes one over, so a lease being written is never seen half done.
    """
    path = lease_path(unit)
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    try:
        data = json.loads(_read_small(path))
        owner, ttl_s = _owner(data), _ttl(data["ttl_s"])
        if (
            age < -MAX_CLOCK_SKEW_S
        ):  # a heartbeat from the future (a clock, or a hand-set mtime): believed, it would hold that long
            raise ValueError(f"its heartbeat is {-age:.0f} s in the future")
        return Holder(owner, ttl_s, age)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
        detail = f"no field {error}" if isinstance(error, KeyError) else str(error) or type(error).__name__
        return Holder(Owner("?", -1, "?"), DEFAULT_TTL_S, age, problem=f"malformed lease {path}: {detail}")


def _read_small(path: Path) -> str:
    """A lease file's text; one far longer than any lease dateeval writes is not read whole, and anything but a regular
    file is not read at all (opened without blocking: opening a FIFO for reading waits for a writer)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("not a regular file")
        data = handle.read(_MAX_LEASE_BYTES + 1)
    if len(data) > _MAX_LEASE_BYTES:
        raise ValueError(f"longer than {_MAX_LEASE_BYTES} bytes")
    return data.decode("utf-8")


def _owner(data: dict) -> Owner:
    """The owner a lease file names; a PID no process can have is refused (``os.kill`` would overflow on it)."""
    pid = data["pid"]
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= _MAX_PID:
        raise ValueError(f"pid {pid!r} is not a process id")
    return Owner(str(data["host"]), pid, str(data["token"]))


def _ttl(value: object) -> float:
    """A lease's time to live, refused unless a finite number of seconds in (0, MAX_TTL_S]: NaN and Infinity never expire."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and 0 < value <= MAX_TTL_S)
    ):
        raise ValueError(f"ttl_s {value!r} is not a number of seconds in (0, {MAX_TTL_S:g}]")
    return float(value)


class Leases:
    """The leases one driver holds, with a heartbeat thread that keeps them alive."""

    def __init__(self, owner: Owner | None = None, ttl_s: float = DEFAULT_TTL_S, wait: bool = True) -> None:
        self.owner = owner or Owner.this_process()
        self.ttl_s = _ttl(ttl_s)  # others would read a lease outside the range as malformed
        self.patience_s = None if wait else GUARD_PATIENCE_S  # for each folder's guard (None: as long as it takes)
        self._held: set[Path] = set()
        # Malformed leases this driver replaced, said once each (the sweep reports them as warnings).
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self, unit: Path) -> bool:
        """Take the unit's lease; False while another live owner holds it. OSError (a full disk) propagates."""
        unit.parent.mkdir(parents=True, exist_ok=True)
        path = lease_path(unit)
        with _guard(unit.parent, self.patience_s):
            current = holder(unit)
            if current is not None and not current.expired:
                return False
            if current is not None and current.problem is not None:
                with self._lock:
                    self.notes.append(f"{current.problem}; taken over as expired")
            path.unlink(missing_ok=True)
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                with os.fdopen(descriptor, "w") as handle:
                    json.dump(
                        {
                            "host": self.owner.host,
                            "pid": self.owner.pid,
                            "token": self.owner.token,
                            "ttl_s": self.ttl_s,
                        },
                        handle,
                    )
            except OSError:
                path.unlink(missing_ok=True)
                raise
        with self._lock:
            self._held.add(unit)
        self._start_heartbeat()
        return True

    def release(self, unit: Path) -> None:
        """Give a unit back; only our own lease file is removed (a takeover's is not ours any more)."""
        with self._lock:
            self._held.discard(unit)
        with _guard(unit.parent, self.patience_s):
            current = holder(unit)
            if current is not None and current.owner == self.owner:
                lease_path(unit).unlink(missing_ok=True)

    def remove_expired(self, root: Path) -> list[str]:
        """Remove the expired leases in a store's unit folders; returns what was removed and why. A driver killed after its
        unit's rename and before its release leaves a lease beside a finished unit, which no sweep leases again."""
        removed = []
        for path in sorted(root.glob("*/*/.*.lease")) if root.is_dir() else []:
            unit = path.with_name(path.name.removeprefix(".").removesuffix(".lease"))
            with _guard(path.parent, self.patience_s):
                current = holder(unit)
                if current is not None and current.expired:
                    path.unlink(missing_ok=True)
                    removed.append(
                        f"{current.problem}; removed"
                        if current.problem
                        else f"removed {path}, an expired lease of {current.owner.describe()}"
                    )
        return removed

    def held(self) -> set[Path]:
        with self._lock:
            return set(self._held)

    def close(self) -> None:
        self._stop.set()
        for unit in self.held():
            self.release(unit)

    def _start_heartbeat(self) -> None:
        if self._beat is None:
            self._beat = threading.Thread(target=self._heartbeat, daemon=True, name="dateeval-leases")
            self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            for unit in self.held():
                try:
                    os.utime(lease_path(unit))
                except OSError:
                    pass  # taken over or removed: the write of that unit will find out


@contextlib.contextmanager
def _guard(folder: Path, patience_s: float | None) -> Iterator[None]:
    """An exclusive lock on the folder's lease guard while a lease is checked and replaced: check-then-take is atomic.

    ``flock`` serialises processes on one host and, on NFSv4 and most cluster
    filesystems, across hosts; it is released by the kernel if its holder dies.
    Opened for writing (NFS emulates an exclusive flock with a write lock).
    """
    path = folder / GUARD
    descriptor = _open_guard(path)
    try:
        _lock(descriptor, path, patience_s)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def _open_guard(path: Path) -> int:
    """The guard file, opened without blocking; anything but a regular file is refused in one line (a FIFO would block)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO nobody reads, a folder
            raise DateEvalError(f"lease guard {path} is not a regular file: remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise DateEvalError(f"lease guard {path} is not a regular file: remove it")
    return descriptor


def _lock(descriptor: int, path: Path, patience_s: float | None) -> None:
    """Take the guard: as long as it takes (``patience_s`` None), or within ``patience_s``, else one clear error."""
    if patience_s is None:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise DateEvalError(
                    f"another process has held the lease guard {path} for over {patience_s:g} s (--no-wait does not wait "
                    "for it): run again later, or without --no-wait to wait"
                ) from None
            time.sleep(0.01)
