"""Per-unit sidecars: the sums every curve and table is made of, written beside a unit when it is committed.

A paper-scale store holds tens of millions of per-item rows, but the
Overview, Curves and Leaderboard need, per entry x condition, only a few
additive numbers: rows, graded rows and right answers, the confidence sum,
the ECE bin sums, and the BLEU/chrF sufficient statistics. They are
computed once per unit file and kept in a small sidecar::

    STORE/.aggregates/<model>/<dataset>/<unit name>.<size>-<mtime_ns>.v<FORMAT>.parquet

Beside it, ``….items.parquet`` keeps what per-item views need, and nothing
else: per row its sums row (``group``), item, grade, confidence, sentence
score, answer and the comparable answer it gave (``schema.predictions``
as text: numbers tagged ``#``, texts ``=``), so the Flips page and the
statistics build per-entry matrices (``dateeval.results.sources.item_matrices``) without
decoding the unit's option probabilities, outputs and repeated labels.
Item, answer and prediction are int32 codes, each with its distinct values
kept once in a column of its own (see :data:`CODED`): reading and
verifying an entry's millions of rows then decodes no text per row.

What they hold is computed in :mod:`dateeval.store.sums` (a leaf the results layer imports too). Only the store's
writers write them: a sweep's commit (:func:`write_unit`), ``compact``'s hook (:func:`merged`) and
an explicit keep (:func:`keep_missing`, for units written before sidecars existed or of an older ``FORMAT``). The
results layer reads them, and computes in memory (:func:`summed`) what a store lacks: a read-only store opens with
the same numbers. The name carries the unit's size and modification time, so a replaced unit never matches an old
sidecar, and ``FORMAT`` changes whenever their columns do. Sidecars are written through ``Store.write`` (atomic,
checksummed) and verified whenever they are read.

**Verified units.** A sidecar is only made from a unit read back with every
column verified against its checksums (``full_check``), and only if the
unit did not change meanwhile. So a sidecar for a unit's current size and
mtime is the verdict "this file was verified in full": the per-item DuckDB
reads of ``dateeval.results.sources.sql`` (DuckDB knows nothing of these checksums)
read only such files. Damage after that verdict without a write (bit rot)
is caught by the next ``Store.read`` or sweep, not by those reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dateeval.errors import DateEvalError
from dateeval.store import Store, StoreProblems
from dateeval.store.sums import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SOURCE_COLUMNS, of_items, of_rows

FOLDER = ".aggregates"
FORMAT = 7  # bump when the sidecars' columns change: older ones are then rebuilt from their units


def sidecar(root: Path, unit: Path, stat: os.stat_result) -> Path:
    """Where the aggregates of ``unit`` as it is now (its size and mtime) are kept."""
    relative = unit.relative_to(root)
    return root / FOLDER / relative.parent / f"{unit.name}.{stat.st_size}-{stat.st_mtime_ns}.v{FORMAT}.parquet"


def on_disk(root: Path, path: Path, problems: StoreProblems | None = None) -> bool:
    """Whether a sidecar (or a statistic kept beside them) is on disk to read. One in a folder this user may not read
    (``chmod 000``) counts as absent: its unit is read instead, as in a store without sidecars (the same numbers, more
    slowly), and the folder is named in ``problems`` for the reader's warning rather than ending it in a traceback."""
    try:
        return path.exists()
    except PermissionError:
        if problems is not None:
            problems.unread_sidecars.add(root / FOLDER)
        return False


def items_sidecar(sums: Path) -> Path:
    """Where the per-item sidecar kept beside the sums sidecar ``sums`` is."""
    return sums.with_suffix(".items.parquet")


@dataclass(frozen=True)
class Summed:
    """One unit's sums and per-item sidecar, and where they belong (None: the unit changed while it was read, so
    they are right for now but kept under neither name)."""

    sums: pd.DataFrame
    items: pa.Table
    path: Path | None


def summed(store: Store, unit: Path) -> tuple[Summed | None, StoreProblems]:
    """Verify ``unit`` in full and sum it, writing nothing; None (and the reason in the problems) for a damaged or
    unreadable unit. The unit's size and mtime are taken before the read and checked after it, so a unit replaced
    meanwhile never gets the old one's name."""
    before = unit.stat()
    frame, problems = store.read(columns=SOURCE_COLUMNS, paths=[unit], optional=OPTIONAL_COLUMNS, full_check=True)
    if problems.corrupted or frame.empty:
        return None, problems
    missing = sorted(set(REQUIRED_COLUMNS) - set(pq.read_schema(unit).names))
    if missing:  # a file with the identity columns but not what is summed: named, left out, not a traceback later
        problems.corrupted.append((unit, f"it has no {', '.join(missing)} (every unit dateeval writes has them)"))
        return None, problems
    sums = of_rows(frame).assign(source=str(unit.relative_to(store.root)))
    after = unit.stat()
    unchanged = (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return Summed(sums, of_items(frame), sidecar(store.root, unit, before) if unchanged else None), problems


def write(store: Store, unit: Path, found: Summed) -> None:
    """Keep a unit's sidecars on disk in place of any older ones; raises ``DateEvalError`` where the store cannot
    take them (read-only)."""
    if found.path is None:
        return
    try:
        discard(store.root, unit)
        store.write(items_sidecar(found.path), found.items)  # first: a sums sidecar on disk promises its items sidecar
        store.write(found.path, found.sums)
    except OSError as error:  # the folder could not be made or cleared
        raise DateEvalError(f"cannot keep sidecars in {store.root}: {error.strerror or error}") from None


def write_unit(
    store: Store, path: Path, rows: list[dict] | pd.DataFrame | pa.Table, row_group_size: int | None = None
) -> None:
    """Commit a unit: write its rows (``Store.write``), then its sidecars from the file read back with every column
    verified, so pages draw from the sums without scanning rows and per-item reads may trust the file as verified.
    A sidecar that cannot be written costs only speed: readers sum the unit themselves."""
    store.write(path, rows, row_group_size)
    found, _ = summed(store, path)
    if found is not None:
        try:
            write(store, path, found)
        except DateEvalError:
            pass


def merged(store: Store) -> Callable[[Path, list[Path]], None]:
    """``Store.compact``'s hook: the merged file gets its sidecars, the files it replaced lose theirs."""

    def rebuild(target: Path, replaced: list[Path]) -> None:
        found, _ = summed(store, target)
        if found is not None:
            write(store, target, found)
        for path in replaced:
            discard(store.root, path)

    return rebuild


def keep_missing(store: Store) -> StoreProblems:
    """Write the sidecars of every unit that lacks them (written before sidecars existed, or of an older ``FORMAT``);
    damaged units are reported, never summed. Raises ``DateEvalError`` where the store cannot take them."""
    problems = StoreProblems()
    for unit in store.files():
        try:
            path = sidecar(store.root, unit, unit.stat())
        except FileNotFoundError:
            continue  # compacted away since it was listed
        if path.exists() and items_sidecar(path).exists():
            continue
        found, more = summed(store, unit)
        problems.corrupted += more.corrupted
        problems.foreign += more.foreign
        problems.unreachable |= more.unreachable
        if found is not None:
            write(store, unit, found)
    return problems


def discard(root: Path, unit: Path) -> None:
    """Remove every sidecar of ``unit`` (it was replaced or removed)."""
    folder = root / FOLDER / unit.relative_to(root).parent
    for path in folder.glob(f"{unit.name}.*-*.parquet") if folder.is_dir() else []:
        path.unlink(missing_ok=True)
