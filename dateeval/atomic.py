"""Writing a file or a folder in one step, the one way every writer does it (store units, run records, specs, outputs,
converted models, the installed demo).

A reader (another tab, process, or host on a shared folder) sees the old file or the new one, never half of one: the
writer fills a staging name beside the target and renames it into place. A failure removes the staging name; a kill
leaves it, named with its writer's host and pid, so :mod:`dateeval.leftovers` can tell when it may go.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from dateeval import leftovers


def staging_file(path: Path) -> Path:
    """``.{name}.{host}-{pid}-{random}.tmp`` beside ``path`` (the store's leftovers pattern reads this name)."""
    return path.parent / f".{path.name}.{leftovers.owner()}-{uuid.uuid4().hex[:8]}.tmp"


def staging_folder(folder: Path) -> Path:
    """``.{name}.tmp-{host}-{pid}`` beside ``folder`` (the model cache's leftovers pattern reads this name)."""
    return folder.parent / f".{folder.name}.tmp-{leftovers.owner()}"


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a staging file to write; when the block ends without an error it replaces ``path`` in one step.

    ``path``'s folder must exist (a store's writer makes it; a user's output to a folder that does not exist is refused,
    not created). A link at ``path`` is replaced, never written through. No staging file is left behind."""
    staging = staging_file(path)
    try:
        yield staging
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


@contextlib.contextmanager
def creating(folder: Path) -> Iterator[Path]:
    """Yield a staging folder to fill; when the block ends without an error it becomes ``folder`` in one step.

    Where another process made ``folder`` first (two servers, two conversions of one model), theirs stays and this
    one goes. Whatever happens, no staging folder is left behind."""
    staging = staging_folder(folder)
    shutil.rmtree(staging, ignore_errors=True)  # this process's own leftover from an earlier failure
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        yield staging
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
