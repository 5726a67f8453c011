"""Is the date effect real, and how big is it next to other factors? (paper §5.1, §5.5, Tables 3, 5, 7)

Inferential statistics over stored per-item outcomes, kept apart from the
descriptive metrics in :mod:`dateeval.results.descriptive`:

* coefficient of variation per factor with bootstrap confidence intervals (Table 5);
* trend over the year and correlations across datasets and models (Table 3);
* the null band of the worst-to-best delta (what max - min over the same
  number of dates would be if the date had no effect), by permuting each
  item's outcomes across dates;
* Cochran's Q test of "accuracy is the same on every date";
* how many sampled dates estimate the full-year delta and CV;
* the measured run-to-run variation (repeats of one condition).

Every function takes plain arrays or frames read from the store and is tested
against hand-computed or scipy values on synthetic data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from dateeval.results.descriptive import entry_label, kendall_taus, predictions, reordering, summarize, with_factor
from dateeval.metrics import METRICS, ece_bin_sums, ece_from_sums, ece_resampled, ece_rows, resampled_bin_sums

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a 95% interval is mean +- Z95 x standard error

# scipy is imported by the three functions that test with it, not here: importing it takes 1-2 s, and the explorer's
# first render (``paper`` imports ``cv``; the headline read back by ``dateeval.results.stored``) needs none of it.

# What stays fixed when comparing entries across precisions or across machines.
SAME_PRECISION_RUN = ["model", "device", "hardware", "dataset", "task_key"]
SAME_MACHINE_RUN = ["model_key", "dataset", "task_key"]


def cv(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Coefficient of variation: sample standard deviation over mean (paper §5.5)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # a zero mean (accuracy 0 on every level) has no CV: NaN
        return np.std(values, axis=axis, ddof=1) / np.mean(values, axis=axis)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap samples, NaN when no sample is defined."""
    finite = samples[np.isfinite(samples)]
    return (float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))) if finite.size else (float("nan"), float("nan"))


def outcome_matrices(rows: pd.DataFrame, level: str = "condition") -> tuple[list, np.ndarray, np.ndarray]:
    """(levels, correct, confidence): levels x items matrices over the items every level has.

    Levels and items in sorted order, each cell the first value a (level,
    item) has, as a pivot table would give, but from integer codes: millions
    of rows take a fraction of a second instead of many.
    """
    level_codes, levels = _sorted_codes(rows[level])
    item_codes, _ = _sorted_codes(rows["item_id"])
    shape = (len(levels), int(item_codes.max()) + 1 if len(item_codes) else 0)
    correct = _first_values(level_codes, item_codes, rows["correct"].to_numpy(dtype=float), shape)
    confidence = _first_values(level_codes, item_codes, rows["confidence"].to_numpy(dtype=float), shape)
    every = np.isfinite(correct).all(0)
    return list(levels), correct[:, every], confidence[:, every]


def _sorted_codes(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Codes of the values in their sorted order, also for categoricals (whose own order is the order they were read in,
    which would make the resamples' item weights, and so the intervals, depend on how the rows were read)."""
    codes, uniques = pd.factorize(values, sort=True)
    if isinstance(values.dtype, pd.CategoricalDtype) and len(uniques):
        order = np.argsort(np.asarray(uniques, dtype=object), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes, uniques = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1), pd.Index(np.asarray(uniques, dtype=object)[order])
    return codes, uniques


def _first_values(rows: np.ndarray, columns: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A matrix of the first finite value of each (row, column) cell; NaN where a cell has none."""
    keep = np.flatnonzero(np.isfinite(values))
    cells = rows[keep].astype(np.int64) * shape[1] + columns[keep]
    _, first = np.unique(cells, return_index=True)
    matrix = np.full(shape, np.nan)
    matrix.flat[cells[first]] = values[keep[first]]
    return matrix


def graded(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with a right/wrong grade (translations have scores instead), ``correct`` and ``confidence`` as floats.

    Generated answers have a grade but no confidence (NaN): their ECE
    statistics come out NaN, their accuracy statistics as usual.
    """
    rows = with_factor(frame)
    rows = rows[rows["correct"].notna()]
    return rows.assign(correct=rows["correct"].astype(float), confidence=rows["confidence"].astype(float))


# A CV over levels whose mean is fewer right answers than this measures counting noise, not the factor: binomial noise
# alone gives a CV of sqrt((1 - p) / (n p)), 0.45 at 5 right answers (mmlu_cot's 123% beside the paper's 0.78%).
CV_MIN_RIGHT = 5


def cv_meaningful(mean_accuracy: float, n_items: int) -> bool:
    """Whether a CV of accuracy says something about the factor: the mean level has :data:`CV_MIN_RIGHT` right answers."""
    return bool(mean_accuracy * n_items >= CV_MIN_RIGHT)


def _stated_interval(samples: np.ndarray) -> tuple[float, float]:
    """:func:`_interval`, except that a zero-width interval is no interval (NaN): every resample gave one value, e.g. the
    CV of levels with one right answer between them, whatever the resample."""
    low, high = _interval(samples)
    return (low, high) if high > low else (float("nan"), float("nan"))


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
        return {name: (value / total if total > 0 else float("nan")) for name, value in (("item", self.item), ("date", self.date), ("residual", self.residual))}


def variance_components(correct: np.ndarray) -> Components:
    """Item, date and item x date variance from the mean squares: E[MS_item] = s_res + D s_item, E[MS_date] =
    s_res + I s_date, E[MS_res] = s_res (needs two or more dates and items)."""
    n_dates, n_items = np.shape(correct)
    ms_item, ms_date, ms_residual = mean_squares(correct)
    return Components(item=max(0.0, (ms_item - ms_residual) / n_dates), date=max(0.0, (ms_date - ms_residual) / n_items),
                      residual=ms_residual, n_dates=n_dates, n_items=n_items)  # fmt: skip


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
    counting noise that inflates the CV of the measured rates: estimate and ``level`` interval.

    The levels' variance is the two-way ANOVA's method of moments, (MS_level - MS_residual) / items, clipped at 0.
    The interval inverts the noncentral F of MS_level / MS_residual in its noncentrality, I (L - 1) s^2 / sigma^2
    (Steiger 2004's interval for an ANOVA effect). Right/wrong outcomes tie exactly (two levels with the same count),
    where the F is 0 and the upper end would be 0 too: the upper end takes a continuity correction, half the smallest
    step the levels' sum of squares can take (one answer moved: (1 - 1/L) / I), which vanishes with many levels.
    Coverage, 10-200 questions, 2-12 levels: docs/coverage.md.
    NaN without two levels, two items and a mean above 0; no interval without residual variation."""
    levels, items = correct.shape
    if levels < 2 or items < 2 or correct.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    _, ms_level, ms_residual = mean_squares(correct)
    estimate = float(np.sqrt(variance_components(correct).date) / correct.mean())
    if ms_residual <= 1e-12:  # each question has one outcome on every level: no counting noise to set the levels against
        return estimate, float("nan"), float("nan")
    d1, d2, tail = levels - 1, (levels - 1) * (items - 1), (1 - level) / 2
    widened = ms_level + 0.5 * (1 - 1 / levels) / (items * d1)  # half the smallest step of the levels' sum of squares
    low, high = (_noncentrality(f / ms_residual, d1, d2, p) for f, p in ((ms_level, 1 - tail), (widened, tail)))
    return estimate, *(float(np.sqrt(value * ms_residual / (items * d1)) / correct.mean()) for value in (low, high))


def bootstrap_cv(correct: np.ndarray, confidence: np.ndarray, n_boot: int = 200, seed: int = 0) -> dict[str, float]:
    """CV of accuracy and ECE across levels (rows): the measured CVs (the paper's Table 5), the accuracy CV without
    counting noise with its interval (:func:`noise_free_cv`), the ECE CV's interval from resampling items (columns; none
    where every resample gives one value), and whether the accuracy CV is meaningful (:func:`cv_meaningful`)."""
    accuracy = correct.mean(1)
    ece_cv = ece_low = ece_high = float("nan")  # generated answers have no confidence, hence no ECE
    if np.isfinite(confidence).all():
        weights = resample_weights(correct.shape[1], n_boot, seed)  # resamples as item weights: matrix products, no loop
        boot_ece = cv(ece_resampled(confidence, correct, weights), axis=0)
        ece_cv = float(cv(ece_rows(confidence, correct)))
        ece_low, ece_high = _stated_interval(boot_ece)
    noise_free, low, high = noise_free_cv(correct)
    return {
        "accuracy_cv": float(cv(accuracy)),
        "accuracy_cv_noise_free": noise_free,
        "accuracy_cv_low": low,
        "accuracy_cv_high": high,
        "accuracy_cv_meaningful": cv_meaningful(float(accuracy.mean()), correct.shape[1]),
        "ece_cv": ece_cv,
        "ece_cv_low": ece_low,
        "ece_cv_high": ece_high,
    }


FACTOR_COLUMNS = ["entry", "dataset", "factor", "levels", "n_items", "accuracy_cv", "accuracy_cv_noise_free", "accuracy_cv_low", "accuracy_cv_high", "accuracy_cv_meaningful",
                  "ece_cv", "ece_cv_low", "ece_cv_high"]  # fmt: skip


def entry_factors(entry: str, dataset: str, conditions: pd.DataFrame, matrices: Callable[[list], tuple[list, np.ndarray, np.ndarray]],
                  n_boot: int) -> list[dict]:  # fmt: skip
    """Table 5's rows of one entry: for each factor, the CV across its levels and the base condition.

    ``conditions`` are the entry's graded conditions (``factor``, ``date``,
    ``condition_key``) in row order; ``matrices(keys)`` gives
    ``outcome_matrices`` of those conditions' graded rows by condition key,
    from rows or from ``dateeval.results.item_matrices``, so both give the same numbers.
    """
    out = []
    dated = conditions[conditions["factor"] == "date"]
    for factor in sorted(set(conditions["factor"]) - {"no-date", "template-default"}):
        levels = conditions[conditions["factor"] == factor]
        if factor != "date":
            day = levels["date"].iloc[0]
            levels = pd.concat([levels, dated[dated["date"] == day]])
        names, correct, confidence = matrices(list(levels["condition_key"]))
        if len(names) < 2 or correct.shape[1] == 0:
            continue
        out.append({"entry": entry, "dataset": dataset, "factor": factor, "levels": len(names), "n_items": correct.shape[1],
                    **bootstrap_cv(correct, confidence, n_boot)})  # fmt: skip
    return out


def across_factors(frame: pd.DataFrame, n_boot: int) -> list[dict]:
    """Table 5's precision and hardware rows: entries of one model that differ only in dtype, or only in the machine
    (graded rows, with ``entry``)."""
    return _across(frame, SAME_PRECISION_RUN, "dtype", "precision", n_boot) + _across(frame, SAME_MACHINE_RUN, "hardware", "hardware", n_boot)


def _across(frame: pd.DataFrame, fixed: list[str], varying: str, factor: str, n_boot: int) -> list[dict]:
    """CV across entries that differ only in ``varying`` (dtype or hardware), on the earliest date they share."""
    out = []
    dated = frame[frame["factor"] == "date"]
    for _, group in dated.groupby(fixed, sort=True):
        if group[varying].nunique() < 2:
            continue
        common = set.intersection(*(set(g["date"]) for _, g in group.groupby(varying)))
        if not common:
            continue
        names, correct, confidence = outcome_matrices(group[group["date"] == min(common)], varying)
        first = group.iloc[0]
        entry = f"{first['model']} ({first['device']})" if factor == "precision" else f"{first['model']} ({first['dtype']}, {first['device']})"
        out.append({"entry": entry, "dataset": first["dataset"], "factor": factor, "levels": len(names), "n_items": correct.shape[1],
                    **bootstrap_cv(correct, confidence, n_boot)})  # fmt: skip
    return out


def date_trend(metrics: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (i): Spearman correlation between date and accuracy per entry and dataset."""
    from scipy import stats as scipy_stats

    rows = []
    for (entry, dataset), group in metrics[metrics["factor"] == "date"].groupby(["entry", "dataset"]):
        if len(group) < 3 or group["accuracy"].isna().all():  # a corpus score (BLEU, chrF) has no accuracy to trend
            continue
        if group["accuracy"].nunique() == 1:  # a flat line has no trend (and no defined correlation)
            rows.append({"entry": entry, "dataset": dataset, "n_dates": len(group), "spearman": float("nan"), "p_value": float("nan")})
            continue
        ordinal = pd.to_datetime(group["date"]).map(pd.Timestamp.toordinal)
        result = scipy_stats.spearmanr(ordinal, group["accuracy"])
        rows.append({"entry": entry, "dataset": dataset, "n_dates": len(group), "spearman": float(result.statistic), "p_value": float(result.pvalue)})
    return pd.DataFrame(rows, columns=["entry", "dataset", "n_dates", "spearman", "p_value"])


def same_direction(a: np.ndarray, b: np.ndarray) -> float:
    """Share of dates where both series are above, or both below, their own mean (50% = chance)."""
    return float(np.mean(np.sign(a - a.mean()) == np.sign(b - b.mean())))


def cross_correlations(metrics: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (ii, iii): Pearson correlation of accuracy over common dates, across datasets and across models."""
    from scipy import stats as scipy_stats

    table = metrics[metrics["factor"] == "date"].pivot_table(index="date", columns=["entry", "dataset"], values="accuracy")
    rows = []
    for (entry_a, data_a), (entry_b, data_b) in combinations(table.columns, 2):
        if entry_a != entry_b and data_a != data_b:
            continue
        pair = table[[(entry_a, data_a), (entry_b, data_b)]].dropna()
        a, b = pair.iloc[:, 0].to_numpy(), pair.iloc[:, 1].to_numpy()
        if len(pair) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            continue
        kind = "same model, two datasets" if entry_a == entry_b else "two models, same dataset"
        rows.append({"comparison": kind, "a": f"{entry_a} / {data_a}", "b": f"{entry_b} / {data_b}", "n_dates": len(pair),
                     "pearson": float(scipy_stats.pearsonr(a, b).statistic), "same_direction": same_direction(a, b)})  # fmt: skip
    return pd.DataFrame(rows, columns=["comparison", "a", "b", "n_dates", "pearson", "same_direction"])


def null_draws(correct: np.ndarray, n_perm: int, seed: int = 0) -> np.ndarray:
    """Worst-to-best deltas chance alone gives over the same dates and items: ``n_perm`` draws.

    ``correct`` is dates x items. Under "the date has no effect" each item's
    outcomes are exchangeable across dates, so shuffling every item's column
    independently gives draws of max - min per-date accuracy with the same
    per-item flip counts.
    """
    return np.ptp(_shuffled_counts(np.asarray(correct) > 0.5, n_perm, np.random.default_rng(seed)), axis=1) / correct.shape[1]


def spread(counts: np.ndarray) -> np.ndarray:
    """How unequal the dates' right answers are: D sum(C_d^2) - (sum C_d)^2 over the last axis, in integers (exact).

    With every item's right answers fixed (as shuffling keeps them), Cochran's Q is this times a constant, so a
    permutation test on it is Cochran's Q test with an exact size, where the chi-square approximation is unsure (few items)."""
    counts = np.asarray(counts, dtype=np.int64)
    return counts.shape[-1] * np.sum(counts**2, axis=-1) - np.sum(counts, axis=-1) ** 2


def null_tests(correct: np.ndarray, n_perm: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int, float]:
    """From one set of shuffles: the worst-to-best deltas chance alone gives (:func:`null_draws`, the same draws);
    Cochran's Q as a permutation statistic, its draws and its observed value (:func:`spread`); and the chance band's
    half-width (:func:`envelope`)."""
    correct = np.asarray(correct) > 0.5
    counts = _shuffled_counts(correct, n_perm, np.random.default_rng(seed))
    right = correct.sum(0)
    observed = correct[:, (right > 0) & (right < correct.shape[0])].sum(1)  # the items shuffling moves, as the draws count them
    return np.ptp(counts, axis=1) / correct.shape[1], spread(counts), int(spread(observed)), envelope(counts, correct.shape[1])


def envelope(counts: np.ndarray, n_items: int, level: float = 0.95) -> float:
    """The half-width of the chance band drawn on Curves: with the date having no effect, every date's accuracy lies
    within the mean +- this in ``level`` of the shuffles (a simultaneous band over all the dates, the yardstick for
    "does the line leave it"). Shuffles keep the total right, so the mean over dates is the observed one."""
    counts = np.asarray(counts, dtype=float)
    if counts.size == 0:
        return 0.0
    deviation = np.abs(counts - counts.mean(1, keepdims=True)).max(1) / n_items
    return float(np.quantile(deviation, level))


def permutation_p(observed: float, draws: np.ndarray) -> float:
    """The permutation p-value (1 + draws at least as large) / (draws + 1): exact size under the null."""
    return float((1 + np.sum(np.asarray(draws) >= observed)) / (len(draws) + 1))


def cochran_logp(counts: np.ndarray, row_totals: np.ndarray) -> np.ndarray:
    """Cochran's Q's chi-square log p-value from per-date right answers (``counts``, ... x dates) and each question's
    right answers over the dates (``row_totals``, fixed under shuffling): the standardised statistic the verdict takes
    the smallest of over entries (entries with other numbers of dates are compared on one scale). 0 (p = 1) where no
    question varies across dates."""
    from scipy import stats as scipy_stats

    n_dates = counts.shape[-1]
    row_totals = np.asarray(row_totals, dtype=np.int64)
    denominator = n_dates * row_totals.sum() - np.sum(row_totals**2)
    if denominator == 0:
        return np.zeros(counts.shape[:-1])
    q = (n_dates - 1) * spread(counts) / denominator
    return scipy_stats.chi2.logsf(q, n_dates - 1)


SHUFFLE_CELLS = 4_000_000  # gathered cells per chunk of joint shuffles: bounds the memory at a few tens of MB


def joint_shuffled_counts(group: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Per-date right answers (entries x permutations x dates) of entries that share questions and dates (``group``:
    entries x dates x questions), each question's dates shuffled by ONE permutation applied to every entry: under "the
    date moves no entry" that keeps whatever ties the entries (one model at two precisions answers alike), so the
    draws have the observed data's dependence. Questions constant in every entry add the same to every date and are
    left out."""
    group = np.asarray(group) > 0.5
    n_entries, n_dates, _ = group.shape
    right = group.sum(1)
    varying = ((right > 0) & (right < n_dates)).any(0)
    by_question = np.ascontiguousarray(group[:, :, varying].transpose(0, 2, 1))  # entries x questions x dates
    counts = np.empty((n_entries, n_perm, n_dates), dtype=np.int64)
    chunk = max(1, SHUFFLE_CELLS // max(1, by_question.size))
    for start in range(0, n_perm, chunk):
        size = min(chunk, n_perm - start)
        order = rng.permuted(np.broadcast_to(np.arange(n_dates), (size, by_question.shape[1], n_dates)), axis=2)
        shuffled = np.take_along_axis(by_question[:, None], order[None], axis=3)  # entries x size x questions x dates
        counts[:, start:start + size] = shuffled.sum(2)
    return counts


VERDICT_PERM = 1000  # joint shuffles behind the verdict: a p-value near 0.05 has a Monte-Carlo SE of 0.007


def date_effect_family(groups: Sequence[Sequence[np.ndarray]], n_perm: int = VERDICT_PERM, seed: int = 0) -> float:
    """The family-wise p-value of "the date moves at least one entry": the smallest of the entries' Cochran's Q
    chi-square p-values (a min-p over standardised statistics), against the same smallest over joint shuffles.

    ``groups`` holds the entries (dates x questions 0/1 matrices) in sets that share questions and dates, rows in the
    same date order and columns in the same question order: a set is shuffled jointly (:func:`joint_shuffled_counts`),
    sets independently of each other. The observed table and the ``n_perm`` shuffled ones are exchangeable under the
    null, so the p-value (1 + shuffles at least as extreme) / (n_perm + 1) has its size for any number of entries, and
    can reach 1 / (n_perm + 1) whatever their number. The chi-square p only puts the entries on one scale: the
    permutation, not the approximation, gives the size. Coverage and power: docs/coverage.md.
    """
    rng = np.random.default_rng(seed)
    observed, null = 0.0, np.zeros(n_perm)
    for group in groups:
        group = np.stack([np.asarray(matrix) > 0.5 for matrix in group])
        if group.shape[1] < 2 or group.shape[2] == 0:
            continue
        counts = joint_shuffled_counts(group, n_perm, rng)
        for entry, drawn in zip(group, counts):
            totals = entry.sum(0)
            observed = min(observed, float(cochran_logp(entry.sum(1), totals)))
            null = np.minimum(null, cochran_logp(drawn, totals))
    return float((1 + np.sum(null <= observed + 1e-9 * max(1.0, abs(observed)))) / (n_perm + 1))


def reorder_chance(group: np.ndarray, observed: float, n_perm: int = 200, seed: int = 0) -> dict[str, float]:
    """The share of date pairs that reorder the entries when the date has no effect, beside the ``observed`` share.

    ``group`` is entries x dates x questions (0/1, the same dates and questions). Each question's dates are shuffled
    alike in every entry (:func:`joint_shuffled_counts`), and the entries' per-date right answers ranked on each date:
    counting noise alone reorders entries that are close, more so with few questions. Returns the chance share (the
    mean over ``n_perm`` shuffles), its 95% quantile and the permutation p-value of "the date reorders the entries more
    than chance does" (observed share at least as large)."""
    from dateeval.results.descriptive import reorder_share

    group = np.asarray(group) > 0.5
    right = group.sum(1)
    constant = ~((right > 0) & (right < group.shape[1])).any(0)  # left out of the shuffled counts: add back their share
    fixed = group[:, 0, constant].sum(1)
    counts = joint_shuffled_counts(group, n_perm, np.random.default_rng(seed)) + fixed[:, None, None]
    shares = np.array([reorder_share(counts[:, b].T) for b in range(n_perm)])
    shares = shares[np.isfinite(shares)]
    if not shares.size or not np.isfinite(observed):
        return {"chance": float("nan"), "chance_upper": float("nan"), "p_value": float("nan")}
    return {"chance": float(shares.mean()), "chance_upper": float(np.quantile(shares, 0.95)),
            "p_value": float((1 + np.sum(shares >= observed - 1e-12)) / (len(shares) + 1))}  # fmt: skip


def verdict_groups(keys: Sequence, matrices: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """The entries' matrices in the sets :func:`date_effect_family` shuffles jointly: equal ``keys`` (e.g. dataset
    and dates, rows sorted by date) and equal shapes. Joint shuffles are valid for any grouping under "the date moves
    nothing"; grouping entries that share questions keeps their dependence, which is where the power comes from."""
    found: dict = {}
    for key, matrix in zip(keys, matrices):
        found.setdefault((key, np.shape(matrix)), []).append(matrix)
    return list(found.values())


def power(correct: np.ndarray, effect: float = 0.05, n_sims: int = 100, n_perm: int = 100, seed: int = 0) -> float:
    """How often the verdict's test (Cochran's Q by permutation, 5%) finds a planted date effect of ``effect`` on
    these questions and dates: each question keeps its own rate (its share right over the dates), the dates' rates are
    moved by an even spread over +-``effect`` / 2 (in random order), and outcomes are drawn from those rates."""
    rng = np.random.default_rng(seed)
    correct = np.asarray(correct, dtype=float)
    rates, n_dates = correct.mean(0), correct.shape[0]
    found = 0
    for _ in range(n_sims):
        shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates))
        drawn = rng.random(correct.shape) < np.clip(rates[None, :] + shift[:, None], 0, 1)
        _, draws, observed, _ = null_tests(drawn, n_perm, int(rng.integers(1 << 31)))
        found += permutation_p(observed, draws) < 0.05
    return found / n_sims


def against(observed: float, draws: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """An observed delta against chance's draws of the same statistic: the band's median and ``level`` quantile
    (its upper edge) and the permutation p-value."""
    return {
        "delta": float(observed),
        "null_median": float(np.median(draws)),
        "null_upper": float(np.quantile(draws, level)),
        "p_value": float((1 + np.sum(draws >= observed - 1e-12)) / (len(draws) + 1)),
    }


def largest_of(deltas: Sequence[float], draws: Sequence[np.ndarray], level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """The largest of K entries' worst-to-best deltas against the null of that largest, not of one entry's.

    Picking the largest of K deltas and testing it against one entry's null
    band overstates the effect: even with no date effect, the largest of K
    null deltas is larger than a typical one. Each entry's permutation draws
    (:func:`null_draws`) are drawn independently; the null of the maximum is
    the maximum over entries of one draw each. Draws are paired at random
    (a permutation per entry), since entries drawn with one seed share their
    random stream.
    """
    rng = np.random.default_rng(seed)
    size = min(len(d) for d in draws)
    maxima = np.max([rng.permutation(np.asarray(d, dtype=float))[:size] for d in draws], axis=0)
    return against(max(deltas), maxima, level)


def _shuffled_counts(correct: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Per-date right answers (permutations x dates) with each item's outcomes shuffled across dates, every permutation at once.

    Shuffling an item's column puts its k right answers on a uniform random
    k-subset of the dates. Items right (or wrong) on every date add the same
    to every date and are left out (they do not move max - min). The subsets
    are drawn by selection sampling, date by date for all permutations and
    items together: date d is taken with probability (still to place) /
    (dates left), which gives every k-subset the same chance, with no sort.
    """
    n_dates = correct.shape[0]
    right = correct.sum(0)
    varying = (right > 0) & (right < n_dates)
    # float32 counts (whole numbers up to the dates, exact) compare with the float32 draws without a float64 copy
    remaining = np.broadcast_to(right[varying].astype(np.float32), (n_perm, int(varying.sum()))).copy()
    draws, taken = np.empty(remaining.shape, dtype=np.float32), np.empty(remaining.shape, dtype=bool)
    counts = np.empty((n_perm, n_dates), dtype=np.int64)
    for date in range(n_dates):  # buffers reused: the draws are the same as fresh arrays would hold
        rng.random(out=draws, dtype=np.float32)
        np.less(np.multiply(draws, np.float32(n_dates - date), out=draws), remaining, out=taken)
        np.subtract(remaining, taken, out=remaining)
        counts[:, date] = np.count_nonzero(taken, axis=1)
    return counts


def cochran_q(correct: np.ndarray) -> dict[str, float]:
    """Cochran's Q test that all dates (rows) have the same accuracy on the same items (columns)."""
    from scipy import stats as scipy_stats

    x = np.asarray(correct, dtype=float).T  # items x dates
    k = x.shape[1]
    columns, rows_total, total = x.sum(0), x.sum(1), x.sum()
    denominator = k * total - np.sum(rows_total**2)
    if denominator == 0:  # every item right on every date, or wrong on every date: nothing varies
        return {"q": 0.0, "df": k - 1, "p_value": 1.0}
    q = (k - 1) * (k * np.sum(columns**2) - total**2) / denominator
    return {"q": float(q), "df": k - 1, "p_value": float(scipy_stats.chi2.sf(q, k - 1))}


def date_budget(accuracy: np.ndarray, sizes: tuple[int, ...] = (7, 14, 30, 60, 120, 180), tolerance: float = 0.2,
                n_draws: int = 500, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """How well m randomly sampled dates estimate the full-year delta and CV.

    For each m: the share of draws whose delta (max - min) and CV fall within
    ``tolerance`` (relative) of the full-year values, and the mean ratio.
    A user with a small budget picks the smallest m with shares near 1.
    """
    rng = np.random.default_rng(seed)
    accuracy = np.asarray(accuracy, dtype=float)
    full_delta, full_cv = np.ptp(accuracy), float(cv(accuracy))
    rows = []
    for m in sizes:
        if m > len(accuracy):
            continue
        picks = np.array([rng.choice(len(accuracy), m, replace=False) for _ in range(n_draws)])
        deltas, cvs = np.ptp(accuracy[picks], axis=1), cv(accuracy[picks], axis=1)
        rows.append({
            "dates": m,
            "delta_within": float(np.mean(np.abs(deltas - full_delta) <= tolerance * full_delta)) if full_delta else 1.0,
            "delta_ratio": float(np.mean(deltas) / full_delta) if full_delta else 1.0,
            "cv_within": float(np.mean(np.abs(cvs - full_cv) <= tolerance * full_cv)) if full_cv else 1.0,
            "cv_ratio": float(np.mean(cvs) / full_cv) if full_cv else 1.0,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["dates", "delta_within", "delta_ratio", "cv_within", "cv_ratio"])


def run_to_run(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured run-to-run variation: repeats of one condition against the original run (zero when deterministic)."""
    frame = with_factor(frame)
    repeated = frame.loc[frame["factor"] == "repeat", ["model_key", "dataset", "task_key"]].drop_duplicates()
    frame = frame.merge(repeated, on=["model_key", "dataset", "task_key"])  # only entries with repeats: far fewer rows
    frame = frame.assign(prediction=predictions(frame), correct=frame["correct"].astype(float), confidence=frame["confidence"].astype(float))
    rows = []
    for (entry, dataset), group in frame.assign(entry=entry_label(frame)).groupby(["entry", "dataset"]):
        repeats = group[group["factor"] == "repeat"]
        if repeats.empty:
            continue
        base = group[(group["factor"] == "date") & (group["date"] == repeats["date"].iloc[0])]
        runs = pd.concat([base, repeats])
        _, correct, _ = outcome_matrices(runs, "condition_key")
        probs = runs.pivot_table(index="item_id", columns="condition_key", values="confidence", aggfunc="first").dropna()
        changes = int((runs.groupby("item_id")["prediction"].nunique() > 1).sum())
        rows.append({"entry": entry, "dataset": dataset, "runs": correct.shape[0],
                     "accuracy_cv": float(cv(correct.mean(1))) if correct.size and correct.mean() else 0.0,
                     "max_confidence_difference": float((probs.max(1) - probs.min(1)).max()) if len(probs) else float("nan"),
                     "prediction_changes": changes})  # fmt: skip
    return pd.DataFrame(rows, columns=["entry", "dataset", "runs", "accuracy_cv", "max_confidence_difference", "prediction_changes"])


SIGNIFICANCE_COLUMNS = ["entry", "dataset", "n_dates", "n_items", "delta", "null_median", "null_upper", "p_value", "cochran_q", "cochran_p",
                        "cochran_permutation_p", "exceeds_chance"]  # fmt: skip


def significance(entry: str, dataset: str, correct: np.ndarray, n_perm: int) -> dict:
    """One entry's row of ``date_significance`` (a test oracle) from its dates x items outcome matrix (by condition key)."""
    draws, spreads, observed, half_width = null_tests(correct, n_perm)
    band, q, permuted = against(float(np.ptp(correct.mean(1))), draws), cochran_q(correct), permutation_p(observed, spreads)
    return {"entry": entry, "dataset": dataset, "n_dates": correct.shape[0], "n_items": correct.shape[1], **band,
            "exceeds_chance": permuted < 0.05, "cochran_q": q["q"], "cochran_p": q["p_value"], "cochran_permutation_p": permuted,
            "mean_accuracy": float(correct.mean()), "chance_half_width": half_width,
            "null_draws": draws.tolist()}  # fmt: skip


def resample_weights(n_items: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """How often each item is drawn in each of ``n_boot`` bootstrap resamples (resamples x items)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_items, (n_boot, n_items))
    return np.stack([np.bincount(draw, minlength=n_items) for draw in draws]).astype(np.float32)  # counts are exact in float32


BAND_COLUMNS = ["entry", "date", "low", "high"]


# The fewest questions from which the ECE interval (:func:`ece_interval`) covered the population ECE in the study
# (docs/coverage.md, "Per-date ECE"): below it no interval is printed.
ECE_BAND_MIN_ITEMS = 50


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


def ece_interval(confidence: np.ndarray, correct: np.ndarray, n_boot: int = 200, seed: int = 0,
                 min_items: int = ECE_BAND_MIN_ITEMS, tail: float = 0.025) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each row's population ECE (levels x items; each end misses at most ``tail``); NaN where a
    row has fewer than ``min_items`` questions (the study measures below :data:`ECE_BAND_MIN_ITEMS`) or a missing
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

    confidence, correct = np.atleast_2d(np.asarray(confidence, dtype=float)), np.atleast_2d(np.asarray(correct, dtype=float))
    rows, n_items = confidence.shape
    if n_items < min_items or not np.isfinite(confidence).all():
        return np.full(rows, np.nan), np.full(rows, np.nan)
    sums = ece_bin_sums(np.repeat(np.arange(rows), n_items), confidence.ravel(), correct.ravel(), rows)
    plug_in = ece_from_sums(*sums, debiased=False)
    error = _bin_gap_error(sums, resampled_bin_sums(confidence, correct, resample_weights(n_items, n_boot, seed)), seed)
    low = np.minimum(np.maximum(plug_in - np.quantile(error, 1 - tail, axis=1), 0.0), ece_from_sums(*sums))
    brier = np.mean((correct - confidence) ** 2, axis=1)
    high = np.minimum(plug_in + scipy_stats.t.ppf(1 - tail, n_items - 1) * np.sqrt(brier / n_items), 1.0)
    return low, high


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


def headline(significance: pd.DataFrame, metrics: pd.DataFrame, verdict: float) -> dict | None:
    """The finding of a store in numbers: the verdict, whether the date moves any of the K graded entries (``verdict``,
    the family-wise p-value of :func:`date_effect_family` over those entries: Cochran's Q by joint permutation, min-p,
    its size kept for any K in ``docs/coverage.md``); its largest worst-to-best accuracy delta with what the largest of K
    shuffled deltas gives (:func:`largest_of`, and that delta's own p-value); how often two dates rank the entries
    differently.

    ``significance`` holds :func:`significance` rows (with their ``null_draws``) of every entry with two or more
    dates. None when there is none.
    """
    if significance.empty:
        return None
    top = significance.loc[significance["delta"].idxmax()]
    summary = summarize(metrics)
    dates = summary[(summary["entry"] == top["entry"]) & (summary["dataset"] == top["dataset"])].iloc[0]
    family = largest_of(significance["delta"].tolist(), significance["null_draws"].tolist())
    out = {"entry": top["entry"], "dataset": top["dataset"], "delta": family["delta"], "n_dates": int(top["n_dates"]), "n_items": int(top["n_items"]),
           "k_entries": len(significance), "null_median": family["null_median"], "null_upper": family["null_upper"], "p_value": verdict,
           "beyond_chance": verdict < 0.05, "delta_p_value": family["p_value"], "entry_null_upper": top["null_upper"], "entry_p_value": top["p_value"],
           "worst_date": dates.get("accuracy_worst_date"), "best_date": dates.get("accuracy_best_date"), "reorder": float("nan"), "reorder_dataset": None}  # fmt: skip
    entries = metrics[metrics["factor"] == "date"].groupby("dataset")["entry"].nunique()
    if len(entries) and entries.max() >= 2:
        dataset = top["dataset"] if entries.get(top["dataset"], 0) >= 2 else entries.idxmax()
        found = reordering(kendall_taus(metrics, dataset))
        out.update(reorder=found["share"], reorder_dataset=dataset, reorder_entries=int(entries[dataset]), reorder_pairs=found["n_pairs"],
                   reorder_defined=found["n_defined"], reorder_undefined=found["n_undefined"], reorder_count=found["n_reordered"])  # fmt: skip
    return out
