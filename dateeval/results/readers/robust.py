"""The date-robust number (issue 20 §2) as a store's entries give it: every reader of it (``robust``, What to
report, the report, ``compare``) calls these."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dateeval import __version__
from dateeval.results.sparse import estimated
from dateeval.results.robust import identity, ranks, robust, robust_record
from dateeval.results.sources import sql
from dateeval.results.robust.identity import Identity
from dateeval.results.robust.robust_row import RobustRow
from dateeval.results.entries import EntryData, Period


class RobustReads:
    """The robust-number readers of :class:`~dateeval.results.view.Results` (its ``robust``), read from the shared
    entry data: each entry's row (kept), the leaderboard, its pairs, the machine-readable record with what produced
    each entry, and model against model."""

    def __init__(self, data: EntryData) -> None:
        self.data = data

    def robust_entry(self, entry: str, dataset: str, period: Period | None = None) -> RobustRow | None:
        """``robust.entry_statistics`` of one entry's dates in ``period`` (kept: the two-way bootstrap and its
        matrices cost seconds at paper scale), with its ``dates`` and ``per_date`` scores; None under two dates or items."""
        keys = self.data._date_keys(entry, dataset, period)

        def compute() -> list[dict]:
            if (entry, dataset) in self.data.sparse_entries():
                return self._sparse_robust(entry, dataset, period)
            dates, correct, _ = self.data.matrices(entry, dataset, keys, "date")
            if min(correct.shape) < 2:
                return []
            dates = [str(day) for day in dates]
            return [
                RobustRow(entry, dataset, robust.entry_statistics(correct), dates, correct.mean(1).tolist()).record()
            ]

        found = self.data._kept(
            "robust", entry, dataset, () if keys is None else (str(period),), (robust.N_BOOT,), compute
        )
        return RobustRow.from_record(found[0]) if found else None

    def _sparse_robust(self, entry: str, dataset: str, period: Period | None) -> list[dict]:
        """A sparse entry's :meth:`robust_entry` row: ``estimated.sparse_statistics`` of its dates in ``period``."""
        sample = self.data.sparse_sample(entry, dataset, period)
        if len(sample.dates) < 2 or len(sample.items) < 2:
            return []
        statistics, per_date = estimated.sparse_statistics(sample)
        return [RobustRow(entry, dataset, statistics, list(sample.dates), per_date).record()]

    def _robust_rows(self, dataset: str, period: Period | None, entries: Sequence[str] | None) -> list[RobustRow]:
        rows = [
            self.robust_entry(entry, dataset, period)
            for entry, name in self.data.dated_entries(period)
            if name == dataset and (entries is None or entry in entries)
        ]
        return [row for row in rows if row is not None]

    def robust(self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None) -> pd.DataFrame:
        """The robust leaderboard of a dataset's graded entries (``entries``: all): ``ranks.leaderboard``."""
        return ranks.leaderboard(self._robust_rows(dataset, period, entries))

    def robust_pairs(
        self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """The leaderboard's pairs, marked where the date flips their order and their intervals overlap: ``ranks.pairs``."""
        return ranks.pairs(self._robust_rows(dataset, period, entries))

    def robust_record(
        self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None, half_width: float = 0.01
    ) -> robust_record.RobustRecord:
        """``robust_record.record``: the numbers, sentences and what produced them, machine-readable."""
        rows = self._robust_rows(dataset, period, entries)
        return robust_record.record(
            dataset,
            rows,
            {row.entry: self.identity(row.entry, dataset, row.dates) for row in rows},
            half_width,
            __version__,
        )

    def identity(self, entry: str, dataset: str, dates: Sequence[str]) -> Identity:
        """What produced an entry's results on ``dates`` (kept): ``identity.of_rows`` of its date rows there."""

        def compute() -> list[dict]:
            rows = sql.rows(
                *self.data.sources(self.data._of(entry, dataset)),
                [*identity.COLUMNS, "factor"],
                (min(dates), max(dates)),
            )
            return [
                identity.of_rows(rows[(rows["factor"] == "date") & rows["date"].astype(str).isin(set(dates))]).record()
            ]

        return Identity.from_record(
            self.data._kept("identity", entry, dataset, (min(dates), max(dates), len(dates)), (), compute)[0]
        )

    def compared(self, dataset: str, a: str, b: str, period: Period | None = None) -> robust.Comparison | None:
        """``robust.compare`` of entries ``a`` and ``b`` on the dates of ``period`` they share (None where fewer than
        two, or not the same questions); where either was swept sparsely, ``estimated.compare`` of their samples."""
        sparse = self.data.sparse_entries()
        if (a, dataset) not in sparse and (b, dataset) not in sparse:
            _, group = self.data.aligned(dataset, [a, b], period)
            return None if group is None else robust.compare(group[0], group[1])
        return estimated.compare(*(self.data._sample_for(entry, dataset, period) for entry in (a, b)))
