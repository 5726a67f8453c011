"""The date effect against chance as a store's entries give it: each entry's significance (kept), the store's
verdict and headline, and what chance gives for leaderboard reordering."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dateeval.results.chance import chance, sparse_chance
from dateeval.results.sources import stored
from dateeval.results.entries import EntryData, Period
from dateeval.results.chance.headline import Headline
from dateeval.results.chance.headline import headline as find_headline

# Permutations of the date's null band (the explorer's, the same on every page).
N_PERM = 200
# The planted date effect whose detection rate the verdict states ("finds a 5 pp date effect N% of the time").
POWER_EFFECT = 0.05


class ChanceReads:
    """The chance readers of :class:`~dateeval.results.view.Results` (its ``chance``): each entry's significance, the
    store's verdict and headline, and what chance gives for reordering, read from the shared entry data."""

    def __init__(self, data: EntryData) -> None:
        self.data = data

    def headline(self) -> Headline | None:
        """The store's finding (kept): the verdict over its graded entries, the largest worst-to-best accuracy delta
        against the null of the largest of them, leaderboard reordering (``headline.headline``), and how often the
        verdict's test finds a 5 pp date effect on the top entry's questions and dates (``chance.power``)."""

        def compute() -> list[dict]:
            found = find_headline(self.significance_table(), self.data.metrics, self.verdict())
            if found is None:
                return []
            correct = self.data.matrices(found.entry, found.dataset, None, "condition_key")[
                1
            ]  # its dates scored in full
            if found.reorder_dataset is not None:
                shuffled = self.reorder_chance(found.reorder_dataset, None, found.reorder)
                found = found.with_(
                    reorder_chance=shuffled["chance"],
                    reorder_chance_upper=shuffled["chance_upper"],
                    reorder_p_value=shuffled["p_value"],
                )
            # The power is simulated on a dense grid: a sparse entry's (a sample, its dates perhaps none in full) is not one.
            dense = (found.entry, found.dataset) not in self.data.sparse_entries() and len(correct) >= 2
            power = chance.power(correct, POWER_EFFECT) if dense else float("nan")
            return [found.with_(power_effect=POWER_EFFECT, power=power).record()]

        found = stored.rows(
            self.data.store, "headline", "store", [Path(path) for path, *_ in self.data.fingerprint], (N_PERM,), compute
        )
        return Headline.from_record(found[0]) if found else None

    def verdict(self) -> float:
        """The family-wise p-value of "the date moves at least one graded entry" (``chance.date_effect_family``):
        entries on one dataset and the same dates are shuffled jointly, their rows in date order. Entries swept
        sparsely are tested each under its design (``sparse_chance``, every date) and joined by Bonferroni
        (``chance.bonferroni``): their shuffles cannot be joint with a dense grid's."""
        sparse = set(self.data.sparse_entries())
        table = self.significance_table()
        chosen = [(row.entry, row.dataset) in sparse for row in table.itertuples()]
        parts = table.loc[chosen, "cochran_permutation_p"].tolist()
        dense = [key for key in self.data.dated_entries() if key not in sparse]
        return chance.bonferroni([self._dense_verdict(dense)] * bool(dense) + parts)

    def _dense_verdict(self, entries: list[tuple[str, str]]) -> float:
        """:meth:`verdict` of dense ``entries``: their date sweeps shuffled jointly."""
        dated, keys, matrices = self.data._dated(None), [], []
        for entry, dataset in entries:
            levels, correct, _ = self.data.matrices(entry, dataset, None, "condition_key")
            mine = dated[(dated["entry"] == entry) & (dated["dataset"] == dataset)]
            day = dict(zip(mine["condition_key"], mine["date"].astype(str)))
            dates = np.array([day[level] for level in levels])
            order = np.argsort(dates, kind="stable")
            keys.append((dataset, tuple(dates[order])))
            matrices.append(correct[order])
        return chance.date_effect_family(chance.verdict_groups(keys, matrices))

    def reorder_chance(
        self, dataset: str, entries: Sequence[str] | None, observed: float, period: Period | None = None
    ) -> dict[str, float]:
        """What chance alone gives for the share of date pairs that reorder ``entries`` (all graded ones with dates
        when None) on ``dataset`` over the dates they share in ``period`` (``chance.reorder_chance``); NaN where
        they share fewer than two dates or not the same questions."""
        _, group = self.data.aligned(dataset, entries, period)
        if group is None:
            return {"chance": float("nan"), "chance_upper": float("nan"), "p_value": float("nan")}
        return chance.reorder_chance(group, observed)

    def significance_table(self, period: Period | None = None) -> pd.DataFrame:
        """Every graded entry's :meth:`significance` with two or more dates in ``period`` (kept), with its null draws."""
        rows = [
            self.significance(entry, dataset, period).record() for entry, dataset in self.data.dated_entries(period)
        ]
        return pd.DataFrame(
            rows, columns=[*chance.SIGNIFICANCE_COLUMNS, "mean_accuracy", "chance_half_width", "null_draws"]
        )

    def significance(self, entry: str, dataset: str, period: Period | None = None) -> chance.Significance:
        """``chance.significance`` of one entry's date sweep, or of its dates in ``period`` (kept): the Factors
        page's row, the summary's chance columns and the headline's null draws."""
        keys = self.data._date_keys(entry, dataset, period)

        def compute() -> list[dict]:
            if (entry, dataset) in self.data.sparse_entries():  # every date, drawn ones estimated: the design's null
                found = sparse_chance.significance(
                    entry, dataset, self.data.sparse_sample(entry, dataset, period), N_PERM
                )
            else:
                found = chance.significance(
                    entry, dataset, self.data.matrices(entry, dataset, keys, "condition_key")[1], N_PERM
                )
            return [found.record()]

        kept = self.data._kept(
            "significance", entry, dataset, () if keys is None else (str(period),), (N_PERM,), compute
        )
        return chance.Significance.from_record(kept[0])
