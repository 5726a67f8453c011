"""The 95% interval of a score on every date, drawn as the Curves page's band (paper Figure 1's shading): the exact
(Clopper-Pearson) interval of an accuracy, bounds on an ECE that hold whatever its bins' gaps, the jackknife over segments of a
corpus score (BLEU, chrF); and the bootstrap's item weights every resampling statistic shares."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dateeval.metrics.calibration import ece_bin_sums, ece_from_sums, resampled_bin_sums
from dateeval.metrics import METRICS


def resample_weights(n_items: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """How often each item is drawn in each of ``n_boot`` bootstrap resamples (resamples x items)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_items, (n_boot, n_items))
    return np.stack([np.bincount(draw, minlength=n_items) for draw in draws]).astype(
        np.float32
    )  # counts are exact in float32


BAND_COLUMNS = ["entry", "date", "low", "high"]


# The fewest questions from which the ECE interval (:func:`ece_interval`) covered the population ECE in the study
# (docs/coverage.md, "Per-date ECE"): below it no interval is printed.
ECE_BAND_MIN_ITEMS = 50
# The fewest right and the fewest wrong answers from which it is printed: with accuracy near 0 or 1 a sample of few
# misses (or hits) shows almost no spread, and the bound above, which reads the spread from the sample, covered only
# 0.58-0.80 at 50-100 questions (confidence 0.99-1.0 at accuracy 0.97-0.98); from 3 of each, 0.93 or more in every cell
# (issue 47 section 3; bench/coverage.py --only extremes, docs/coverage.md).
ECE_BAND_MIN_EACH = 3


def _bin_gap_error(sums: tuple[np.ndarray, ...], resampled: np.ndarray, seed: int) -> np.ndarray:
    """sum_b |mean_b - mu_b| under each resample (rows x resamples): the questions resampled (``resampled``: their
    bin sums), each one's grade drawn again at its bin's accuracy or mean confidence, whichever is nearer 0.5.

    Why redraw the grades: a bin whose answers were all wrong resamples with no spread at all, yet its true accuracy
    need not be 0 (the plain bootstrap covered 0.89-0.91 at 50 questions and accuracy 0.1 or 0.9); the nearer-0.5 rate
    gives it at least the spread a calibrated bin would have. More spread only widens the low end: never less cover.
    """
    right, stated, count = sums
    n_items = count.sum(-1, keepdims=True)
    filled = np.maximum(count, 1)
    observed, calibrated = right / filled, stated / filled
    accuracy = np.where(np.abs(observed - 0.5) < np.abs(calibrated - 0.5), observed, calibrated)
    drawn = np.random.default_rng(seed + 1).binomial(resampled[2].astype(np.int64), accuracy[:, None, :])
    centre = (count * accuracy - stated) / n_items
    return np.abs((drawn - resampled[1]) / n_items[:, None, :] - centre[:, None, :]).sum(-1)


def ece_interval(
    confidence: np.ndarray,
    correct: np.ndarray,
    n_boot: int = 200,
    seed: int = 0,
    min_items: int = ECE_BAND_MIN_ITEMS,
    tail: float = 0.025,
) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each row's population ECE (levels x items; each end misses at most ``tail``); NaN where a
    row has fewer than ``min_items`` questions (the study measures below :data:`ECE_BAND_MIN_ITEMS`), fewer than
    :data:`ECE_BAND_MIN_EACH` right or wrong answers (accuracy near 1 or 0: no bound holds there), or a missing
    confidence (``docs/coverage.md``).

    Why not a bootstrap of the ECE: the population ECE is sum_b |mu_b|, mu_b the mean of 1{bin b} (correct -
    confidence); the sample's sum_b |mean_b| sits above it with few questions, so its bootstrap misses from above
    (0.50 at 50 questions). Instead each end is a bound that holds whatever the bins' true gaps:

    * high: the ECE is s . mu for the true signs s, one fixed linear statistic, at most the plug-in's s . mean plus a
      one-sided t bound, whose standard deviation is at most the root mean squared (correct - confidence) (the Brier score);
    * low: |sum_b |mu_b| - sum_b |mean_b|| <= sum_b |mean_b - mu_b|, whose 1 - ``tail`` point :func:`_bin_gap_error`
      gives (``n_boot`` resamples, ``seed``); floored at 0 and never above the debiased estimate.
    """
    from scipy import stats as scipy_stats

    confidence, correct = (
        np.atleast_2d(np.asarray(confidence, dtype=float)),
        np.atleast_2d(np.asarray(correct, dtype=float)),
    )
    rows, n_items = confidence.shape
    if n_items < min_items or not np.isfinite(confidence).all():
        return np.full(rows, np.nan), np.full(rows, np.nan)
    sums = ece_bin_sums(np.repeat(np.arange(rows), n_items), confidence.ravel(), correct.ravel(), rows)
    plug_in = ece_from_sums(*sums, debiased=False)
    error = _bin_gap_error(sums, resampled_bin_sums(confidence, correct, resample_weights(n_items, n_boot, seed)), seed)
    low = np.minimum(np.maximum(plug_in - np.quantile(error, 1 - tail, axis=1), 0.0), ece_from_sums(*sums))
    brier = np.mean((correct - confidence) ** 2, axis=1)
    high = np.minimum(plug_in + scipy_stats.t.ppf(1 - tail, n_items - 1) * np.sqrt(brier / n_items), 1.0)
    right = correct.sum(1)
    extreme = np.minimum(right, n_items - right) < ECE_BAND_MIN_EACH
    return np.where(extreme, np.nan, low), np.where(extreme, np.nan, high)


def ece_difference_interval(confidence: np.ndarray, correct: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The 95% interval of the first row's population ECE less the second's (2 x items: two dates on the same
    questions): [low_1 - high_2, high_1 - low_2] of :func:`ece_interval` with each end at 1.25%, so each side misses
    at most 2.5% whatever the two dates' dependence; NaN below :data:`ECE_BAND_MIN_ITEMS` questions or with a missing
    confidence. Table 8's worst-to-best ECE delta carries it.

    Why not the bootstrap of the two debiased ECEs' difference: a calibrated date's ECE sits at its floor 0, where any
    estimate is biased upward, so the difference's bootstrap missed a delta against a calibrated date in 0.17-0.51 of
    simulated pairs (docs/coverage.md)."""
    low, high = ece_interval(confidence, correct, seed=seed, tail=0.0125)
    return float(low[0] - high[1]), float(high[0] - low[1])


def date_band(
    entry: str, dates: list, correct: np.ndarray, confidence: np.ndarray, metric: str, n_boot: int = 200, seed: int = 0
) -> pd.DataFrame:
    """One entry's rows of ``date_bands`` (a test oracle) from its dates x items matrices (empty where the metric has no
    band, e.g. the ECE with fewer than :data:`ECE_BAND_MIN_ITEMS` questions)."""
    if not METRICS[metric].per_item or correct.shape[1] == 0:
        return pd.DataFrame(columns=BAND_COLUMNS)
    if metric == "accuracy":
        low, high = clopper_pearson(np.rint(correct.sum(1)).astype(np.int64), correct.shape[1])
    else:
        low, high = ece_interval(confidence, correct, n_boot, seed)
        if np.isnan(low).all():
            return pd.DataFrame(columns=BAND_COLUMNS)
    return pd.DataFrame({"entry": entry, "date": pd.to_datetime(dates), "low": low, "high": high})


def clopper_pearson(right: np.ndarray, n: float, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper-Pearson) interval of a rate from ``right`` of ``n``: every true rate it leaves out would give a
    count at least this extreme with probability below (1 - level) / 2 on that side.

    Its coverage is at least ``level`` for every true rate and every n (Brown, Cai & DasGupta 2001); the percentile
    bootstrap's falls to 0.17 at 10 questions and 2% (``docs/coverage.md``), and gives 0 of n the zero-width band
    [0, 0]. Here 0 of n gives [0, 1 - (alpha/2)^(1/n)]: never zero width. ``right`` and ``n`` may be fractional (an
    effective sample size, ``robust.korn_graubard``).
    """
    from scipy import stats as scipy_stats

    right = np.asarray(right, dtype=float)
    alpha = 1 - level
    with np.errstate(invalid="ignore"):
        low = np.where(right > 0, scipy_stats.beta.ppf(alpha / 2, right, n - right + 1), 0.0)
        high = np.where(right < n, scipy_stats.beta.ppf(1 - alpha / 2, right + 1, n - right), 1.0)
    return low, high


CORPUS_SCORE_MAX = 100.0  # BLEU and chrF are on a 0-100 scale: the band's upper end stops there


def corpus_band(entry: str, dates: list, stats: np.ndarray, metric: str) -> pd.DataFrame:
    """95% interval of a corpus score (BLEU, chrF) on every date, by the jackknife over segments (the questions) on the
    log scale with a t quantile: each leave-one-segment-out corpus score from the summed statistics less that
    segment's, fed to sacrebleu's own score; the interval is score x exp(-+ t_{n-1} x the jackknife SE of log score),
    its upper end at most 100.

    ``stats`` is dates x segments x statistics: each segment's sufficient statistics on each date (NaN where a date
    lacks the segment, which then adds nothing). The percentile bootstrap it replaced covered 0.85 at 10 segments and
    0.91-0.93 from 20 to 1,000 (a percentile interval of a ratio of sums); coverage: docs/coverage.md. NaN ends on a
    date whose score, or a leave-one-out score, is 0 (no log), or with fewer than two segments.
    """
    from scipy import stats as scipy_stats

    from dateeval.metrics.corpus import score_from_stats

    if stats.size == 0:
        return pd.DataFrame(columns=BAND_COLUMNS)
    lows, highs = [], []
    for per_date in stats:
        present = per_date[np.isfinite(per_date).all(1)]
        total, n = present.sum(0), len(present)
        full = score_from_stats(metric, [total]) if n else 0.0
        left_out = (
            np.array([score_from_stats(metric, [total - segment]) for segment in present]) if n >= 2 else np.zeros(0)
        )
        if n < 2 or full <= 0 or (left_out <= 0).any():
            lows.append(float("nan")), highs.append(float("nan"))
            continue
        logs = np.log(left_out)
        spread = float(scipy_stats.t.ppf(0.975, n - 1) * math.sqrt((n - 1) / n * np.sum((logs - logs.mean()) ** 2)))
        lows.append(full * math.exp(-spread)), highs.append(min(CORPUS_SCORE_MAX, full * math.exp(spread)))
    return pd.DataFrame({"entry": entry, "date": pd.to_datetime(dates), "low": lows, "high": highs})
