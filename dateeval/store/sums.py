"""What a unit's rows sum to: the per-unit sums every curve and table is made of, and the per-item table per-item
views read (the sidecars' contents, :mod:`dateeval.store.sidecars`).

One leaf that both sides import: the store's writers keep these as sidecars beside each unit; the results layer
(``dateeval.results.sources.unit_sums``) computes the same in memory where a store lacks them (a read-only mount), so a headline
reads the same numbers either way without calling back into the writer's module.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import xxhash

from dateeval import schema
from dateeval.metrics import METRICS, Grouped
from dateeval.schema import group_codes, predictions, with_factor
from dateeval.schema import CORPUS_COLUMNS, DESCRIPTION, ENTRY, GROUP
from dateeval.store.text import escape_text, has_surrogates

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
    """``schema.predictions`` as text that is equal exactly where pandas finds the values equal (1 == 1.0, 1 != '1').

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
