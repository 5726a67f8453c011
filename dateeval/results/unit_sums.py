"""Per-unit aggregates: the sums every curve and table is made of, kept beside the store so pages never scan rows.

A paper-scale store holds tens of millions of per-item rows, but the
Overview, Curves and Leaderboard need, per entry x condition, only a few
additive numbers: rows, graded rows and right answers, the confidence sum,
the ECE bin sums, and the BLEU/chrF sufficient statistics. They are
computed once per unit file and kept in a small sidecar::

    STORE/.aggregates/<model>/<dataset>/<unit name>.<size>-<mtime_ns>.v<FORMAT>.parquet

Beside it, ``….items.parquet`` keeps what per-item views need, and nothing
else: per row its sums row (``group``), item, grade, confidence, sentence
score, answer and the comparable answer it gave (``descriptive.predictions``
as text: numbers tagged ``#``, texts ``=``), so the Flips page and the
statistics build per-entry matrices (``dateeval.results.item_matrices``) without
decoding the unit's option probabilities, outputs and repeated labels.
Item, answer and prediction are int32 codes, each with its distinct values
kept once in a column of its own (see :data:`CODED`): reading and
verifying an entry's millions of rows then decodes no text per row.

either when the unit is written (``Store.write_unit``) or, for a file
written before sidecars existed, the first time the store is loaded. The
name carries the unit's size and modification time, so a replaced unit
never matches an old sidecar, and ``FORMAT`` changes whenever their
columns do, so sidecars of an older format are rebuilt. Sidecars are written through ``Store.write``
(atomic, checksummed) and verified whenever they are read.

**Verified units.** A sidecar is only made from a unit read back with every
column verified against its checksums (``full_check``), and only if the
unit did not change meanwhile. So a sidecar for a unit's current size and
mtime is the verdict "this file was verified in full": the per-item DuckDB
reads of ``dateeval.results.sql`` (DuckDB knows nothing of these checksums)
read only such files. Damage after that verdict without a write (bit rot)
is caught by the next ``Store.read`` or sweep, not by those reads.

**Exact, never approximate.** ``of_rows_metrics`` (the same sums over rows) drops rows
duplicated across files and keeps only the items every condition of an
entry scored. Summing sidecars reproduces it exactly when each entry x
condition lives in a single file (nothing to drop) and all conditions of an
entry hold the same items (an order-free digest of their ids). An entry
that fails either test (e.g. a wider sweep added items to conditions
already stored; compaction merges them again) is computed from its per-item
rows by ``condition_metrics`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import xxhash

from dateeval import schema
from dateeval.errors import DateEvalError
from dateeval.metrics import METRICS, Grouped
from dateeval.results import descriptive
from dateeval.schema import CORPUS_COLUMNS, DESCRIPTION, ENTRY, ENTRY_KEY, GROUP
from dateeval.store import Store, StoreProblems, escape_text, has_surrogates

FOLDER = ".aggregates"
FORMAT = 6  # bump when the sidecars' columns change: older ones are then rebuilt from their units
# Per-item columns the sums are made of (plus the row key, so that a unit's own duplicates are dropped as a read does).
SOURCE_COLUMNS = [*dict.fromkeys([*ENTRY, "condition", "condition_key", "factor", "date_mode", "date", "date_text", "item_id", "task", "label_variant",
                                  "prompt_hash", "correct", "confidence", "pred", "answer"])]  # fmt: skip
# Read where a unit has them: generated answers' parsed form, translations' sentence score.
OPTIONAL_COLUMNS = [*CORPUS_COLUMNS, "parsed", "score", "confidence_note"]
# Sidecars read in this process, by path: a sidecar's name fixes its content, so a live sweep's new units
# are the only ones read when the store changes.
_READ: dict[Path, pd.DataFrame] = {}
# Per-item sidecars kept in this process only where the store could not take them (read-only), as Arrow tables:
# text stays in Arrow buffers, not Python objects.
_ITEMS: dict[Path, pa.Table] = {}


def sidecar(root: Path, unit: Path, stat: os.stat_result) -> Path:
    """Where the aggregates of ``unit`` as it is now (its size and mtime) are kept."""
    relative = unit.relative_to(root)
    return root / FOLDER / relative.parent / f"{unit.name}.{stat.st_size}-{stat.st_mtime_ns}.v{FORMAT}.parquet"


def items_sidecar(sums: Path) -> Path:
    """Where the per-item sidecar kept beside the sums sidecar ``sums`` is."""
    return sums.with_suffix(".items.parquet")


def discard(root: Path, unit: Path) -> None:
    """Remove every sidecar of ``unit`` (it was replaced or removed)."""
    folder = root / FOLDER / unit.relative_to(root).parent
    for path in folder.glob(f"{unit.name}.*-*.parquet") if folder.is_dir() else []:
        path.unlink(missing_ok=True)
        _READ.pop(path, None)
        _ITEMS.pop(path, None)


def write_unit(store: Store, path: Path, rows: list[dict] | pd.DataFrame | pa.Table, row_group_size: int | None = None) -> None:
    """Commit a unit: write its rows (``Store.write``), then its sidecars from the file read back with every column
    verified, so pages draw from the sums without scanning rows and per-item reads may trust the file as verified.
    A sidecar that cannot be written costs only speed: readers build missing ones themselves."""
    store.write(path, rows, row_group_size)
    build(store, path)


def merged(store: Store) -> Callable[[Path, list[Path]], None]:
    """``Store.compact``'s hook: the merged file gets its sidecars, the files it replaced lose theirs."""

    def rebuild(target: Path, replaced: list[Path]) -> None:
        build(store, target)
        for path in replaced:
            discard(store.root, path)

    return rebuild


def of_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One unit's (duplicate-free) rows summed per entry x condition: one sidecar row per group."""
    frame = descriptive.with_factor(frame)
    codes = descriptive._codes(frame, GROUP)
    groups = int(codes.max()) + 1
    out = frame.iloc[np.unique(codes, return_index=True)[1]][GROUP + DESCRIPTION].reset_index(drop=True)
    out["n_rows"] = np.bincount(codes, minlength=groups)
    grouped = Grouped(frame, codes, groups)
    for metric in METRICS.values():  # each metric's own additive columns (``Metric.sums``)
        for name, values in metric.sums(grouped).items():
            out[name] = values
    out["date_text"] = _first_text(frame, "date_text", codes, groups)
    out["confidence_note"] = _first_text(frame, "confidence_note", codes, groups)  # why a server left confidences out
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
    frame = descriptive.with_factor(frame)
    columns = {"group": pa.array(descriptive._codes(frame, GROUP).astype(np.int32)), "correct": pa.array(frame["correct"].astype(float).to_numpy()),
               "confidence": pa.array(frame["confidence"].astype(float).to_numpy()),
               "score": pa.array(frame["score"].astype(float).to_numpy() if "score" in frame else np.full(len(frame), np.nan))}  # fmt: skip
    for name, values in zip(CODED, (frame["item_id"], frame["answer"], prediction_text(frame))):
        columns[name], columns[f"{name}_values"] = _coded(values)
    return pa.table(columns)


def _coded(values: pd.Series | np.ndarray) -> tuple[pa.Array, pa.Array]:
    """A column as int32 codes (-1 where missing) and its distinct values, padded with nulls to the column's length."""
    codes, uniques = pd.factorize(values)
    distinct = pa.array(np.asarray(uniques, dtype=object) if len(uniques) else [], from_pandas=True)
    return pa.array(codes.astype(np.int32)), pa.concat_arrays([distinct, pa.nulls(len(codes) - len(distinct), distinct.type)])


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

    codes, uniques = pd.factorize(descriptive.predictions(frame), use_na_sentinel=False)
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


def build(store: Store, unit: Path) -> tuple[pd.DataFrame | None, StoreProblems]:
    """Verify ``unit`` in full, sum it and keep the sums in its sidecar (in memory only where the store is read-only).

    Returns None (and the reason in the problems) for a damaged or
    unreadable unit. The unit's size and mtime are taken before the read and
    checked after it, so a unit replaced meanwhile never gets the old one's sums.
    """
    before = unit.stat()
    frame, problems = store.read(columns=SOURCE_COLUMNS, paths=[unit], optional=OPTIONAL_COLUMNS, full_check=True)
    if problems.corrupted or frame.empty:
        return None, problems
    sums = of_rows(frame).assign(source=str(unit.relative_to(store.root)))
    after = unit.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        return sums, problems  # replaced while read: correct now, but not to be kept under either name
    path = sidecar(store.root, unit, before)
    discard(store.root, unit)
    items = of_items(frame)
    try:
        store.write(items_sidecar(path), items)  # first: a sums sidecar on disk promises its items sidecar
        store.write(path, sums)
    except DateEvalError:  # a read-only store (a shared or packaged one): the sidecars live in this process only
        _ITEMS[items_sidecar(path)] = items
    _READ[path] = sums
    return sums, problems


def load(store: Store) -> tuple[pd.DataFrame, StoreProblems]:
    """Every unit's sums, from its sidecar or (once) from its rows; damaged units are reported and left out."""

    problems, parts = StoreProblems(), []
    for unit in store.files():
        try:
            path = sidecar(store.root, unit, unit.stat())
        except FileNotFoundError:
            continue  # compacted away since it was listed
        sums = _READ.get(path)
        if sums is None and path.exists():
            sums = _read_sidecar(store, path)
        if sums is None:
            sums, found = build(store, unit)
            problems.corrupted += found.corrupted
            problems.foreign += found.foreign
            problems.unreachable |= found.unreachable
        if sums is not None:
            parts.append(sums)
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*GROUP, *DESCRIPTION, "source"])), problems


def _read_sidecar(store: Store, path: Path) -> pd.DataFrame | None:
    """A sidecar's sums, verified; None when it is damaged (its unit is then summed again)."""
    frame, problems = store.read(paths=[path])
    if problems.corrupted or frame.empty:
        return None
    _READ[path] = frame
    return frame


def inexact_entries(sums: pd.DataFrame) -> pd.DataFrame:
    """The entries (``ENTRY_KEY`` rows) whose metrics the sums cannot give exactly (see the module's docstring)."""
    split = sums.groupby(GROUP, sort=False, dropna=False)["source"].transform("nunique") > 1
    mixed = sums.groupby(ENTRY_KEY, sort=False, dropna=False)["items"].transform("nunique") > 1
    return sums.loc[(split | mixed).to_numpy(), ENTRY_KEY].drop_duplicates(ignore_index=True)


def label_notes(sums: pd.DataFrame) -> list[str]:
    """Datasets whose entries read different option labels (" A" in-process, "A" over a chat API): not comparable."""
    notes = []
    for dataset, part in sums.dropna(subset=["label_variant"]).groupby("dataset", sort=True):
        variants = part.groupby("label_variant")["entry"].unique()
        if len(variants) > 1:
            said = "; ".join(f"{', '.join(sorted(entries))} read {variant!r}" for variant, entries in variants.items())
            notes.append(f"{dataset}: entries scored reading different option labels are not comparable ({said}); "
                         "the label alone can move accuracy by 20 points")  # fmt: skip
    return notes


def confidence_notes(sums: pd.DataFrame) -> list[str]:
    """Why entries have no confidence (and so no ECE) on some conditions, as their rows state it: one line per entry and dataset."""
    if "confidence_note" not in sums:
        return []
    noted = sums[sums["confidence_note"].notna()]
    return [f"{entry} on {dataset}: no confidence and no ECE on {len(part)} condition(s): {part['confidence_note'].iloc[0]}"
            for (entry, dataset), part in noted.groupby(["entry", "dataset"], sort=True)]  # fmt: skip


def metric_columns() -> list[str]:
    """The per-condition metrics table's columns: what identifies the condition, then every registered metric."""
    return ENTRY + ["entry", "condition", "factor", "date_mode", "date", "task", "label_variant", "n_items", *METRICS, "mean_confidence"]


def metrics(sums: pd.DataFrame) -> pd.DataFrame:
    """Per-condition metrics from summed rows, one per sums row: each metric finishes its own columns (``Metric.finish``)."""
    if sums.empty:
        return pd.DataFrame(columns=metric_columns())
    out = sums[ENTRY + ["condition", "factor", "date_mode", "date", "task", "label_variant"]].copy()
    out["n_items"] = sums["n_rows"].to_numpy()
    for metric in METRICS.values():
        for name, values in metric.finish(sums).items():
            out[name] = values
    out["entry"] = descriptive.entry_label(out)
    return out[metric_columns()]


def of_rows_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """Per entry x condition metrics of rows read from the store, on the items every condition of an entry scored:
    the same sums and finish as the sidecars, over all of a condition's rows at once."""
    if frame.empty:
        return pd.DataFrame(columns=metric_columns())
    return metrics(of_rows(descriptive.common_items(descriptive.with_factor(frame)))).sort_values(ENTRY + ["date_mode", "date"], ignore_index=True)


def condition_metrics(store: Store, sums: pd.DataFrame) -> tuple[pd.DataFrame, StoreProblems]:
    """Per entry x condition metrics of the whole store, equal to :func:`of_rows_metrics` of all its rows.

    Exact entries come from the sums; the others from their own files' rows
    (read, verified and de-duplicated by the store), with any unreadable file reported.
    """

    if sums.empty:
        return metrics(sums), StoreProblems()
    inexact = inexact_entries(sums)
    on_rows = _in(sums, inexact)
    parts, problems = [metrics(sums[~on_rows])], StoreProblems()
    if on_rows.any():
        paths = [store.root / source for source in dict.fromkeys(sums.loc[on_rows, "source"])]
        frame, problems = store.read(columns=SOURCE_COLUMNS, paths=paths, optional=OPTIONAL_COLUMNS)
        parts.append(of_rows_metrics(frame[_in(frame, inexact)]))
    table = pd.concat([part for part in parts if len(part)], ignore_index=True) if any(len(p) for p in parts) else parts[0]
    table["entry"] = descriptive.entry_label(table)  # labels tell entries apart across both parts
    return table.sort_values(ENTRY + ["date_mode", "date"], ignore_index=True), problems


def _in(frame: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """Whether each row of ``frame`` belongs to one of the entries in ``keys`` (missing hardware matches missing)."""
    if keys.empty:
        return np.zeros(len(frame), dtype=bool)
    both = pd.concat([keys[ENTRY_KEY], frame[ENTRY_KEY]], ignore_index=True)
    codes = descriptive._codes(both, ENTRY_KEY)
    return np.isin(codes[len(keys):], codes[: len(keys)])
