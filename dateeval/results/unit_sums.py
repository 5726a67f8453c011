"""Per-unit sums as the statistics read them: from the sidecars the store keeps, or summed in memory where it lacks them.

The sums and their sidecars are the store's (:mod:`dateeval.store.sidecars`: what they hold, when they are written,
why a sidecar means "verified"). This module only reads: a unit without a sidecar (a store written before sidecars
existed, or a read-only one) is summed here, in this process, and held in memory, so a read-only store opens with
the same numbers and nothing in the folder changes; ``dateeval.keeping.keep`` writes what is missing.

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

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dateeval.metrics import METRICS
from dateeval.results import descriptive
from dateeval.rows import group_codes, with_factor
from dateeval.schema import DESCRIPTION, ENTRY, ENTRY_KEY, GROUP
from dateeval.store import Store, StoreProblems, sidecars
from dateeval.store.sums import OPTIONAL_COLUMNS, SOURCE_COLUMNS, of_rows

# Sidecars read in this process, by path: a sidecar's name fixes its content, so a live sweep's new units
# are the only ones read when the store changes.
_READ: dict[Path, pd.DataFrame] = {}
# Per-item sidecars summed in this process where the store lacks them (a read-only store, or one written before
# sidecars existed), as Arrow tables: text stays in Arrow buffers, not Python objects.
_ITEMS: dict[Path, pa.Table] = {}


def summed(store: Store, unit: Path) -> tuple[pd.DataFrame | None, StoreProblems]:
    """A unit without a sidecar summed in memory (``sidecars.summed``), its sums and per-item table held in this
    process under the names their sidecars would have; nothing is written."""
    found, problems = sidecars.summed(store, unit)
    if found is None:
        return None, problems
    if found.path is not None:
        _ITEMS[sidecars.items_sidecar(found.path)] = found.items
        _READ[found.path] = found.sums
    return found.sums, problems


def load(store: Store) -> tuple[pd.DataFrame, StoreProblems]:
    """Every unit's sums, from its sidecar or (once per process) from its rows; damaged units are reported and left out."""

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
            sums, found = summed(store, unit)
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
            notes.append(
                f"{dataset}: entries scored reading different option labels are not comparable ({said}); "
                "the label alone can move accuracy by 20 points"
            )
    return notes


def confidence_notes(sums: pd.DataFrame) -> list[str]:
    """Why entries have no confidence (and so no ECE) on some conditions, as their rows state it: one line per entry and dataset."""
    if "confidence_note" not in sums:
        return []
    noted = sums[sums["confidence_note"].notna()]
    return [
        f"{entry} on {dataset}: no confidence and no ECE on {len(part)} condition(s): {part['confidence_note'].iloc[0]}"
        for (entry, dataset), part in noted.groupby(["entry", "dataset"], sort=True)
    ]


def metric_columns() -> list[str]:
    """The per-condition metrics table's columns: what identifies the condition, then every registered metric."""
    return ENTRY + [
        "entry",
        "condition",
        "factor",
        "date_mode",
        "date",
        "task",
        "label_variant",
        "n_items",
        *METRICS,
        "mean_confidence",
    ]


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
    return metrics(of_rows(descriptive.common_items(with_factor(frame)))).sort_values(
        ENTRY + ["date_mode", "date"], ignore_index=True
    )


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
    table = (
        pd.concat([part for part in parts if len(part)], ignore_index=True) if any(len(p) for p in parts) else parts[0]
    )
    table["entry"] = descriptive.entry_label(table)  # labels tell entries apart across both parts
    return table.sort_values(ENTRY + ["date_mode", "date"], ignore_index=True), problems


def _in(frame: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """Whether each row of ``frame`` belongs to one of the entries in ``keys`` (missing hardware matches missing)."""
    if keys.empty:
        return np.zeros(len(frame), dtype=bool)
    both = pd.concat([keys[ENTRY_KEY], frame[ENTRY_KEY]], ignore_index=True)
    codes = group_codes(both, ENTRY_KEY)
    return np.isin(codes[len(keys) :], codes[: len(keys)])
