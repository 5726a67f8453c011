"""One entry on one dataset as ``Results.summary`` gives it (paper Tables 1, 8, 9 with the date effect against chance),
typed (:class:`SummaryRow`), with its lines as ``dateeval summary`` prints them: the figures in them are written by
``dateeval.metrics``' formatters, the ones the pages' and the report's tables use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dateeval.metrics import METRICS, cv_text, missing, percent, points


@dataclass(frozen=True)
class Spread:
    """One metric over the dates (min, mean, max, worst-to-best delta and the dates that give it) and its baselines."""

    metric: str
    minimum: float
    mean: float
    maximum: float
    delta: float
    worst_date: str | None
    best_date: str | None
    no_date: float
    template_default: float

    @property
    def has_delta(self) -> bool:
        return not missing(self.delta)


@dataclass(frozen=True)
class Chance:
    """The date effect against chance: Cochran's Q by permutation and by its chi-square, and the accuracy delta's null band."""

    exceeds_chance: bool
    cochran_permutation_p: float
    cochran_p: float
    delta_null_upper: float
    delta_p_value: float


@dataclass(frozen=True)
class SummaryRow:
    """A row of ``Results.summary``: the metrics the entry has (dated or baseline) and, with two or more dates, chance."""

    entry: str
    dataset: str
    n_items: int
    n_dates: int
    spreads: tuple[Spread, ...]
    chance: Chance | None

    @classmethod
    def from_record(cls, row: dict) -> SummaryRow:
        """A summary table's row (``DataFrame.to_dict(orient="records")``) as a typed row."""
        spreads = tuple(
            Spread(
                metric,
                row.get(f"{metric}_min"),
                row.get(f"{metric}_mean"),
                row.get(f"{metric}_max"),
                row.get(f"{metric}_delta"),
                row.get(f"{metric}_worst_date"),
                row.get(f"{metric}_best_date"),
                row[f"no_date_{metric}"],
                row[f"template_default_{metric}"],
            )
            for metric in METRICS
            if f"no_date_{metric}" in row and _has(row, metric)
        )
        tested = row["n_dates"] > 1 and not math.isnan(row.get("delta_p_value", math.nan))
        chance = (
            Chance(
                bool(row["exceeds_chance"]),
                row["cochran_permutation_p"],
                row["cochran_p"],
                row["delta_null_upper"],
                row["delta_p_value"],
            )
            if tested
            else None
        )
        return cls(row["entry"], row["dataset"], row["n_items"], row["n_dates"], spreads, chance)

    def lines(self) -> list[str]:
        """The row as ``dateeval summary`` prints it."""
        out = [f"{self.entry} on {self.dataset}: {self.n_items} items x {self.n_dates} dates"]
        for spread in self.spreads:
            spec = METRICS[spread.metric]
            show, name = spec.format, spec.name_on(self.dataset)
            if spread.has_delta:
                dates = (
                    f"(worst {spread.worst_date}, best {spread.best_date})"
                    if not missing(spread.worst_date)
                    else "(the same on every date)"
                )
                out.append(
                    f"  {name:8s} min {show(spread.minimum)}  mean {show(spread.mean)}  max {show(spread.maximum)}  "
                    f"delta {spec.delta(spread.delta, self.n_items)}  {dates}"
                )
            out.append(f"  {'':8s} no-date {show(spread.no_date)}  template-default {show(spread.template_default)}")
        if self.chance is not None:
            chance = self.chance
            verdict = "beyond chance" if chance.exceeds_chance else "within chance"
            test = (
                f"Cochran's Q by permutation p = {chance.cochran_permutation_p:.3f}; chi-square p = {chance.cochran_p:.3g}"
                if not missing(chance.cochran_p)
                else f"sparse: p = {chance.cochran_permutation_p:.3f}, Cochran's Q of the drawn cells by the design's permutation "
                "and of the full dates, by Fisher"
            )
            out.append(
                f"  chance    date effect {verdict} ({test}); accuracy delta: 95% of chance deltas <= "
                f"{points(chance.delta_null_upper, self.n_items)}, p = {chance.delta_p_value:.3f}"
            )
        return out


def factor_line(factor: dict) -> str:
    """One Table 5 row (``inference.entry_factors``) under its entry's summary: the CV of accuracy and of the ECE."""
    accuracy = cv_text(
        factor["accuracy_cv"],
        factor["accuracy_cv_low"],
        factor["accuracy_cv_high"],
        factor["accuracy_cv_meaningful"],
        factor["accuracy_cv_noise_free"],
    )
    return (
        f"  CV {factor['factor']:13s} accuracy {accuracy}  ECE {percent(factor['ece_cv'])}  ({factor['levels']} levels)"
    )


def precision_line(factor: dict) -> str:
    """A Table 5 precision row (entries of one model at several dtypes) after the summaries."""
    return f"{factor['entry']} on {factor['dataset']}: CV precision accuracy {percent(factor['accuracy_cv'])} ({factor['levels']} dtypes)"


def _has(row: dict, metric: str) -> bool:
    """Whether a summary row has any value of a metric (dated or baseline)."""
    return any(
        not missing(row.get(f"{prefix}{metric}{suffix}"))
        for prefix, suffix in (("", "_min"), ("", ""), ("no_date_", ""), ("template_default_", ""))
    )
