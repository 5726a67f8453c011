"""Per-unit sidecars: the sums every curve and table is made of, written beside a unit when it is committed.

A paper-scale store holds tens of millions of per-item rows, but the
Overview, Curves and Leaderboard need, per entry x condition, only a few
additive numbers: rows, graded rows and right answers, the confidence sum,
the ECE bin sums, and the BLEU/chrF sufficient statistics. They are
computed once per unit file and kept in a small sidecar::

    STORE/.aggregates/<model>/<dataset>/<unit name>.<size>-<mtime_ns>.v<FORMAT>.parquet

Beside it, ``….items.parquet`` keeps what per-item views need, and nothing
else: per row its sums row (``group``), item, grade, confidence, sentence
score, answer and the comparable answer it gave (``rows.predictions``
as text: numbers tagged ``#``, texts ``=``), so the Flips page and the
statistics build per-entry matrices (``dateeval.results.item_matrices``) without
decoding the unit's option probabilities, outputs and repeated labels.
Item, answer and prediction are int32 codes, each with its distinct values
kept once in a column of its own (see :data:`CODED`): reading and
verifying an entry's millions of rows then decodes no text per row.

Only the store's writers write them: a sweep's commit (:func:`write_unit`), ``compact``'s hook (:func:`merged`) and
an explicit keep (:func:`keep_missing`, for units written before sidecars existed or of an older ``FORMAT``). The
results layer reads them, and computes in memory (:func:`summed`) what a store lacks: a read-only store opens with
the same numbers. The name carries the unit's size and modification time, so a replaced unit never matches an old
sidecar, and ``FORMAT`` changes whenever their columns do. Sidecars are written through ``Store.write`` (atomic,
checksummed) and verified whenever they are read.

**Verified units.** A sidecar is only made from a unit read back with every
column verified against its checksums (``full_check``), and only if the
unit did not change meanwhile. So a sidecar for a unit's current size and
mtime is the verdict "this file was verified in full": the per-item DuckDB
reads of ``dateeval.results.sql`` (DuckDB knows nothing of these checksums)
read only such files. Damage after that verdict without a write (bit rot)
is caught by the next ``Store.read`` or sweep, not by those reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from dateeval import schema
from dateeval.errors import DateEvalError
from dateeval.metrics import METRICS, Grouped
from dateeval.rows import group_codes, predictions, with_factor
from dateeval.schema import CORPUS_COLUMNS, DESCRIPTION, ENTRY, GROUP
from dateeval.store import Store, StoreProblems, escape_text, has_surrogates

FOLDER = ".aggregates"
FORMAT = 7  # bump when the sidecars' columns change: older ones are then rebuilt from their units
# Per-item columns the sums are made of (plus the row key, so that a unit's own duplicates are dropped as a read does).
SOURCE_COLUMNS = [
    *dict.fromkeys(
        [
            *ENTRY,
            "condition",
            "condition_key",
            "factor",
            "date_mode",
            "date",
            "date_text",
            "item_id",
            "task",
            "label_variant",
            "prompt_hash",
            "correct",
            "confidence",
            "pred",
            "answer",
        ]
    )
]
# The columns every unit dateeval ever wrote has (a file lacking one is not summed: it has nothing to sum).
REQUIRED_COLUMNS = [*ENTRY, "condition_key", "item_id", "correct"]
# Read where a unit has them: generated answers' parsed form, translations' sentence score.
OPTIONAL_COLUMNS = [*CORPUS_COLUMNS, "parsed", "score", "confidence_note", "design"]


def sidecar(root: Path, unit: Path, stat: os.stat_result) -> Path:
    """Where the aggregates of ``unit`` as it is now (its size and mtime) are kept."""
    relative = unit.relative_to(root)
    return root / FOLDER / relative.parent / f"{unit.name}.{stat.st_size}-{stat.st_mtime_ns}.v{FORMAT}.parquet"


def items_sidecar(sums: Path) -> Path:
    """Where the per-item sidecar kept beside the sums sidecar ``sums`` is."""
    return sums.with_suffix(".items.parquet")


def of_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One unit's (duplicate-free) rows summed per entry x condition: one sidecar row per group."""
    frame = with_factor(frame)
    codes = group_codes(frame, GROUP)
    groups = int(codes.max()) + 1
    out = frame.iloc[np.unique(codes, return_index=True)[1]][GROUP + DESCRIPTION].reset_index(drop=True)
    out["n_rows"] = np.bincount(codes, minlength=groups)
    grouped = Grouped(frame, codes, groups)
    for metric in METRICS.values():  # each metric's own additive columns (``Metric.sums``)
        for name, values in metric.sums(grouped).items():
            out[name] = values
    out["date_text"] = _first_text(frame, "date_text", codes, groups)
    out["confidence_note"] = _first_text(frame, "confidence_note", codes, groups)  # why a server left confidences out
    out["design"] = _first_text(
        frame, "design", codes, groups
    )  # a sparse sweep's draw (``dateeval.sparse``): its rows are a sample
    out["items"] = _item_digests(frame["item_id"], codes, groups)
    out["group"] = np.arange(groups, dtype=np.int32)
    return out


def _first_text(frame: pd.DataFrame, column: str, codes: np.ndarray, groups: int) -> np.ndarray | None:
    """A text column's first value per group (None where a group has none, or the unit lacks the column)."""
    if column not in frame:
        return None
    return frame[column].groupby(codes).first().reindex(range(groups)).astype(object).to_numpy()


# Per-item sidecar columns kept as int32 codes (-1: missing); ``<name>_values`` holds the value of code i on row i,
# null past the last one (a column as long as the others, whose nulls cost next to nothing to store, read and verify).
CODED = ["item_id", "answer", "prediction"]


def of_items(frame: pd.DataFrame) -> pa.Table:
    """One unit's (duplicate-free) rows as the per-item sidecar: each row's sums row and what per-item views read."""
    frame = with_factor(frame)
    columns = {
        "group": pa.array(group_codes(frame, GROUP).astype(np.int32)),
        "correct": pa.array(frame["correct"].astype(float).to_numpy()),
        "confidence": pa.array(frame["confidence"].astype(float).to_numpy()),
        "score": pa.array(frame["score"].astype(float).to_numpy() if "score" in frame else np.full(len(frame), np.nan)),
    }
    for name, values in zip(CODED, (frame["item_id"], frame["answer"], prediction_text(frame))):
        columns[name], columns[f"{name}_values"] = _coded(values)
    return pa.table(columns)


def _coded(values: pd.Series | np.ndarray) -> tuple[pa.Array, pa.Array]:
    """A column as int32 codes (-1 where missing) and its distinct values, padded with nulls to the column's length."""
    codes, uniques = pd.factorize(values)
    distinct = pa.array(np.asarray(uniques, dtype=object) if len(uniques) else [], from_pandas=True)
    return pa.array(codes.astype(np.int32)), pa.concat_arrays(
        [distinct, pa.nulls(len(codes) - len(distinct), distinct.type)]
    )


def prediction_text(frame: pd.DataFrame) -> np.ndarray:
    """``descriptive.predictions`` as text that is equal exactly where pandas finds the values equal (1 == 1.0, 1 != '1').

    A missing answer is ``schema.UNPARSEABLE``, one value of its own. Values are converted once per distinct value,
    so millions of rows cost one factorisation.
    """

    def text(value: object) -> str:
        if pd.isna(value):
            return f"={schema.UNPARSEABLE}"
        if has_surrogates(value):  # a reply's text that Arrow cannot hold: escaped, under a prefix of its own
            return f"~{escape_text(value)}"
        return f"#{float(value)!r}" if isinstance(value, (int, float, np.integer, np.floating)) else f"={value}"

    codes, uniques = pd.factorize(predictions(frame), use_na_sentinel=False)
    return np.array([text(value) for value in uniques], dtype=object)[codes]


def _item_digests(items: pd.Series, codes: np.ndarray, groups: int) -> list[str]:
    """Per group, its number of distinct items and the sum (mod 2^64) of their ids' hashes: equal sets, equal digests."""
    item_codes, uniques = pd.factorize(items)
    hashes = np.array([xxhash.xxh3_64_intdigest(str(item).encode()) for item in uniques], dtype=np.uint64)
    pairs = np.unique(codes.astype(np.int64) * len(uniques) + item_codes)
    group_of = pairs // len(uniques)
    starts = np.flatnonzero(np.r_[True, group_of[1:] != group_of[:-1]])
    sums = np.add.reduceat(hashes[pairs % len(uniques)], starts)
    counts = np.diff(np.r_[starts, len(pairs)])
    return [f"{n}:{int(s):016x}" for n, s in zip(counts, sums)]  # every group has a row, so a start


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
