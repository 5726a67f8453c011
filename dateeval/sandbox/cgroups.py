"""One cgroup per sandboxed program, so that its memory limit counts everything it holds, in all its processes.

A per-process limit (``RLIMIT_AS``) lets a program fork six children of
700 MB each, and counts neither memfd files nor tmpfs pages. A cgroup's
memory controller charges every page the program's processes allocate:
anonymous and shared memory, tmpfs and memfd files, page tables and pipe
buffers. Each program gets its own group (a memory limit with no swap, and a
process count where the pids controller is there), made before its first
instruction runs: ``bwrap`` starts from a shell that moved itself into the
group, so every process it creates is born inside.

Both cgroup versions are used, because hosts differ: v2 where its memory
controller is delegated to us (our own group or its parent), else v1's
memory and pids hierarchies (this is the case on hosts that still mount
them). Where neither can be written, :func:`hierarchies` returns nothing and
the sandbox denies what it could not count instead (see
:mod:`dateeval.sandbox`).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Files written in a new group: name, value (formatted with the limits), and whether it must exist.
_LIMIT_FILES = {
    (2, "memory"): [
        ("memory.max", "{memory}", True),
        ("memory.swap.max", "0", False),
        ("memory.oom.group", "1", False),
    ],
    (1, "memory"): [("memory.limit_in_bytes", "{memory}", True), ("memory.memsw.limit_in_bytes", "{memory}", False)],
    (2, "pids"): [("pids.max", "{pids}", True)],
    (1, "pids"): [("pids.max", "{pids}", True)],
}
# Where the kernel counts out-of-memory kills: "oom_kill N" in this file.
_OOM_FILES = {2: "memory.events", 1: "memory.oom_control"}


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup folder we may create groups in, its cgroup version, and which of memory / pids it limits."""

    parent: Path
    version: int
    controllers: frozenset[str]


def _mounts(mountinfo: str) -> list[tuple[Path, str, str, set[str]]]:
    """(mount point, file system type, root inside the hierarchy, super options) of each cgroup mount."""
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        tail = fields[fields.index("-") + 1 :]
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((Path(fields[4]), tail[0], fields[3], set(tail[2].split(","))))
    return mounts


def _own_groups(proc_cgroup: str) -> dict[str, str]:
    """Our group's path per v1 controller, and under "" our v2 group, from ``/proc/self/cgroup``."""
    groups = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _inside(mount: Path, root: str, path: str) -> Path | None:
    """Where ``path`` (a path in the hierarchy) is under ``mount`` (which shows the hierarchy from ``root``)."""
    relative = os.path.relpath(path, root)
    return None if relative.startswith("..") else (mount / relative).resolve()


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def discover(mountinfo: str, proc_cgroup: str) -> list[Hierarchy]:
    """The hierarchies to make per-program groups in: v2 if it delegates memory to us, else v1's; empty if none."""
    mounts, own = _mounts(mountinfo), _own_groups(proc_cgroup)
    for mount, kind, root, _ in mounts:
        here = _inside(mount, root, own.get("", "/")) if kind == "cgroup2" else None
        for candidate in [here, here.parent] if here is not None and here != mount else [here]:
            if candidate is None or not candidate.is_relative_to(mount) or not _writable(candidate):
                continue
            enabled = frozenset((candidate / "cgroup.subtree_control").read_text().split()) & {"memory", "pids"}
            if "memory" in enabled:
                return [Hierarchy(candidate, 2, enabled)]
    found = []
    for controller in ("memory", "pids"):
        for mount, kind, root, options in mounts:
            here = (
                _inside(mount, root, own.get(controller, "/")) if kind == "cgroup" and controller in options else None
            )
            if here is not None and _writable(here) and controller not in {c for h in found for c in h.controllers}:
                found.append(Hierarchy(here, 1, frozenset({controller})))
    return found if any("memory" in h.controllers for h in found) else []


@lru_cache(maxsize=1)
def hierarchies() -> tuple[Hierarchy, ...]:
    """This process's usable hierarchies, tried once by making and removing a group (empty: no cgroups here)."""
    try:
        found = discover(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
        ProgramGroup(tuple(found), 64 << 20, 8).remove()
    except (OSError, ValueError):
        return ()
    return tuple(found)


_names = itertools.count()


class ProgramGroup:
    """One program's groups (one per hierarchy), limited to ``memory_bytes`` with no swap and ``pids`` tasks."""

    def __init__(self, found: tuple[Hierarchy, ...], memory_bytes: int, pids: int) -> None:
        if not found:
            raise OSError("no cgroup hierarchy to make a group in")
        name = f"dateeval-sandbox-{os.getpid()}-{next(_names)}"
        self.groups: list[tuple[Path, Hierarchy]] = []
        try:
            for hierarchy in found:
                self.groups.append((hierarchy.parent / name, hierarchy))
                self.groups[-1][0].mkdir()
                for controller in hierarchy.controllers:
                    self._write_limits(self.groups[-1][0], hierarchy.version, controller, memory_bytes, pids)
        except OSError:
            self.remove()
            raise

    @staticmethod
    def _write_limits(group: Path, version: int, controller: str, memory_bytes: int, pids: int) -> None:
        for name, value, required in _LIMIT_FILES[version, controller]:
            if required or (group / name).exists():
                (group / name).write_text(value.format(memory=memory_bytes, pids=pids))

    def launcher(self) -> list[str]:
        """A command prefix that moves itself into the groups, then runs the rest: no instruction runs outside."""
        script = 'for f do [ "$f" = -- ] && break; echo 0 > "$f" || exit 126; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *(str(group / "cgroup.procs") for group, _ in self.groups), "--"]

    def out_of_memory(self) -> bool:
        """Whether the kernel killed one of the program's processes for passing the memory limit."""
        for group, hierarchy in self.groups:
            if "memory" in hierarchy.controllers:
                try:
                    lines = (group / _OOM_FILES[hierarchy.version]).read_text().splitlines()
                except OSError:
                    return False
                return any(line.split()[:1] == ["oom_kill"] and int(line.split()[1]) > 0 for line in lines)
        return False

    def remove(self) -> None:
        """Remove the groups once empty (the kernel refuses while a process is still leaving: retried for a second)."""
        for group, _ in reversed(self.groups):
            for _ in range(100):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.groups = []
