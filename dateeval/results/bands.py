"""The 95% interval of a score on every date, drawn as the Curves page's band (paper Figure 1's shading): the exact
(Clopper-Pearson) interval of an accuracy, the bootstrap over questions of an ECE, the jackknife over segments of a
corpus score (BLEU, chrF); and the bootstrap's item weights every resampling statistic shares."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dateeval.metrics import METRICS, ece_resampled


def resample_weights(n_items: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """How often each item is drawn in each of ``n_boot`` bootstrap resamples (resamples x items)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_items, (n_boot, n_items))
    return np.stack([np.bincount(draw, minlength=n_items) for draw in draws]).astype(np.float32)  # counts are exact in float32


BAND_COLUMNS = ["entry", "date", "low", "high"]


# The fewest questions at which the ECE's percentile bootstrap covered the population ECE in the study (0.942 at 1,000;
# 0.870 at 200, 0.503 at 50: the sample ECE is biased upward): below it no ECE interval is printed.
ECE_BAND_MIN_ITEMS = 1000


def ece_interval(confidence: np.ndarray, correct: np.ndarray, n_boot: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each row's ECE (levels x items): the percentile bootstrap over questions, the same resamples
    for every row; NaN where a row has fewer than :data:`ECE_BAND_MIN_ITEMS` questions or a missing confidence, where
    no interval holds (``docs/coverage.md``)."""
    confidence, correct = np.atleast_2d(np.asarray(confidence, dtype=float)), np.atleast_2d(np.asarray(correct, dtype=float))
    if confidence.shape[1] < ECE_BAND_MIN_ITEMS or not np.isfinite(confidence).all():
        return np.full(confidence.shape[0], np.nan), np.full(confidence.shape[0], np.nan)
    low, high = np.percentile(ece_resampled(confidence, correct, resample_weights(confidence.shape[1], n_boot, seed)), [2.5, 97.5], axis=1)
    return low, high


def date_band(entry: str, dates: list, correct: np.ndarray, confidence: np.ndarray, metric: str, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
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

    from dateeval.corpus import score_from_stats

    if stats.size == 0:
        return pd.DataFrame(columns=BAND_COLUMNS)
    lows, highs = [], []
    for per_date in stats:
        present = per_date[np.isfinite(per_date).all(1)]
        total, n = present.sum(0), len(present)
        full = score_from_stats(metric, [total]) if n else 0.0
        left_out = np.array([score_from_stats(metric, [total - segment]) for segment in present]) if n >= 2 else np.zeros(0)
        if n < 2 or full <= 0 or (left_out <= 0).any():
            lows.append(float("nan")), highs.append(float("nan"))
            continue
        logs = np.log(left_out)
        spread = float(scipy_stats.t.ppf(0.975, n - 1) * math.sqrt((n - 1) / n * np.sum((logs - logs.mean()) ** 2)))
        lows.append(full * math.exp(-spread)), highs.append(min(CORPUS_SCORE_MAX, full * math.exp(spread)))
    return pd.DataFrame({"entry": entry, "date": pd.to_datetime(dates), "low": lows, "high": highs})


