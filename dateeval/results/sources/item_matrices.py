"""One entry's per-item results as condition x item matrices, from the per-item sidecars.

The Flips page, the Overview's headline, the Curves' bands and the
statistics need every item on every condition of one entry: millions of
rows at paper scale. Reading them as rows costs seconds per entry (text
columns, a window over text answers). The per-item sidecars
(``dateeval.store.sums.of_items``: verified with the unit, only the columns
these views read, answers as comparable text) fill dense matrices instead,
and the views are array arithmetic on those.

**Exact.** Every function here gives what its row-based counterpart gives
on the same rows (the test oracles ``item_flips`` and ``confidence_by_consistency``,
``stats.outcome_matrices``; tests compare them). That holds when each
(condition, item) has one row, as every sweep writes it. Where one has
more (two prompts for one item and condition, or files that overlap),
:func:`load` returns None and callers use the row-based path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from dateeval import schema
from dateeval.store import Store, tables

FLIP_COLUMNS = [
    "entry",
    "dataset",
    "item_id",
    "n_dates",
    "share_observed",
    "n_correct",
    "n_wrong",
    "changes",
    "n_predictions",
    "consistent",
    "mean_confidence",
    "min_confidence",
    "mean_score",
    "answer",
]
TABLE7_COLUMNS = ["entry", "dataset", "consistent_confidence", "inconsistent_confidence", "n_inconsistent", "n_items"]


@dataclass(frozen=True)
class Outcomes:
    """Conditions (rows) x items (columns, sorted by id) of one entry; NaN / -1 where a cell has no value."""

    conditions: pd.DataFrame  # one sums row per condition: ``schema.GROUP`` and ``DESCRIPTION`` columns, ``entry``
    items: np.ndarray  # item ids, sorted
    present: np.ndarray  # bool: the cell has a row
    correct: np.ndarray  # float: 1 right, 0 wrong, NaN ungraded or absent
    confidence: np.ndarray
    score: np.ndarray  # sentence chrF of translations
    prediction: np.ndarray  # int32 codes of the comparable answer (``sums.prediction_text``), -1 absent
    answer: np.ndarray  # int32 codes into ``answers``, -1 missing
    answers: np.ndarray  # the distinct reference answers (object)


def load(store: Store, sums: pd.DataFrame) -> Outcomes | None:
    """The matrices of the conditions in ``sums`` (rows of ``store.tables.unit_sums`` with ``entry``: one entry and dataset).

    Reads the per-item sidecars of their units, rebuilding any that is missing
    or damaged from its (verified) unit; a (condition, item) with more than one
    row takes the first (:func:`_first_rows`). None when a unit cannot be read.
    """
    conditions = sums.drop_duplicates(schema.GROUP, ignore_index=True)
    row_of = pd.Series(
        np.arange(len(conditions)), index=pd.MultiIndex.from_frame(conditions[schema.GROUP].astype(object))
    )
    units = []
    for source, part in sums.groupby("source", sort=True):
        table = tables.unit_items(store, store.root / source)
        if table is None:
            return None
        rows = row_of.reindex(pd.MultiIndex.from_frame(part[schema.GROUP].astype(object))).to_numpy()
        local = table["group"].to_numpy()
        groups = np.full(max(int(local.max(initial=-1)), int(part["group"].max())) + 1, -1, dtype=np.int64)
        groups[part["group"].to_numpy()] = rows
        row = groups[local]
        keep = row >= 0  # the unit's other entries are left out
        units.append(_Unit(table, row[keep], slice(None) if keep.all() else keep))
    if not units:
        return None
    ids = [unit.values("item_id").astype(object) for unit in units]
    items = np.unique(np.concatenate(ids))
    shape = (len(conditions), len(items))
    cells = [
        unit.row * shape[1] + np.searchsorted(items, distinct)[unit.column("item_id")]
        for unit, distinct in zip(units, ids)
    ]
    present = np.zeros(shape, dtype=bool)
    units, cells = zip(*(_first_rows(unit, where, present) for unit, where in zip(units, cells)))
    floats = {name: _matrix(shape, cells, units, name) for name in ("correct", "confidence", "score")}
    prediction, _ = _coded(shape, cells, units, "prediction")
    answer, answers = _coded(shape, cells, units, "answer")
    return Outcomes(
        conditions,
        items,
        present,
        floats["correct"],
        floats["confidence"],
        floats["score"],
        prediction,
        answer,
        answers,
    )


@dataclass(frozen=True)
class _Unit:
    """One unit's per-item sidecar, and which of its rows belong to the entry (``keep``) on which matrix row (``row``)."""

    table: pa.Table
    row: np.ndarray
    keep: np.ndarray | slice

    def column(self, name: str) -> np.ndarray:
        """A column's values on the kept rows (codes for ``sums.CODED`` columns)."""
        return self.table[name].to_numpy()[self.keep]

    def values(self, name: str) -> np.ndarray:
        """The distinct values a coded column's codes stand for (``sums.CODED``)."""
        column = self.table[f"{name}_values"]
        return column.slice(0, len(column) - column.null_count).to_numpy(zero_copy_only=False)


def _first_rows(unit: _Unit, cells: np.ndarray, present: np.ndarray) -> tuple[_Unit, np.ndarray]:
    """The unit's rows on cells no earlier unit (in source order) filled, marked filled: one row per (condition, item).

    Two files can hold one condition's item (workers that raced on a unit, a sweep rerun into a copy); as a read of
    the store keeps the first of duplicate rows, the first file in source order gives the cell its value.
    """
    fresh = ~present.flat[cells]
    fresh[fresh] = _first_of(cells[fresh])
    present.flat[cells[fresh]] = True
    if fresh.all():
        return unit, cells
    rows = np.arange(unit.table.num_rows)[unit.keep]
    return _Unit(unit.table, unit.row[fresh], rows[fresh]), cells[fresh]


def _first_of(cells: np.ndarray) -> np.ndarray:
    """Which of ``cells`` are the first occurrence of their value."""
    first = np.zeros(len(cells), dtype=bool)
    first[np.unique(cells, return_index=True)[1]] = True
    return first


def _matrix(shape: tuple[int, int], cells: Sequence[np.ndarray], units: Sequence[_Unit], name: str) -> np.ndarray:
    """A float matrix of a column's values at their cells, NaN elsewhere (a read-only NaN view where none has a value)."""
    columns = [unit.column(name) for unit in units]
    if all(np.isnan(column).all() for column in columns):
        return np.broadcast_to(np.float64(np.nan), shape)  # e.g. sentence scores of a choice task: no memory
    matrix = np.full(shape, np.nan)
    for where, column in zip(cells, columns):
        matrix.flat[where] = column
    return matrix


def _coded(
    shape: tuple[int, int], cells: Sequence[np.ndarray], units: Sequence[_Unit], name: str
) -> tuple[np.ndarray, np.ndarray]:
    """A matrix of int32 codes of a coded column, equal values equal codes across files (-1 where missing), and the values."""
    values: dict[object, int] = {}
    matrix = np.full(shape, -1, dtype=np.int32)
    for where, unit in zip(cells, units):
        local = np.array(
            [values.setdefault(value, len(values)) for value in unit.values(name).tolist()] + [-1], dtype=np.int32
        )
        matrix.flat[where] = local[unit.column(name)]  # code -1 (missing) takes the last: -1
    return matrix, np.array(list(values), dtype=object)


def _dated(outcomes: Outcomes, start: dt.date, end: dt.date) -> np.ndarray:
    """Rows of the date conditions in [start, end], in date order (as the row-based views sort them)."""
    conditions = outcomes.conditions
    day = pd.to_datetime(conditions["date"], errors="coerce", format="mixed")
    inside = (conditions["factor"] == "date").to_numpy() & day.between(
        pd.Timestamp(start), pd.Timestamp(end)
    ).to_numpy()
    rows = np.flatnonzero(inside)
    return rows[np.argsort(conditions["date"].to_numpy()[rows].astype(str), kind="stable")]


def _cut(matrix: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``matrix[rows][:, columns]``: a copy, except where that is all of it in order (the full year of a complete entry,
    the common case), which is the matrix itself: millions of cells not copied per matrix."""
    whole = [
        len(index) == size and bool((index == np.arange(size)).all())
        for index, size in zip((rows, columns), matrix.shape)
    ]
    return matrix if all(whole) else matrix[np.ix_(rows, columns)]


def no_flips() -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`flips` of no question: the empty tables, with their columns."""
    return pd.DataFrame(columns=FLIP_COLUMNS), pd.DataFrame(columns=TABLE7_COLUMNS)


def flips(outcomes: Outcomes, start: dt.date, end: dt.date) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``oracles.item_flips`` and ``oracles.confidence_by_consistency`` (tests) of the date conditions in [start, end]."""
    rows = _dated(outcomes, start, end)
    seen = np.flatnonzero(outcomes.present[rows].any(0))
    if not len(seen):
        return no_flips()
    present, prediction, answer, correct, confidence, score = (
        _cut(matrix, rows, seen)
        for matrix in (
            outcomes.present,
            outcomes.prediction,
            outcomes.answer,
            outcomes.correct,
            outcomes.confidence,
            outcomes.score,
        )
    )
    # each cell's previous present row (the item's previous date), -1 before its first
    last = np.maximum.accumulate(np.where(present, np.arange(len(rows), dtype=np.int32)[:, None], np.int32(-1)), axis=0)
    previous = np.vstack([np.full((1, present.shape[1]), -1, dtype=np.int32), last[:-1]])
    before = np.take_along_axis(prediction, np.maximum(previous, 0), axis=0)
    changes = (present & (previous >= 0) & (prediction != before)).sum(0)
    distinct = np.sort(np.where(present, prediction, -1), axis=0)
    n_predictions = ((np.diff(distinct, axis=0) != 0) & (distinct[1:] >= 0)).sum(0) + (distinct[0] >= 0)
    graded, known = np.isfinite(correct), np.isfinite(confidence)
    n_correct = np.where(graded, correct, 0).sum(0).astype(int)
    confidence_sum, confidence_count = np.where(known, confidence, 0).sum(0), known.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = confidence_sum / confidence_count
        mean_score = np.nansum(score, 0) / np.isfinite(score).sum(0)
    min_confidence = np.where(known.any(0), np.where(known, confidence, np.inf).min(0), np.nan)
    code = answer[np.argmax(answer >= 0, axis=0), np.arange(answer.shape[1])]  # the first answer by date
    entry, dataset = outcomes.conditions["entry"].iloc[0], outcomes.conditions["dataset"].iloc[0]
    table = pd.DataFrame(
        {
            "entry": entry,
            "dataset": dataset,
            "item_id": outcomes.items[seen],
            "n_dates": present.sum(0),
            "share_observed": present.sum(0) / len(rows),  # below 1 where a sparse sweep drew some of its dates
            "n_correct": n_correct,
            "n_wrong": graded.sum(0) - n_correct,
            "changes": changes,
            "n_predictions": n_predictions,
            "consistent": n_predictions == 1,
            "mean_confidence": mean_confidence,
            "min_confidence": min_confidence,
            "mean_score": mean_score,
            "answer": np.append(outcomes.answers, np.nan)[code],  # code -1 (none on any date): the NaN
        }
    )
    order = np.lexsort((np.arange(len(table)), np.where(np.isnan(mean_confidence), np.inf, mean_confidence), -changes))
    consistent = n_predictions == 1
    with np.errstate(invalid="ignore", divide="ignore"):  # per item, then over items, as Table 7 sums them
        shares = [confidence_sum[side].sum() / confidence_count[side].sum() for side in (consistent, ~consistent)]
    table7 = pd.DataFrame(
        [
            {
                "entry": entry,
                "dataset": dataset,
                "consistent_confidence": shares[0],
                "inconsistent_confidence": shares[1],
                "n_inconsistent": int((~consistent).sum()),
                "n_items": len(table),
            }
        ]
    )
    return table.iloc[order].reset_index(drop=True), table7[TABLE7_COLUMNS]


def matrices(outcomes: Outcomes, rows: np.ndarray, level: str) -> tuple[list, np.ndarray, np.ndarray] | None:
    """``stats.outcome_matrices(stats.graded(...), level)`` of the conditions ``rows`` (indices into ``conditions``).

    None when two of those conditions share a level (which row's value the
    row-based path keeps would depend on file order).
    """
    correct = outcomes.correct[rows]
    rows = rows[np.isfinite(correct).any(1)]  # a level without a graded row is no level
    values = outcomes.conditions[level].to_numpy()[rows]
    if len(set(values)) < len(values):
        return None
    rows = rows[np.argsort(values.astype(str), kind="stable")] if len(rows) else rows
    correct = outcomes.correct[rows]
    every = np.isfinite(correct).all(0) & np.isfinite(correct).any(0)
    return list(outcomes.conditions[level].to_numpy()[rows]), correct[:, every], outcomes.confidence[rows][:, every]
