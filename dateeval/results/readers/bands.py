"""Each date's score with its 95% interval as a store's entries give it: the accuracy per date (``summary --json
--per-date``, a sparse entry's drawn dates estimated), the Curves page's band per metric (kept) and Table 8's interval
of the ECE on the worst date less the best (kept)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dateeval.metrics import METRICS
from dateeval.results.bands import bands
from dateeval.results.sparse import estimated
from dateeval.results.sources import sql
from dateeval.results.entries import EntryData, Period

PER_DATE_COLUMNS = ["entry", "dataset", "date", "metric", "value", "low", "high", "n_scored", "n_items", "estimated"]


class BandReads:
    """The per-date readers of :class:`~dateeval.results.view.Results` (its ``bands``), read from the shared entry data."""

    def __init__(self, data: EntryData) -> None:
        self.data = data

    def per_date(self, period: Period | None = None) -> pd.DataFrame:
        """Each entry's share graded right on each date of its sweep and on its no-date baseline (``PER_DATE_COLUMNS``;
        ``date`` None for the baseline), with the Curves band's exact interval (``bands.clopper_pearson``) of its
        ``n_scored`` graded questions out of the ``n_items`` it answered: ``summary --json --per-date``. Every question
        of a stored condition is scored, so ``estimated`` is False; the metric is "accuracy" (pass@1 for HumanEval,
        exact match for GSM8K: each is the share right)."""
        graded = self.data.sums[self.data.sums["factor"].isin(["date", "no-date"]) & (self.data.sums["n_graded"] > 0)]
        if period is not None:
            graded = graded[(graded["factor"] != "date") | period.holds(graded["date"])]
        if graded.empty:
            return pd.DataFrame(columns=PER_DATE_COLUMNS)
        graded = graded.assign(
            n_items=graded["items"].str.partition(":")[0].astype(int),
            date=graded["date"].where(graded["factor"] == "date"),
        )
        cells = graded.groupby(["entry", "dataset", "condition_key"], sort=False, dropna=False).agg(
            date=("date", "first"),
            right=("sum_correct", "sum"),
            n_scored=("n_graded", "sum"),
            n_items=("n_items", "sum"),
        )  # a condition resumed or grown spans files of disjoint items
        low, high = bands.clopper_pearson(np.rint(cells["right"].to_numpy()), cells["n_scored"].to_numpy())
        table = cells.reset_index().assign(
            metric="accuracy",
            value=cells["right"].to_numpy() / cells["n_scored"].to_numpy(),
            low=low,
            high=high,
            estimated=False,
        )
        table["date"] = (
            pd.to_datetime(table["date"], format="mixed")
            .dt.strftime("%Y-%m-%d")
            .astype(object)
            .where(table["date"].notna(), None)
        )
        table = pd.concat([table, *self._estimated(period)], ignore_index=True) if len(self.data.drawn) else table
        order = table.assign(_baseline=table["date"].notna()).sort_values(
            ["entry", "dataset", "_baseline", "date"], kind="stable", na_position="first"
        )
        return order[PER_DATE_COLUMNS].reset_index(drop=True)

    def _estimated(self, period: Period | None) -> list[pd.DataFrame]:
        """The per-date rows of sparse entries' drawn dates (``PER_DATE_COLUMNS``), estimated."""
        tables = []
        for entry, dataset in self.data.sparse_entries():
            found = estimated.estimates_table(self.data.sparse_sample(entry, dataset, period))
            tables.append(found[found["estimated"]].assign(entry=entry, dataset=dataset, metric="accuracy"))
        return tables

    def band(self, entry: str, dataset: str, metric: str) -> pd.DataFrame:
        """``bands.date_band`` of one entry's date sweep (kept): the Curves page's 95% interval per date."""

        def compute() -> list[dict]:
            if METRICS[metric].per_item:
                return bands.date_band(entry, *self.data.matrices(entry, dataset, None, "date"), metric).to_dict(
                    "records"
                )
            return bands.corpus_band(entry, *self.segment_stats(entry, dataset, metric), metric).to_dict("records")

        band = pd.DataFrame(self.data._kept("band", entry, dataset, (metric,), (), compute), columns=bands.BAND_COLUMNS)
        return band.assign(
            date=pd.to_datetime(band["date"])
        )  # as ``date_band`` gives them (kept rows read back as datetimes)

    def segment_stats(self, entry: str, dataset: str, metric: str) -> tuple[list, np.ndarray]:
        """One entry's dates and its segments' sufficient statistics of a corpus metric on each (dates x segments x
        statistics, NaN where absent), read from its verified files: the per-item sidecars keep only their sums."""
        rows = sql.rows(
            *self.data.sources(self.data._of(entry, dataset)), ["factor", "date", "item_id", f"{metric}_stats"]
        )
        rows = rows[(rows["factor"] == "date") & rows[f"{metric}_stats"].notna()]
        if rows.empty:
            return [], np.empty((0, 0, 0))
        dates, date_index = np.unique(rows["date"].astype(str), return_inverse=True)
        items, item_index = np.unique(rows["item_id"].astype(str), return_inverse=True)
        values = np.vstack(rows[f"{metric}_stats"].to_numpy()).astype(float)
        stats = np.full((len(dates), len(items), values.shape[1]), np.nan)
        stats[date_index, item_index] = values
        return list(dates), stats

    def ece_delta_interval(
        self, entry: str, dataset: str, worst: str | None, best: str | None, n_items: int
    ) -> tuple[float, float]:
        """Table 8's uncertainty (kept): ``bands.ece_difference_interval`` of the ECE on the entry's worst date less
        its best, paired over the questions; NaN without two such dates or below ``bands.ECE_BAND_MIN_ITEMS``
        questions (no matrices are read then)."""
        if not isinstance(worst, str) or not isinstance(best, str) or n_items < bands.ECE_BAND_MIN_ITEMS:
            return float("nan"), float("nan")

        def compute() -> list[dict]:
            dates, correct, confidence = self.data.matrices(entry, dataset, None, "date")
            names = list(map(str, dates))
            pair = [names.index(worst), names.index(best)]
            low, high = bands.ece_difference_interval(confidence[pair], correct[pair])
            return [{"low": low, "high": high}]

        found = self.data._kept("ece_delta", entry, dataset, (worst, best), (), compute)[0]
        return float(found["low"]), float(found["high"])
