"""One entry's date-robust figures, typed: what :func:`robust.entry_statistics` and
:func:`estimated.sparse_statistics` compute, and the row a store keeps for an entry on its dates (read by the
leaderboard, the record and its sentences by attribute; kept, and read back, as one flat JSON row)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from dateeval.results.variation import Z95, Components


def components_of(row: Mapping) -> Components:
    """The :class:`Components` a row of date-robust figures holds (an :class:`EntryStatistics`, a leaderboard row)."""
    return Components(row["var_item"], row["var_date"], row["var_residual"], int(row["n_dates"]), int(row["n_items"]))


@dataclass(frozen=True)
class EntryStatistics:
    """An entry's date-robust figures: the score, its interval and degrees of freedom, the two-way bootstrap's
    interval with each end's Monte-Carlo error (NaN where not run), the variance components with the widths they give,
    the date effect's SD with its interval, each source's share, the grid's size and the share of its cells scored
    (below 1 for a sparse entry)."""

    score: float
    low: float
    high: float
    half_width: float
    df: float
    bootstrap_low: float
    bootstrap_high: float
    bootstrap_low_mc_error: float
    bootstrap_high_mc_error: float
    anova_half_width: float
    item_only_half_width: float
    var_item: float
    var_date: float
    var_residual: float
    sd_date: float
    sd_date_low: float
    sd_date_high: float
    share_item: float
    share_date: float
    share_residual: float
    n_dates: int
    n_items: int
    share_scored: float

    @classmethod
    def of(
        cls,
        found: tuple[float, float, float, float],
        components: Components,
        spread: tuple[float, float, float],
        bootstrap: tuple[float, ...],
        scored: float = 1.0,
    ) -> EntryStatistics:
        """The figures from ``found`` (score, low, high, df), the ``components``, the date effect's ``spread`` (the SD
        across dates without counting noise, its interval: ``variation.level_sd``), the two-way ``bootstrap``'s (low,
        high, low's and high's Monte-Carlo errors) and the share of the grid's cells ``scored``."""
        score, low, high, df = found
        shares = components.shares()
        return cls(
            score=score,
            low=low,
            high=high,
            half_width=(high - low) / 2,
            df=df,
            bootstrap_low=bootstrap[0],
            bootstrap_high=bootstrap[1],
            bootstrap_low_mc_error=bootstrap[2],
            bootstrap_high_mc_error=bootstrap[3],
            anova_half_width=components.half_width(),
            item_only_half_width=Z95 * math.sqrt(components.item / components.n_items),
            var_item=components.item,
            var_date=components.date,
            var_residual=components.residual,
            sd_date=spread[0],
            sd_date_low=spread[1],
            sd_date_high=spread[2],
            share_item=shares["item"],
            share_date=shares["date"],
            share_residual=shares["residual"],
            n_dates=components.n_dates,
            n_items=components.n_items,
            share_scored=scored,
        )

    @property
    def components(self) -> Components:
        """The variance components these figures were computed from (what the planning figures read)."""
        return components_of(vars(self))


@dataclass(frozen=True)
class RobustRow:
    """One entry's date-robust figures on one dataset, on its ``dates``, with its score on each (``per_date``): what
    ``Results.robust.robust_entry`` returns and the leaderboard, its pairs and the record read."""

    entry: str
    dataset: str
    statistics: EntryStatistics
    dates: list[str]
    per_date: list[float]

    @property
    def first_date(self) -> str:
        return self.dates[0]

    @property
    def last_date(self) -> str:
        return self.dates[-1]

    def record(self) -> dict:
        """The row as kept (one flat JSON row), and as the leaderboard's table reads it."""
        return {
            "entry": self.entry,
            "dataset": self.dataset,
            **asdict(self.statistics),
            "first_date": self.first_date,
            "last_date": self.last_date,
            "dates": self.dates,
            "per_date": self.per_date,
        }

    @classmethod
    def from_record(cls, record: Mapping) -> RobustRow:
        """The row a kept :meth:`record` holds."""
        statistics = EntryStatistics(**{field.name: record[field.name] for field in fields(EntryStatistics)})
        dates, per_date = [str(day) for day in record["dates"]], [float(value) for value in record["per_date"]]
        return cls(record["entry"], record["dataset"], statistics, dates, per_date)
