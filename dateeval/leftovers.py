"""What a killed process leaves behind (staging files and folders), and when it is safe to remove.

Staging names carry their writer's host and pid. A leftover may go when its
writer is a dead process on this host, or, when the writer cannot be
checked (another host sharing the folder, or a name from before the host
was recorded), when nothing has touched it for a day. A live writer is never
disturbed: its pid is alive, and it keeps touching what it writes.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

STALE_AFTER_SECONDS = 24 * 3600


def host() -> str:
    """This host's name as staging names carry it (only characters safe in a file name)."""
    return re.sub(r"[^A-Za-z0-9._]", "_", socket.gethostname())


def owner() -> str:
    """The ``host-pid`` tag of a staging name written by this process."""
    return f"{host()}-{os.getpid()}"


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one we may not signal still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def abandoned(path: Path, writer_host: str | None, pid: int) -> bool:
    """Whether a staging file or folder written by ``writer_host``/``pid`` was left by a killed writer."""
    if writer_host == host():
        return not process_alive(pid)
    try:
        return time.time() - _last_touched(path) > STALE_AFTER_SECONDS
    except OSError:  # removed meanwhile
        return False


def _last_touched(path: Path) -> float:
    if not path.is_dir():
        return path.stat().st_mtime
    return max([path.stat().st_mtime, *(child.stat().st_mtime for child in path.rglob("*"))])
