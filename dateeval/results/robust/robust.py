"""A date-robust number (issue 20 §2): what to report when the date in the prompt moves the score.

A score measured on one date is one draw from the dates a reader's model might
see. The quantity worth reporting is the **date-marginal score**: the mean over
dates drawn uniformly from a range. Its uncertainty has two sources, the
questions and the dates, and one interval must cover both. Everything here is a
pure function of dates x items outcome matrices (1 right, 0 wrong; the matrices
:meth:`dateeval.results.Results.matrices` gives), so the CLI, the report and the
explorer show one set of numbers:

* :func:`variance_components` (in :mod:`inference`, which the noise-free CV also reads): how much of the variance is the item's, the
  date's and their interaction's (two-way random-effects ANOVA, one observation
  per cell, method of moments), and from them the standard error of the mean;
* :func:`date_robust`, :func:`korn_graubard`: the interval, from those components: an exact
  (Clopper-Pearson) interval at the effective sample size the variance gives,
  with Satterthwaite's degrees of freedom (Korn & Graubard 1998), so that it is
  asymmetric near 0 and 1, never zero-wide, and wide where few dates or items
  leave the variance uncertain. Every width a reader compares (the interval,
  the planning table, "the questions alone") comes from the same components;
* :func:`two_way_bootstrap`: a cross-check kept in ``--json`` (``bootstrap_low``,
  ``bootstrap_high``, with their Monte-Carlo errors), resampling items *and*
  dates (the "pigeonhole" bootstrap of Owen 2007), vectorised as weighted sums;
* :func:`dates_needed`: how many dates give an interval of a chosen width.

The leaderboard by this score is :mod:`ranks`'s; the sentence a researcher
pastes, and the record that holds it, :mod:`robust_record`'s.

Dates are treated as drawn from an unbounded population (no finite-population
correction): conservative when a sweep covers every day of its range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dateeval.results.bands.bands import clopper_pearson, resample_weights
from dateeval.results.robust.robust_row import EntryStatistics
from dateeval.results.variation import Z95, Components, level_sd, mean_squares, variance_components

N_BOOT = 1000  # two-way resamples (about 0.2 s of matrix products for 366 dates x 10,000 items)
# Date counts the planning table and figure show (the paper sweeps up to 366).
PLAN_SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 366)


def date_marginal(correct: np.ndarray) -> float:
    """The mean over dates of each date's score: the grand mean of a balanced dates x items matrix."""
    return float(np.asarray(correct, dtype=float).mean())


def two_way_weights(n_dates: int, n_items: int, n_boot: int = N_BOOT, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """How often each date and each item is drawn in each resample: (resamples x dates, resamples x items).

    Items are drawn as every interval over items here is (:func:`bands.resample_weights`, ``seed``), dates
    independently of them (``seed + 1``), so the item half of the draws is the one the Curves page's bands use.
    """
    return resample_weights(n_dates, n_boot, seed + 1), resample_weights(n_items, n_boot, seed)


def two_way_bootstrap(correct: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """The date-marginal score of ``n_boot`` resamples of both items and dates (Owen's pigeonhole bootstrap).

    Resample b keeps the cell (date d, item i) w_date[b, d] x w_item[b, i]
    times, so its mean is w_date[b] @ correct @ w_item[b] / (dates x items):
    one matrix product over all resamples, no loop. The variance it gives
    slightly exceeds Var(mean) (it counts the interaction about three times
    over), so its interval errs on the wide side.
    """
    correct = np.asarray(correct, dtype=np.float32)
    n_dates, n_items = correct.shape
    by_date, by_item = two_way_weights(n_dates, n_items, n_boot, seed)
    return ((by_date @ correct) * by_item).sum(1, dtype=np.float64) / (n_dates * n_items)


def interval(samples: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap samples."""
    low, high = np.percentile(samples, [2.5, 97.5])
    return float(low), float(high)


def end_errors(samples: np.ndarray) -> tuple[float, float]:
    """The Monte-Carlo standard error of each end of :func:`interval`: what another bootstrap seed could move it by.

    By the order-statistic method: the q-quantile of B resamples has a 95% interval between the order statistics of
    rank B q -+ Z95 sqrt(B q (1 - q)); a quarter of that span's width is the standard error. With 2 or 3 dates the
    resamples take few values and the ends jump by whole steps between seeds: this says how many digits they deserve.
    """
    ordered = np.sort(np.asarray(samples, dtype=float))
    count, out = len(ordered), []
    for q in (0.025, 0.975):
        spread = Z95 * math.sqrt(count * q * (1 - q))
        low, high = max(0, math.floor(count * q - spread)), min(count - 1, math.ceil(count * q + spread))
        out.append(float(ordered[high] - ordered[low]) / (2 * Z95))
    return out[0], out[1]


def interval_text(score: float, low: float, high: float, decimals: int) -> str:
    """``score`` with its 95% interval as it is: ``61.2 ± 0.8 pp`` only when both ends are as far from the score at the
    digits shown, else ``36.3 [18.4, 56.0]`` (percentages): a ``±`` would misstate an asymmetric interval (e.g. below 0)."""
    below, above = round(100 * (score - low), decimals), round(100 * (high - score), decimals)
    if below == above:
        return f"{100 * score:.{decimals}f} ± {below:.{decimals}f} pp"
    return f"{100 * score:.{decimals}f} [{100 * low:.{decimals}f}, {100 * high:.{decimals}f}]"


def dates_needed(components: Components, half_width: float, n_items: int | None = None) -> int | None:
    """The fewest dates (two or more) whose date-marginal 95% interval is at most +-``half_width`` with ``n_items``
    items (default: those measured); None when no number of dates reaches it (the items alone are too few).

    Solves Z95^2 (s_date / n + s_item / I + s_res / (I n)) <= h^2 for n.
    """
    items = n_items or components.n_items
    room = (half_width / Z95) ** 2 - components.item / items
    if room <= 0:
        return None
    return max(2, math.ceil((components.date + components.residual / items) / room - 1e-12))


def plan(components: Components, sizes: tuple[int, ...] = PLAN_SIZES) -> pd.DataFrame:
    """The predicted 95% half-width for each number of dates (the date budget, for the date-marginal score)."""
    return pd.DataFrame({"dates": list(sizes), "half_width": [components.half_width(n) for n in sizes]})


def satterthwaite_df(correct: np.ndarray) -> float:
    """Degrees of freedom of the unbiased Var(mean) estimate of a dates x items matrix: :func:`satterthwaite_of`."""
    return satterthwaite_of(mean_squares(correct), *np.shape(correct))


def satterthwaite_of(squares: tuple[float, float, float], n_dates: int, n_items: int) -> float:
    """Degrees of freedom of (MS_date + MS_item - MS_res) / (dates x items), by Satterthwaite's approximation: 1 with
    two dates whose difference dominates, many with many dates and items."""
    ms_item, ms_date, ms_residual = squares
    numerator = ms_date + ms_item - ms_residual
    denominator = (
        ms_date**2 / (n_dates - 1) + ms_item**2 / (n_items - 1) + ms_residual**2 / ((n_items - 1) * (n_dates - 1))
    )
    if numerator <= 0 or denominator <= 0:
        return float(n_items - 1)  # nothing varies beyond noise: the items' own degrees of freedom
    return max(1.0, numerator**2 / denominator)


def korn_graubard(
    score: float, variance: float, df: float, n_cells: int, n_items: int, level: float = 0.95
) -> tuple[float, float]:
    """The 95% interval of a mean of right/wrong grades with a known-from-data variance (Korn & Graubard 1998).

    The effective sample size n* = p (1 - p) / Var (at most the cells graded; the items, where the score is 0 or 1
    and the variance says nothing) is shrunk by (z / t_df)^2 for the variance's own uncertainty, and the exact
    Clopper-Pearson interval of p n* of n* is returned: asymmetric near 0 and 1, never below 0 or above 1, never zero
    wide. Alone it falls short with few questions at rates near 0 or 1 (``docs/coverage.md``): :func:`date_robust` widens
    it by plus-two questions.
    """
    from scipy import stats as scipy_stats

    inside = 0 < score < 1 and variance > 0
    effective = min(score * (1 - score) / variance, n_cells) if inside else float(n_items)
    effective *= (Z95 / scipy_stats.t.ppf(1 - (1 - level) / 2, df)) ** 2
    low, high = clopper_pearson(np.array([score * effective]), effective, level)
    return float(low[0]), float(high[0])


def _korn_graubard_of(correct: np.ndarray) -> tuple[float, float, float, float]:
    """(score, low, high, df): :func:`korn_graubard` at the unbiased Var(mean) of the variance components."""
    return korn_graubard_from(date_marginal(correct), mean_squares(correct), *np.shape(correct))


def korn_graubard_from(
    score: float, squares: tuple[float, float, float], n_dates: int, n_items: int, design_variance: float = 0.0
) -> tuple[float, float, float, float]:
    """(score, low, high, df): :func:`korn_graubard` at Var(mean) = (MS_date + MS_item - MS_res) / (dates x items),
    plus ``design_variance`` where the score is estimated from a sample of the cells (``estimated.sparse_robust``: the
    sample's error is independent of the questions' and dates', so the variances add)."""
    ms_item, ms_date, ms_residual = squares
    unbiased = max(0.0, (ms_date + ms_item - ms_residual) / (n_dates * n_items))  # s_date/D + s_item/I + s_res/(D I)
    df = satterthwaite_of(squares, n_dates, n_items)
    low, high = korn_graubard(score, unbiased + design_variance, df, n_dates * n_items, n_items)
    return score, low, high, df


def plus_two(matrix: np.ndarray) -> np.ndarray:
    """The matrix with two questions added, one right and one wrong on every date (:func:`date_robust`)."""
    return np.hstack([matrix, np.ones((len(matrix), 1)), np.zeros((len(matrix), 1))])


def widened(found: tuple[float, ...], padded: tuple[float, ...]) -> tuple[float, float, float, float]:
    """(score, low, high, df) of ``found`` with its interval widened to hold ``padded``'s (plus-two questions)."""
    score, low, high, df = found
    return score, min(low, padded[1]), max(high, padded[2]), df


def date_robust(correct: np.ndarray) -> tuple[float, float, float, float]:
    """The date-robust score of a dates x items 0/1 matrix with its 95% interval and degrees of freedom: (score, low,
    high, df); the one home of the number that ``robust``, the What to report page and ``dateeval.stats.robust_score``
    print.

    The interval is :func:`korn_graubard`'s, widened to hold also the same interval of the matrix with two questions
    added, one right on every date and one wrong on every date (plus-two questions, Agresti-Coull's idea at the level
    of the question, the unit the questions' variance is counted in). Alone, Korn-Graubard covered 0.78-0.89 with 10-20
    questions, many dates and a skewed spread of question difficulty at rates 0.02-0.05 and 0.95-0.98 (the sample of
    questions misses the rare easy, or hard, one and the variance with it), and jumped 200-fold between no right answer
    and one; with the two questions no cell of docs/coverage.md is below 0.95 - 2 SE, and one right answer moves it a
    little. The score is the plain mean; the interval always holds it."""
    correct = np.asarray(correct, dtype=float)
    return widened(_korn_graubard_of(correct), _korn_graubard_of(plus_two(correct)))


def entry_statistics(correct: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> EntryStatistics:
    """One entry's date-robust figures from its dates x items matrix: score, its interval (:func:`date_robust`), the
    variance components, and the two-way bootstrap's interval as a cross-check (``n_boot``, ``seed``)."""
    samples = two_way_bootstrap(correct, n_boot, seed)
    squares = mean_squares(correct)
    spread = level_sd(squares[1], squares[2], *np.shape(correct))
    return EntryStatistics.of(
        date_robust(correct), variance_components(correct), spread, (*interval(samples), *end_errors(samples))
    )


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """A's date-robust score minus B's (dates x items 0/1 matrices on the same dates and items) with its 95% interval,
    clustered by question: each question's difference is one draw from the question population, so the variance of
    the mean difference is MS_item / (dates x items) of the difference matrix, plus the dates' share where the
    difference itself moves with the date ((MS_date - MS_res) / (dates x items), where positive). A t interval with
    Satterthwaite's degrees of freedom (the questions' own, items - 1, without a date part), clipped to [-1, 1].

    NaN bounds where every question's difference is the same on every date (A always right and B always wrong, say):
    the spread the interval is read from is then 0, and a zero-wide interval would claim a certainty the questions do
    not give. Wherever the spread is not 0 the interval covered 0.93 or more of simulated pairs, rates near 0 and 1
    included (bench/coverage.py --only extremes, docs/coverage.md)."""
    difference = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return paired_from(float(difference.mean()), mean_squares(difference), *difference.shape)


def paired_from(
    value: float, squares: tuple[float, float, float], n_dates: int, n_items: int, design_variance: float = 0.0
) -> tuple[float, float, float]:
    """:func:`paired_difference`'s interval from the difference grid's mean squares (measured, or estimated from two
    sparse samples: ``estimated.paired_difference``, which adds the samples' ``design_variance``)."""
    from scipy import stats as scipy_stats

    ms_item, ms_date, ms_residual = squares
    date_part = max(0.0, ms_date - ms_residual)
    variance = (ms_item + date_part) / (n_dates * n_items) + design_variance
    df = float(n_items - 1)
    if date_part > 0:
        df = (ms_item + date_part) ** 2 / (
            ms_item**2 / (n_items - 1) + ms_date**2 / (n_dates - 1) + ms_residual**2 / ((n_items - 1) * (n_dates - 1))
        )
    if variance == 0:
        return value, math.nan, math.nan
    half = float(scipy_stats.t.ppf(0.975, max(1.0, df)) * math.sqrt(variance))
    return value, max(-1.0, value - half), min(1.0, value + half)


def date_variances(correct: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The date variance component (MS_date - MS_res) / items of a dates x items 0/1 matrix under each row of question
    ``weights`` (resamples x items: how often each question is drawn), unclipped (unbiased), all at once.

    With n = sum of the weights, date means m_d = sum_i w_i y_di / n and their weighted grand mean m: SS_date =
    n sum_d (m_d - m)^2 and SS_res = sum_i w_i S_i - SS_date, S_i the question's own sum of squares over the dates."""
    y = np.asarray(correct, dtype=float)
    n_dates = y.shape[0]
    weights = np.asarray(weights, dtype=float)
    n = weights.sum(1)
    by_date = weights @ y.T / n[:, None]  # resamples x dates
    ss_date = n * np.sum((by_date - by_date.mean(1, keepdims=True)) ** 2, axis=1)
    own = np.sum((y - y.mean(0)) ** 2, axis=0)
    ss_residual = weights @ own - ss_date
    return (ss_date / (n_dates - 1) - ss_residual / ((n - 1) * (n_dates - 1))) / n


def _sd(variance: np.ndarray | float) -> np.ndarray:
    """A date SD from a variance estimate: a negative estimate is an SD of 0."""
    return np.sqrt(np.maximum(variance, 0.0))


@dataclass(frozen=True)
class Sensitivity:
    """Whether A moves more with the date than B (:func:`sensitivity_difference`): each one's date SD without counting
    noise, A's less B's with its 95% interval, and the p-value of "equal date variance" (NaN where not estimated)."""

    a_date_sd: float
    b_date_sd: float
    value: float
    low: float
    high: float
    p_value: float


# A sparse sample cannot estimate the date sensitivity: it needs every grade.
NO_SENSITIVITY = Sensitivity(*[math.nan] * 6)


@dataclass(frozen=True)
class Comparison:
    """Model A against model B (:func:`compare`): each one's date-robust score with its interval, A's less B's
    clustered by question (value, low, high), their date sensitivity, and the dates and questions they share."""

    a: tuple[float, float, float]
    b: tuple[float, float, float]
    difference: tuple[float, float, float]
    sensitivity: Sensitivity
    n_dates: int
    n_items: int


def sensitivity_difference(a: np.ndarray, b: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> Sensitivity:
    """Is A more date-sensitive than B on these dates? The noise-free date standard deviation of each (the date
    variance component, without the counting noise that inflates the spread of per-date scores with few questions),
    their difference with a 95% percentile interval, and a two-sided p-value of "equal date variance", from resampling
    the questions (the same resample for both: they are paired by question; the dates are these dates)."""
    weights = resample_weights(np.shape(a)[1], n_boot, seed)
    ones = np.ones((1, np.shape(a)[1]))
    observed = [float(date_variances(m, ones)[0]) for m in (a, b)]
    drawn_a, drawn_b = date_variances(a, weights), date_variances(b, weights)
    low, high = np.percentile(_sd(drawn_a) - _sd(drawn_b), [2.5, 97.5])
    difference = drawn_a - drawn_b
    p_value = min(1.0, 2 * (1 + min(np.sum(difference <= 0), np.sum(difference >= 0))) / (n_boot + 1))
    return Sensitivity(
        a_date_sd=float(_sd(observed[0])),
        b_date_sd=float(_sd(observed[1])),
        value=float(_sd(observed[0]) - _sd(observed[1])),
        low=float(low),
        high=float(high),
        p_value=float(p_value),
    )


def compare(a: np.ndarray, b: np.ndarray) -> Comparison:
    """Model A against model B on the same dates and questions (dates x questions 0/1 each): each one's date-robust
    score and interval, their paired difference clustered by question (:func:`paired_difference`), and whether one
    moves more with the date (:func:`sensitivity_difference`): what ``dateeval compare`` and the Leaderboard print."""
    (score_a, low_a, high_a, _), (score_b, low_b, high_b, _) = date_robust(a), date_robust(b)
    value, low, high = paired_difference(a, b)
    return Comparison(
        a=(score_a, low_a, high_a),
        b=(score_b, low_b, high_b),
        difference=(value, low, high),
        sensitivity=sensitivity_difference(a, b),
        n_dates=int(np.shape(a)[0]),
        n_items=int(np.shape(a)[1]),
    )
