"""Per-condition metrics finished from the per-unit sums the store gives (``dateeval.store.tables.unit_sums``).

The sums, their sidecars and their format are the store's (:mod:`dateeval.store.sidecars`: what they hold, when they
are written, why a sidecar means "verified"; :mod:`dateeval.store.tables`: how a reader gets them, summed in memory
where a unit has no sidecar). This module only finishes them into metrics and notes.

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

import numpy as np
import pandas as pd

from dateeval.metrics import METRICS
from dateeval.results import descriptive
from dateeval.schema import group_codes, with_factor
from dateeval.schema import ENTRY, ENTRY_KEY, GROUP
from dateeval.store import Store, StoreProblems, tables


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
    return metrics(tables.rows_summed(descriptive.common_items(with_factor(frame)))).sort_values(
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
        frame, problems = tables.source_rows(store, paths)
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
