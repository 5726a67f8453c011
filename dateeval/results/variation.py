"""How much a score varies across a factor's levels, and how much of that is counting noise (paper §5.5, Table 5).

* the coefficient of variation, and when a CV of accuracy says something (enough right answers);
* the two-way ANOVA of a levels x questions matrix: its mean squares and random-effects variance components, which
  the date-robust interval (:mod:`dateeval.results.robust.robust`) and the sparse estimate read;
* the CV without counting noise with its noncentral-F interval, and the levels' standard deviation it rests on;
* the measured CVs of accuracy and ECE that Table 5 prints (:func:`bootstrap_cv`).

Every function takes plain arrays and is tested against hand-computed or scipy values on synthetic data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dateeval.metrics.calibration import ece_rows

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a 95% interval is mean +- Z95 x standard error


# scipy is imported by the functions that need it, not here: importing it takes 1-2 s, and the explorer's
# first render (``paper`` imports ``cv``; the headline read back by ``dateeval.results.sources.stored``) needs none of it.


def cv(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Coefficient of variation: sample standard deviation over mean (paper §5.5)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # a zero mean (accuracy 0 on every level) has no CV: NaN
        return np.std(values, axis=axis, ddof=1) / np.mean(values, axis=axis)


# A CV over levels whose mean is fewer right answers than this measures counting noise, not the factor: binomial noise
# alone gives a CV of sqrt((1 - p) / (n p)), 0.45 at 5 right answers (mmlu_cot's 123% beside the paper's 0.78%).
CV_MIN_RIGHT = 5


def cv_meaningful(mean_accuracy: float, n_items: int) -> bool:
    """Whether a CV of accuracy says something about the factor: the mean level has :data:`CV_MIN_RIGHT` right answers."""
    return bool(mean_accuracy * n_items >= CV_MIN_RIGHT)


def mean_squares(correct: np.ndarray) -> tuple[float, float, float]:
    """The two-way ANOVA's mean squares (items, dates or levels, residual) of a dates x items matrix, without replication:
    the date-robust interval's variance components and the noise-free CV read them."""
    y = np.asarray(correct, dtype=float)
    n_dates, n_items = y.shape
    grand, by_date, by_item = y.mean(), y.mean(1), y.mean(0)
    residual = y - by_date[:, None] - by_item[None, :] + grand
    ms_item = n_dates * np.sum((by_item - grand) ** 2) / (n_items - 1)
    ms_date = n_items * np.sum((by_date - grand) ** 2) / (n_dates - 1)
    ms_residual = np.sum(residual**2) / ((n_items - 1) * (n_dates - 1))
    return float(ms_item), float(ms_date), float(ms_residual)


NONCENTRALITY_MAX = 1e7  # beyond it the noncentral F's CDF loses its digits; a level effect that large has no upper end


@dataclass(frozen=True)
class Components:
    """Two-way random-effects variance components of a dates x items matrix (one observation per cell).

    ``item`` is the variance between questions, ``date`` between dates, ``residual`` the item x date interaction (with
    one grade per cell it cannot be told apart from noise; with deterministic decoding there is none). Each is the
    method-of-moments estimate, set to 0 where sampling makes it negative.
    """

    item: float
    date: float
    residual: float
    n_dates: int
    n_items: int

    def mean_variance(self, n_dates: int | None = None, n_items: int | None = None) -> float:
        """Var(date-marginal score) with ``n_dates`` dates and ``n_items`` items (default: those measured)."""
        dates, items = n_dates or self.n_dates, n_items or self.n_items
        return self.date / dates + self.item / items + self.residual / (dates * items)

    def half_width(self, n_dates: int | None = None, n_items: int | None = None) -> float:
        """The 95% interval's half-width of the date-marginal score with that many dates and items."""
        return Z95 * math.sqrt(self.mean_variance(n_dates, n_items))

    def shares(self) -> dict[str, float]:
        """Each component's share of the variance of one cell (item + date + residual)."""
        total = self.item + self.date + self.residual
        return {
            name: (value / total if total > 0 else float("nan"))
            for name, value in (("item", self.item), ("date", self.date), ("residual", self.residual))
        }


def variance_components(correct: np.ndarray) -> Components:
    """Item, date and item x date variance from the mean squares (needs two or more dates and items)."""
    return components_from(mean_squares(correct), *np.shape(correct))


def components_from(squares: tuple[float, float, float], n_dates: int, n_items: int) -> Components:
    """The components of mean squares (items, dates, residual), measured or estimated from a sample of cells
    (``estimated.mean_squares``): E[MS_item] = s_res + D s_item, E[MS_date] = s_res + I s_date, E[MS_res] = s_res."""
    ms_item, ms_date, ms_residual = squares
    return Components(
        item=max(0.0, (ms_item - ms_residual) / n_dates),
        date=max(0.0, (ms_date - ms_residual) / n_items),
        residual=ms_residual,
        n_dates=n_dates,
        n_items=n_items,
    )


def _ncf_cdf(f: float, d1: int, d2: int, noncentrality: float) -> float:
    """The noncentral F's CDF: scipy's, and where that has no digits left (NaN with hundreds of levels and a large
    noncentrality), Patnaik's approximation, a scaled central F with the noncentral chi-square's first two moments."""
    from scipy import stats

    found = float(stats.ncf.cdf(f, d1, d2, noncentrality))
    if np.isfinite(found):
        return found
    scale, df = (d1 + 2 * noncentrality) / (d1 + noncentrality), (d1 + noncentrality) ** 2 / (d1 + 2 * noncentrality)
    return float(stats.f.cdf(f * d1 / (scale * df), df, d2))


def _noncentrality(f: float, d1: int, d2: int, p: float) -> float:
    """The noncentrality at which the noncentral F(d1, d2) puts probability ``p`` below ``f`` (0 where even the
    central F puts less there): the CDF falls as the noncentrality grows, so the root is unique."""
    from scipy import optimize, stats

    if stats.f.cdf(f, d1, d2) <= p:
        return 0.0
    high = max(10.0, 4 * f * d1)
    while _ncf_cdf(f, d1, d2, high) > p:
        high *= 2
        if high > NONCENTRALITY_MAX:
            return float("inf")
    return float(optimize.brentq(lambda value: _ncf_cdf(f, d1, d2, value) - p, 0.0, high, xtol=1e-10))


def noise_free_cv(correct: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """The CV of the levels' true rates over the question population (levels x items right/wrong), without the
    counting noise that inflates the CV of the measured rates: estimate and ``level`` interval, :func:`level_sd`'s
    over the mean. Coverage, 10-200 questions, 2-12 levels: docs/coverage.md.
    NaN without two levels, two items and a mean above 0; no interval without residual variation."""
    levels, items = np.shape(correct)
    if levels < 2 or items < 2 or correct.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    _, ms_level, ms_residual = mean_squares(correct)
    sd = level_sd(ms_level, ms_residual, levels, items, level=level)
    return tuple(float(value / correct.mean()) for value in sd)  # type: ignore[return-value]


def level_sd(
    ms_level: float,
    ms_residual: float,
    levels: int,
    items: int,
    design: float = 0.0,
    design_df: float = math.inf,
    step: float = 1.0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """The SD of the levels' (dates') true rates over the question population, without the counting noise that
    inflates the SD of the measured rates: estimate and ``level`` interval, from the two-way ANOVA's mean squares of a
    levels x items matrix (``ms_level`` as measured, noise included).

    The levels' variance is the method of moments, (MS_level - noise) / items, clipped at 0, where the noise is
    MS_residual plus ``design`` x items: ``design`` is the mean variance a sparse sweep's sample adds to each level's
    rate (0 for a dense grid), estimated on ``design_df`` degrees of freedom (the noise's own are Satterthwaite's).
    The interval inverts the noncentral F of MS_level / noise in its noncentrality, I (L - 1) s^2 / noise (Steiger
    2004's interval for an ANOVA effect). Right/wrong outcomes tie exactly (two levels with the same count), where
    the F is 0 and the upper end would be 0 too: the upper end takes a continuity correction, half the smallest step
    the levels' sum of squares can take (one answer moved: (1 - 1/L) step^2 / I, where one answer moves a level's rate
    by ``step`` / I: 1 in a dense grid, 1 / pi for a cell a sparse sweep drew with probability pi).
    No interval (NaN) where nothing is left to set the levels against (no residual variation, no design noise).

    Two guards keep the interval a promise. Where the F falls below what even no effect gives 97.5% of the time, the
    inversion's upper end is 0: an interval that looks certain, which no finite sample supports. There, and wherever a
    sample's noise is part of the noise (``design``: the sample cannot rule out what it did not draw), the upper end
    is at least the one a typical null outcome gives (the F at the central F's median): the effect the data cannot
    tell from none. And no end goes beyond the largest SD the levels' rates in [0, 1] can have
    (:func:`largest_sd`)."""
    noise = ms_residual + design * items
    cap = largest_sd(levels)
    estimate = min(cap, math.sqrt(max(0.0, (ms_level - noise) / items)))
    if noise <= 1e-12:  # each question has one outcome on every level: no counting noise to set the levels against
        return estimate, float("nan"), float("nan")
    d1, tail = levels - 1, (1 - level) / 2
    d2 = d1 * (items - 1)  # Satterthwaite's, where the design adds its noise
    if design:
        d2 = noise**2 / (ms_residual**2 / d2 + (design * items) ** 2 / design_df)
    widened = ms_level + 0.5 * (1 - 1 / levels) * step**2 / (items * d1)  # half the levels' SS's smallest step
    low, high = (_noncentrality(f / noise, d1, d2, p) for f, p in ((ms_level, 1 - tail), (widened, tail)))
    if design or high <= 0:
        high = max(high, _noncentrality(_central_median(d1, d2), d1, d2, tail))
    return estimate, *(min(cap, math.sqrt(value * noise / (items * d1))) for value in (low, high))


def largest_sd(levels: int) -> float:
    """The largest SD (with ``levels`` - 1 degrees of freedom, as the date component is) that ``levels`` rates in
    [0, 1] can have: half of them at 0, the rest at 1. Two levels: 0.707."""
    return math.sqrt((levels // 2) * (levels - levels // 2) / (levels * (levels - 1)))


def _central_median(d1: int, d2: float) -> float:
    from scipy import stats

    return float(stats.f.ppf(0.5, d1, d2))


def bootstrap_cv(correct: np.ndarray, confidence: np.ndarray) -> dict[str, float]:
    """CV of accuracy and ECE across levels (rows): the measured CVs (the paper's Table 5), the accuracy CV without
    counting noise with its interval (:func:`noise_free_cv`), and whether the accuracy CV is meaningful
    (:func:`cv_meaningful`).

    The ECE's CV is the paper's: of the plug-in ECE (``debiased=False``), which is never 0, so the CV is a ratio with
    a denominator away from 0. The debiased ECE of a well-calibrated date is floored at 0, and a CV over such dates
    swung from 0.13 to 1.2 in one interval on the demo (bf16 mmlu). It has no interval: with no date effect the true
    CV is 0 and counting noise alone makes every resampled CV positive, so the percentile bootstrap it had covered
    nothing there; a noise-free ECE CV (as :func:`noise_free_cv` for accuracy) is not built."""
    accuracy = correct.mean(1)
    ece_cv = (
        float(cv(ece_rows(confidence, correct, debiased=False))) if np.isfinite(confidence).all() else float("nan")
    )  # generated answers: no ECE
    noise_free, low, high = noise_free_cv(correct)
    return {
        "accuracy_cv": float(cv(accuracy)),
        "accuracy_cv_noise_free": noise_free,
        "accuracy_cv_low": low,
        "accuracy_cv_high": high,
        "accuracy_cv_meaningful": cv_meaningful(float(accuracy.mean()), correct.shape[1]),
        "ece_cv": ece_cv,
    }
