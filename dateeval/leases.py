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
one gets it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dateeval import leftovers

DEFAULT_TTL_S = 60.0


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

    @property
    def expired(self) -> bool:
        dead_here = self.owner.host == socket.gethostname() and not leftovers.process_alive(self.owner.pid)
        return dead_here or self.age_s > self.ttl_s


def lease_path(unit: Path) -> Path:
    return unit.with_name(f".{unit.name}.lease")


def holder(unit: Path) -> Holder | None:
    """The lease's holder, None when there is none; an unreadable lease counts as expired after its age says so."""
    path = lease_path(unit)
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    try:
        data = json.loads(path.read_text())
        return Holder(Owner(str(data["host"]), int(data["pid"]), str(data["token"])), float(data["ttl_s"]), age)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # Half-written by a driver killed between create and write: it expires by age like any silent owner.
        return Holder(Owner("?", -1, "?"), DEFAULT_TTL_S, age)


class Leases:
    """The leases one driver holds, with a heartbeat thread that keeps them alive."""

    def __init__(self, owner: Owner | None = None, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.owner = owner or Owner.this_process()
        self.ttl_s = ttl_s
        self._held: set[Path] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self, unit: Path) -> bool:
        """Take the unit's lease; False while another live owner holds it. OSError (a full disk) propagates."""
        unit.parent.mkdir(parents=True, exist_ok=True)
        path = lease_path(unit)
        with _guard(unit.parent):
            current = holder(unit)
            if current is not None and not current.expired:
                return False
            path.unlink(missing_ok=True)
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                with os.fdopen(descriptor, "w") as handle:
                    json.dump({"host": self.owner.host, "pid": self.owner.pid, "token": self.owner.token, "ttl_s": self.ttl_s}, handle)
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
        with _guard(unit.parent):
            current = holder(unit)
            if current is not None and current.owner == self.owner:
                lease_path(unit).unlink(missing_ok=True)

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
def _guard(folder: Path) -> Iterator[None]:
    """An exclusive lock on the folder's lease guard while a lease is checked and replaced: check-then-take is atomic.

    ``flock`` serialises processes on one host and, on NFSv4 and most cluster
    filesystems, across hosts; it is released by the kernel if its holder dies.
    """
    with (folder / ".leases.guard").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
