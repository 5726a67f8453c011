"""A store's upkeep, beside its reads and writes: damaged files set aside so their units run again, staging files of
killed writes removed, and each folder's unit files compacted into one. Every step keeps what it cannot prove safe to
change: a file that failed with an operating-system error is left alone, a merged file replaces its originals only
once it reads back as written."""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from dateeval import leftovers
from dateeval.store import Store, StoreProblems, unit_file
from dateeval.store.text import arrow_table

# A write's staging file: `.{name}.{host}-{pid}-{hex}.tmp` (files from before the host was recorded lack it).
_STAGING = re.compile(r"^\..+?\.parquet\.(?:(?P<host>[^-/]+)-)?(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")

# Rows per row group of a compacted file (Parquet's default is 1 Mi). Its rows are ordered by question, so one
# question's rows (every date of it) lie in one or two groups, and a per-item read (``queries.item_rows``: DuckDB
# with the item pushed down) skips every other group by its item_id statistics: a paper-scale file's question is read
# in about 0.1 s instead of 0.4-0.6 s (a date-major file, every group holding every question), for a file about 10% larger.
COMPACTED_ROW_GROUP = 1 << 16


def set_aside(path: Path) -> Path:
    """Rename a damaged file so that no read sees it any more (it stops ending in .parquet); its bytes stay."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}")
    path.rename(aside)
    return aside


def set_aside_damaged(problems: StoreProblems) -> list[str]:
    """Move the damaged files a read reported out of the way, so that their units run again; one line each (and one
    for each file dateeval did not write, which stays where it is).

    A file that failed with an operating-system error is left alone: the
    error may pass, and its content is not known to be damaged.
    """
    lines = [
        f"store: {path} was not written by dateeval ({reason}); left alone and not read"
        for path, reason in problems.foreign
    ]
    for path, reason in problems.corrupted:
        if path in problems.unreachable:
            lines.append(f"store: cannot read {path} ({reason}); left in place, its rows are computed again beside it")
            continue
        try:
            aside = set_aside(path)
        except FileNotFoundError:
            continue  # another worker moved it aside first
        except OSError as error:
            lines.append(
                f"store: {path} is damaged ({reason}) and cannot be moved aside ({error.strerror}); its rows are computed again beside it"
            )
            continue
        lines.append(f"store: {path} is damaged ({reason}); moved aside to {aside.name}, its rows are computed again")
    return lines


def remove_leftovers(root: Path) -> list[Path]:
    """Remove staging files of writes killed before their rename (never one a live process is writing): in the unit
    folders (``<model>/<dataset>``) and in the folders kept beside them (the sidecars' ``.aggregates/<model>/<dataset>``)."""
    removed = []
    for path in (
        [path for pattern in ("*/*/.*.tmp", "*/*/*/.*.tmp") for path in root.glob(pattern)] if root.is_dir() else []
    ):
        match = _STAGING.match(path.name)
        if match and leftovers.abandoned(path, match["host"], int(match["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def compact(store: Store, merged: Callable[[Path, list[Path]], None] | None = None) -> tuple[int, int, StoreProblems]:
    """Merge each model/dataset folder's unit files into one file; returns (folders, files removed, problems).

    Thousands of small files slow every read; one file per folder is
    faster and smaller. Its rows are ordered by question, in row groups
    of ``COMPACTED_ROW_GROUP``, so that reading one question's rows
    touches one or two groups of it. Every input is verified in full (the read checks
    all its columns), the merged file is written (atomically), read back
    and compared with what was merged before any original is removed,
    and duplicates are dropped on read, so a kill at any point loses
    nothing. Unreadable or damaged files are left in place. Each merged
    file and the files it replaced are passed to ``merged`` (the sidecars'
    hook, ``sidecars.merged``, rebuilds theirs there).
    """
    all_problems = StoreProblems(removed=remove_leftovers(store.root))
    folders = sorted({path.parent for path in store.files()})
    removed = 0
    for folder in folders:
        paths = sorted(folder.glob("*.parquet"))
        frame, problems = store.read(paths=paths)
        all_problems.corrupted += problems.corrupted
        all_problems.foreign += problems.foreign
        all_problems.unreachable |= problems.unreachable
        broken = {path for path, _ in problems.corrupted + problems.foreign}
        readable = [path for path in paths if path not in broken]
        if len(readable) < 2:
            continue
        digest = uuid.uuid5(uuid.NAMESPACE_URL, "|".join(p.name for p in readable)).hex[:16]
        target = folder / f"compacted-{digest}.parquet"
        table = arrow_table(frame.sort_values("item_id", kind="stable", ignore_index=True))
        store.write(target, table, COMPACTED_ROW_GROUP)
        mismatch = unit_file.differs(target, table)
        if mismatch:
            if target not in readable:
                target.unlink(missing_ok=True)
            all_problems.corrupted.append(
                (target, f"the merged file did not read back as written ({mismatch}); the originals are kept")
            )
            continue
        replaced = [path for path in readable if path != target]
        for path in replaced:
            path.unlink()
        removed += len(replaced)
        if merged is not None:
            merged(target, replaced)
    return len(folders), removed, all_problems
