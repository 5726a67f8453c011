"""What the results layer reads from a store, in the store's own formats: the per-unit sums, a unit's per-item table,
the rows sums are made of, and where the costly statistics are kept.

The sidecars' layout and contents are the store's (:mod:`dateeval.store.sidecars`, :mod:`dateeval.store.sums`); the
statistics ask here, so they never name a sidecar's path or column. A unit without a sidecar (a store written before
sidecars existed, or a read-only one) is summed here, in this process, and held in memory, so a read-only store opens
with the same numbers and nothing in the folder changes; ``dateeval.keeping.keep`` writes what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import xxhash

from dateeval.schema import DESCRIPTION, GROUP
from dateeval.store import Store, StoreProblems, sidecars
from dateeval.store.sums import OPTIONAL_COLUMNS, SOURCE_COLUMNS, of_rows

# Sidecars read in this process, by path: a sidecar's name fixes its content, so a live sweep's new units
# are the only ones read when the store changes.
_READ: dict[Path, pd.DataFrame] = {}
# Per-item sidecars summed in this process where the store lacks them (a read-only store, or one written before
# sidecars existed), as Arrow tables: text stays in Arrow buffers, not Python objects.
_ITEMS: dict[Path, pa.Table] = {}
# The folder, beside the sidecars, of the statistics kept with the store (the results layer's ``stored``).
KEPT_FOLDER = "derived"


def _summed(store: Store, unit: Path) -> tuple[pd.DataFrame | None, StoreProblems]:
    """A unit without a sidecar summed in memory (``sidecars.summed``), its sums and per-item table held in this
    process under the names their sidecars would have; nothing is written."""
    found, problems = sidecars.summed(store, unit)
    if found is None:
        return None, problems
    if found.path is not None:
        _ITEMS[sidecars.items_sidecar(found.path)] = found.items
        _READ[found.path] = found.sums
    return found.sums, problems


def unit_sums(store: Store) -> tuple[pd.DataFrame, StoreProblems]:
    """Every unit's sums (one row per entry x condition of a unit, with its ``source``), from its sidecar or (once per
    process) from its rows; damaged units are reported and left out."""

    problems, parts = StoreProblems(), []
    for unit in store.files():
        try:
            path = sidecars.sidecar(store.root, unit, unit.stat())
        except FileNotFoundError:
            continue  # compacted away since it was listed
        sums = _READ.get(path)
        if sums is None and sidecars.on_disk(store.root, path, problems):
            sums = _read_sidecar(store, path)
        if sums is None:
            sums, found = _summed(store, unit)
            problems.corrupted += found.corrupted
            problems.foreign += found.foreign
            problems.unreachable |= found.unreachable
        if sums is not None:
            parts.append(sums)
    return (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*GROUP, *DESCRIPTION, "source"])
    ), problems


def _read_sidecar(store: Store, path: Path) -> pd.DataFrame | None:
    """A sidecar's sums, verified; None when it is damaged (its unit is then summed again)."""
    frame, problems = store.read(paths=[path])
    if problems.corrupted or frame.empty:
        return None
    _READ[path] = frame
    return frame


def unit_items(store: Store, unit: Path) -> pa.Table | None:
    """A unit's verified per-item table (``sums.of_items``; summed in memory when its sidecar is missing or damaged);
    None when the unit is unreadable."""
    try:
        path = sidecars.items_sidecar(sidecars.sidecar(store.root, unit, unit.stat()))
    except FileNotFoundError:
        return None
    if path in _ITEMS:
        return _ITEMS[path]
    table = store.read_table(path) if sidecars.on_disk(store.root, path) else None
    if table is None:
        _summed(store, unit)
        table = _ITEMS.get(path)
    return table


def source_rows(store: Store, units: Sequence[Path]) -> tuple[pd.DataFrame, StoreProblems]:
    """The rows of ``units`` that sums are made of (read, verified and de-duplicated by the store), for what the sums
    cannot give exactly."""
    return store.read(columns=SOURCE_COLUMNS, paths=list(units), optional=OPTIONAL_COLUMNS)


def rows_summed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows read by :func:`source_rows` summed per entry x condition, exactly as a unit's sidecar sums its own."""
    return of_rows(frame)


def kept_path(store: Store, name: str, label: str, units: Sequence[Path], version: int, arguments: tuple) -> Path:
    """Where the rows of the kept statistic ``name`` (at ``version``) for these units, as they are now, and arguments
    are kept: the key digests the units' paths, sizes and mtimes, so a new or replaced unit is never read stale.
    ``label`` (an entry and dataset) names the file a newer result replaces."""
    stats = [(str(unit.relative_to(store.root)), unit.stat()) for unit in sorted(set(units))]
    material = repr(
        (version, sidecars.FORMAT, name, arguments, [(path, s.st_size, s.st_mtime_ns) for path, s in stats])
    )
    return (
        store.root
        / sidecars.FOLDER
        / KEPT_FOLDER
        / name
        / f"{xxhash.xxh64_hexdigest(label.encode())}.{xxhash.xxh3_128_hexdigest(material.encode())}.parquet"
    )


def kept_rows(store: Store, path: Path) -> list[dict] | None:
    """The kept rows at ``path`` (:func:`kept_path`), verified; None when none are kept there or they are damaged."""
    table = store.read_table(path) if sidecars.on_disk(store.root, path) else None
    return table.to_pylist() if table is not None else None
