"""Which questions flip with the date, and Table 7, as a store's entries give them (each kept)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dateeval.results import descriptive
from dateeval.results.sources import item_matrices, sql
from dateeval.results.entries import HELD_ENTRIES, EntryData

# What :meth:`FlipReads.between` gives: one row per entry and question graded on both dates, each date's side
# suffixed ``_a`` / ``_b``; ``answer`` is the reference (a choice task's option index), ``pred`` a choice task's chosen
# option, ``parsed`` a generated answer, ``date_text`` the date as the prompt carried it.
SIDES = ["correct", "pred", "parsed", "confidence", "system_prompt", "date_text"]
BETWEEN_COLUMNS = ["entry", "item_id", "answer", "change", *(f"{c}_{side}" for side in "ab" for c in SIDES)]
RIGHT_TO_WRONG, WRONG_TO_RIGHT = "right → wrong", "wrong → right"


class FlipReads:
    """The flip readers of :class:`~dateeval.results.view.Results` (its ``flips``), read from the shared entry data."""

    def __init__(self, data: EntryData) -> None:
        self.data = data
        # both tables from one computation
        self._computed_flips = functools.lru_cache(maxsize=HELD_ENTRIES)(self._compute_flips)

    def flips(self, entry: str, dataset: str, start: dt.date, end: dt.date) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Per-question flips and Table 7 of one entry's dates in [start, end] (each kept; the dataset's whole range is
        kept when a sweep ends), from its condition x item matrices. A sparse entry's flips read every cell it scored
        (``share_observed``: how much of each question's range was seen); its Table 7 reads its dates scored in full,
        as a question seen on fewer dates looks more consistent."""
        return self._flip_table(entry, dataset, start, end, "flips"), self._flip_table(
            entry, dataset, start, end, "table7"
        )

    def _flip_table(self, entry: str, dataset: str, start: dt.date, end: dt.date, name: str) -> pd.DataFrame:
        """One of :meth:`flips`' tables, read alone where kept (Table 7 is one row; the flips are one per question)."""

        def compute() -> list[dict]:
            return _records(self._computed_flips(entry, dataset, start, end)[("flips", "table7").index(name)])

        rows = self.data._kept(name, entry, dataset, (str(start), str(end)), (), compute)
        if name == "table7":
            return pd.DataFrame(rows, columns=item_matrices.TABLE7_COLUMNS).astype(
                dict.fromkeys(["consistent_confidence", "inconsistent_confidence"], float)
            )
        rates = dict.fromkeys(
            ["mean_confidence", "min_confidence", "mean_score"], float
        )  # a column missing on every item comes back as None
        flips = pd.DataFrame(rows, columns=item_matrices.FLIP_COLUMNS).astype(rates)
        return flips.assign(answer=flips["answer"].where(flips["answer"].notna(), np.nan))

    def _compute_flips(
        self, entry: str, dataset: str, start: dt.date, end: dt.date
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        found = self.data.entry_outcomes(entry, dataset)
        if found is None:
            return item_matrices.no_flips()
        flips, table7 = item_matrices.flips(found, start, end)
        if (
            entry,
            dataset,
        ) in self.data.sparse_entries():  # every cell seen, drawn dates included: who moves, how often
            observed = item_matrices.load(self.data.store, self.data._with_drawn(entry, dataset))
            flips = item_matrices.flips(observed, start, end)[0] if observed is not None else flips
        return flips, table7

    def flips_of(
        self, entries: Sequence[str], dataset: str, start: dt.date, end: dt.date
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """:meth:`flips` of several entries: their questions most-changing first, and their Table 7 rows."""
        parts = [self.flips(entry, dataset, start, end) for entry in sorted(entries)]
        flips = pd.concat(
            [part[0] for part in parts if len(part[0])] or [item_matrices.no_flips()[0]], ignore_index=True
        )
        table7 = pd.concat(
            [part[1] for part in parts if len(part[1])] or [item_matrices.no_flips()[1]], ignore_index=True
        )
        return flips.sort_values(
            ["changes", "mean_confidence"], ascending=[False, True], kind="stable", ignore_index=True
        ), table7

    def between(self, dataset: str, a: dt.date, b: dt.date) -> pd.DataFrame:
        """Every entry's answers to the dataset's questions on date ``a`` and on date ``b`` side by side
        (:data:`BETWEEN_COLUMNS`), for the questions an entry answered with a grade on both: the date as a perturbation,
        as HELM shows one. ``change`` says :data:`RIGHT_TO_WRONG` (a regression from ``a`` to ``b``),
        :data:`WRONG_TO_RIGHT`, or ``""`` where the grade stayed. Read from the two dates' rows alone (the questions
        pushed down to two conditions per entry); a sparse entry's drawn dates are not among them (their sample's cells
        are estimates' inputs, not a date scored in full)."""
        sides = [_on(self.data, dataset, day).add_suffix(f"_{side}") for side, day in (("a", a), ("b", b))]
        both = sides[0].merge(sides[1], left_on=["entry_a", "item_id_a"], right_on=["entry_b", "item_id_b"])
        both = both.rename(columns={"entry_a": "entry", "item_id_a": "item_id"})
        both["answer"] = both["answer_a"].where(both["answer_a"].notna(), both["answer_b"])
        right_a, right_b = both["correct_a"].astype(bool), both["correct_b"].astype(bool)
        both["change"] = np.select([right_a & ~right_b, ~right_a & right_b], [RIGHT_TO_WRONG, WRONG_TO_RIGHT], "")
        return both[BETWEEN_COLUMNS].sort_values(["item_id", "entry"], ignore_index=True)

    def table7(self, dataset: str | None = None) -> pd.DataFrame:
        """Table 7 (confidence of answers that stay vs change with the date) over each entry's whole stored range."""
        parts = [
            self._flip_table(entry, name, *descriptive.date_range(self.data.metrics, name), "table7")
            for entry, name in self.data.dated_entries()
            if dataset in (None, name)
        ]
        parts = [part for part in parts if len(part)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=item_matrices.TABLE7_COLUMNS)


def _on(reads: EntryData, dataset: str, day: dt.date) -> pd.DataFrame:
    """Every entry's graded rows of the dataset on ``day`` (its date condition only), one per question: the first of a
    question's rows in file order, as a read of the store keeps it."""
    wanted = ["item_id", "factor", "date", "answer", *SIDES]
    dated = reads.sums["dataset"].eq(dataset) & reads.sums["factor"].eq("date")
    chosen = dated & pd.to_datetime(reads.sums["date"], errors="coerce", format="mixed").eq(pd.Timestamp(day))
    rows = sql.rows(*reads.sources(chosen), wanted, (day, day)) if chosen.any() else pd.DataFrame(columns=wanted)
    rows = rows.astype({"item_id": str, "entry": str}) if len(rows) else rows.assign(entry=pd.Series(dtype=str))
    rows = rows[rows["factor"].astype(object).eq("date") & rows["correct"].notna()]
    return rows.drop_duplicates(["entry", "item_id"])[["entry", "item_id", "answer", *SIDES]].reset_index(drop=True)


def _records(table: pd.DataFrame) -> list[dict]:
    """A table's rows as kept rows: missing values as None (a text column holding NaN cannot be written)."""
    return table.astype(object).where(table.notna(), None).to_dict("records")
