"""Expected calibration error, one implementation: bin sums per group, used for a single list, for many groups at
once and for bootstrap matrices (the sums are what a unit's sidecar keeps, so a condition's ECE never needs its rows)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

ECE_BINS = 10


def _bin_index(confidence: np.ndarray, bins: int) -> np.ndarray:
    """Bin m holds confidences in ((m-1)/M, m/M]; a confidence of exactly 0 falls in the first bin (paper App. C.1)."""
    return np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)


def ece_bin_sums(
    codes: np.ndarray, confidence: np.ndarray, correct: np.ndarray, groups: int, bins: int = ECE_BINS
) -> tuple[np.ndarray, ...]:
    """Per group and bin: sum of correct, sum of confidence, count (each groups x bins).

    These sums are all ECE needs, so they can be stored and added up instead of the rows.
    """
    index = codes * bins + _bin_index(confidence, bins)
    shape = (groups, bins)
    return (
        np.bincount(index, weights=correct, minlength=groups * bins).reshape(shape),
        np.bincount(index, weights=confidence, minlength=groups * bins).reshape(shape),
        np.bincount(index, minlength=groups * bins).reshape(shape),
    )


def ece_from_sums(
    sum_correct: np.ndarray, sum_confidence: np.ndarray, count: np.ndarray, debiased: bool = True
) -> np.ndarray:
    """ECE from bin sums (last axis = bins); NaN without rows.

    ``debiased`` (what every page prints): Kumar, Liang & Ma (2019)'s debiased estimator in closed form. Each bin's
    plug-in gap |acc - conf| is biased upward by the counting noise of its accuracy (a bin of 3 answers at 50% shows a
    gap near 0.3 even when calibrated), so each bin's term is 2|gap| - E|N(gap, acc (1 - acc) / n_bin)|: the plug-in
    less its own bias at the measured gap. The sum is floored at 0. ``debiased=False``: the paper's App. C.1 plug-in,
    sum over bins of |correct - confidence| / n (what the bias shrinks with thousands of questions).
    """
    gap_sum = sum_correct - sum_confidence
    total = count.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if not debiased:
            return np.abs(gap_sum).sum(-1) / total
        filled = count > 0
        size = np.where(filled, count, 1)
        accuracy, gap = sum_correct / size, gap_sum / size
        spread = np.sqrt(np.clip(accuracy * (1 - accuracy), 0, None) / size)
        ratio = np.where(spread > 0, gap / np.where(spread > 0, spread, 1), 0.0)
        expected = np.where(
            spread > 0,
            spread * math.sqrt(2 / math.pi) * np.exp(-(ratio**2) / 2) + gap * special.erf(ratio / math.sqrt(2)),
            np.abs(gap),
        )
        terms = np.where(filled, count * (2 * np.abs(gap) - expected), 0.0)
        return np.maximum(terms.sum(-1), 0.0) / total


def ece_by_code(
    codes: np.ndarray,
    confidence: np.ndarray,
    correct: np.ndarray,
    bins: int = ECE_BINS,
    groups: int | None = None,
    debiased: bool = True,
) -> np.ndarray:
    """ECE of every group (``codes`` = dense group numbers) in one vectorised pass.

    Rows without a confidence or a grade (generated answers, translations)
    are left out; a group with none left has no ECE (NaN).
    """
    groups = groups or int(codes.max()) + 1
    keep = np.isfinite(confidence) & np.isfinite(correct)
    return ece_from_sums(*ece_bin_sums(codes[keep], confidence[keep], correct[keep], groups, bins), debiased=debiased)


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS, debiased: bool = True) -> float:
    """Expected calibration error of one list of predictions (:func:`ece_from_sums`: debiased, or the paper's App. C.1
    plug-in); NaN when empty."""
    confidence, correct = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    if confidence.size == 0:
        return float("nan")
    return float(
        ece_by_code(np.zeros(confidence.size, dtype=np.int64), confidence, correct, bins, groups=1, debiased=debiased)[
            0
        ]
    )


def ece_rows(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS, debiased: bool = True) -> np.ndarray:
    """ECE of every row of (... x items) matrices at once (levels, or bootstrap resamples x levels)."""
    shape = confidence.shape[:-1]
    rows = int(np.prod(shape))
    codes = np.repeat(np.arange(rows, dtype=np.int64), confidence.shape[-1])
    flat = ece_by_code(
        codes,
        confidence.reshape(-1).astype(float),
        correct.reshape(-1).astype(float),
        bins,
        groups=rows,
        debiased=debiased,
    )
    return flat.reshape(shape)


def resampled_bin_sums(
    confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray, bins: int = ECE_BINS
) -> np.ndarray:
    """ECE's bin sums (sum of correct, of confidence, count) of every row of (levels x items) matrices under every
    bootstrap resample at once: 3 x levels x resamples x bins.

    ``weights`` (resamples x items) says how often each item was drawn; the
    bin sums of all resamples are then one matrix product per bin, so nothing
    loops over the resamples.
    """
    index, kind = _bin_index(confidence, bins), weights.dtype  # float32 weights halve the work of the products
    correct, confidence = correct.astype(kind), confidence.astype(kind)
    sums = np.zeros((3, *confidence.shape[:-1], weights.shape[0], bins), dtype=kind)
    for m in range(bins):
        mask = (index == m).astype(kind)
        for which, values in enumerate((mask * correct, mask * confidence, mask)):
            sums[which, ..., m] = values @ weights.T
    return sums


def ece_resampled(
    confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray, bins: int = ECE_BINS, debiased: bool = True
) -> np.ndarray:
    """ECE of every row of (levels x items) matrices under every bootstrap resample (:func:`resampled_bin_sums`): levels x resamples."""
    return ece_from_sums(*resampled_bin_sums(confidence, correct, weights, bins), debiased=debiased)
