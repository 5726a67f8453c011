"""How big is the date effect next to other factors? (paper §5.5, Tables 3, 5)

Inferential statistics over stored per-item outcomes, kept apart from the
descriptive metrics in :mod:`dateeval.results.descriptive`, the tests against
chance in :mod:`dateeval.results.chance` and the per-date intervals in
:mod:`dateeval.results.bands`:

* outcome matrices (levels x items) from per-item rows;
* coefficient of variation per factor with bootstrap confidence intervals (Table 5);
* the two-way variance components the date-robust number reads;
* trend over the year and correlations across datasets and models (Table 3);
* how many sampled dates estimate the full-year delta and CV;
* the measured run-to-run variation (repeats of one condition).

Every function takes plain arrays or frames read from the store and is tested
against hand-computed or scipy values on synthetic data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from dateeval.calibration import ece_rows
from dateeval.results.descriptive import entry_label
from dateeval.rows import predictions, with_factor

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a 95% interval is mean +- Z95 x standard error

# scipy is imported by the functions that need it, not here: importing it takes 1-2 s, and the explorer's
# first render (``paper`` imports ``cv``; the headline read back by ``dateeval.results.stored``) needs none of it.

# What stays fixed when comparing entries across precisions or across machines.
SAME_PRECISION_RUN = ["model", "device", "hardware", "dataset", "task_key"]
SAME_MACHINE_RUN = ["model_key", "dataset", "task_key"]


def cv(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Coefficient of variation: sample standard deviation over mean (paper §5.5)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # a zero mean (accuracy 0 on every level) has no CV: NaN
        return np.std(values, axis=axis, ddof=1) / np.mean(values, axis=axis)


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
        codes, uniques = (
            np.where(codes >= 0, rank[np.maximum(codes, 0)], -1),
            pd.Index(np.asarray(uniques, dtype=object)[order]),
        )
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
    No interval (NaN) where nothing is left to set the levels against (no residual variation, no design noise)."""
    noise = ms_residual + design * items
    estimate = math.sqrt(max(0.0, (ms_level - noise) / items))
    if noise <= 1e-12:  # each question has one outcome on every level: no counting noise to set the levels against
        return estimate, float("nan"), float("nan")
    d1, tail = levels - 1, (1 - level) / 2
    d2 = d1 * (items - 1)  # Satterthwaite's, where the design adds its noise
    if design:
        d2 = noise**2 / (ms_residual**2 / d2 + (design * items) ** 2 / design_df)
    widened = ms_level + 0.5 * (1 - 1 / levels) * step**2 / (items * d1)  # half the levels' SS's smallest step
    low, high = (_noncentrality(f / noise, d1, d2, p) for f, p in ((ms_level, 1 - tail), (widened, tail)))
    return estimate, *(math.sqrt(value * noise / (items * d1)) for value in (low, high))


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


FACTOR_COLUMNS = [
    "entry",
    "dataset",
    "factor",
    "levels",
    "n_items",
    "accuracy_cv",
    "accuracy_cv_noise_free",
    "accuracy_cv_low",
    "accuracy_cv_high",
    "accuracy_cv_meaningful",
    "ece_cv",
]


def entry_factors(
    entry: str, dataset: str, conditions: pd.DataFrame, matrices: Callable[[list], tuple[list, np.ndarray, np.ndarray]]
) -> list[dict]:
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
        out.append(
            {
                "entry": entry,
                "dataset": dataset,
                "factor": factor,
                "levels": len(names),
                "n_items": correct.shape[1],
                **bootstrap_cv(correct, confidence),
            }
        )
    return out


def across_factors(frame: pd.DataFrame) -> list[dict]:
    """Table 5's precision and hardware rows: entries of one model that differ only in dtype, or only in the machine
    (graded rows, with ``entry``)."""
    return _across(frame, SAME_PRECISION_RUN, "dtype", "precision") + _across(
        frame, SAME_MACHINE_RUN, "hardware", "hardware"
    )


def _across(frame: pd.DataFrame, fixed: list[str], varying: str, factor: str) -> list[dict]:
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
        entry = (
            f"{first['model']} ({first['device']})"
            if factor == "precision"
            else f"{first['model']} ({first['dtype']}, {first['device']})"
        )
        out.append(
            {
                "entry": entry,
                "dataset": first["dataset"],
                "factor": factor,
                "levels": len(names),
                "n_items": correct.shape[1],
                **bootstrap_cv(correct, confidence),
            }
        )
    return out


def date_trend(metrics: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (i): Spearman correlation between date and accuracy per entry and dataset."""
    from scipy import stats as scipy_stats

    rows = []
    for (entry, dataset), group in metrics[metrics["factor"] == "date"].groupby(["entry", "dataset"]):
        if len(group) < 3 or group["accuracy"].isna().all():  # a corpus score (BLEU, chrF) has no accuracy to trend
            continue
        if group["accuracy"].nunique() == 1:  # a flat line has no trend (and no defined correlation)
            rows.append(
                {
                    "entry": entry,
                    "dataset": dataset,
                    "n_dates": len(group),
                    "spearman": float("nan"),
                    "p_value": float("nan"),
                }
            )
            continue
        ordinal = pd.to_datetime(group["date"]).map(pd.Timestamp.toordinal)
        result = scipy_stats.spearmanr(ordinal, group["accuracy"])
        rows.append(
            {
                "entry": entry,
                "dataset": dataset,
                "n_dates": len(group),
                "spearman": float(result.statistic),
                "p_value": float(result.pvalue),
            }
        )
    return pd.DataFrame(rows, columns=["entry", "dataset", "n_dates", "spearman", "p_value"])


def same_direction(a: np.ndarray, b: np.ndarray) -> float:
    """Share of dates where both series are above, or both below, their own mean (50% = chance)."""
    return float(np.mean(np.sign(a - a.mean()) == np.sign(b - b.mean())))


def cross_correlations(metrics: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (ii, iii): Pearson correlation of accuracy over common dates, across datasets and across models."""
    from scipy import stats as scipy_stats

    table = metrics[metrics["factor"] == "date"].pivot_table(
        index="date", columns=["entry", "dataset"], values="accuracy"
    )
    rows = []
    for (entry_a, data_a), (entry_b, data_b) in combinations(table.columns, 2):
        if entry_a != entry_b and data_a != data_b:
            continue
        pair = table[[(entry_a, data_a), (entry_b, data_b)]].dropna()
        a, b = pair.iloc[:, 0].to_numpy(), pair.iloc[:, 1].to_numpy()
        if len(pair) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            continue
        kind = "same model, two datasets" if entry_a == entry_b else "two models, same dataset"
        rows.append(
            {
                "comparison": kind,
                "a": f"{entry_a} / {data_a}",
                "b": f"{entry_b} / {data_b}",
                "n_dates": len(pair),
                "pearson": float(scipy_stats.pearsonr(a, b).statistic),
                "same_direction": same_direction(a, b),
            }
        )
    return pd.DataFrame(rows, columns=["comparison", "a", "b", "n_dates", "pearson", "same_direction"])


def date_budget(
    accuracy: np.ndarray,
    sizes: tuple[int, ...] = (7, 14, 30, 60, 120, 180),
    tolerance: float = 0.2,
    n_draws: int = 500,
    seed: int = 0,
) -> pd.DataFrame:
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
        rows.append(
            {
                "dates": m,
                "delta_within": float(np.mean(np.abs(deltas - full_delta) <= tolerance * full_delta))
                if full_delta
                else 1.0,
                "delta_ratio": float(np.mean(deltas) / full_delta) if full_delta else 1.0,
                "cv_within": float(np.mean(np.abs(cvs - full_cv) <= tolerance * full_cv)) if full_cv else 1.0,
                "cv_ratio": float(np.mean(cvs) / full_cv) if full_cv else 1.0,
            }
        )
    return pd.DataFrame(rows, columns=["dates", "delta_within", "delta_ratio", "cv_within", "cv_ratio"])


def run_to_run(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured run-to-run variation: repeats of one condition against the original run (zero when deterministic)."""
    frame = with_factor(frame)
    repeated = frame.loc[frame["factor"] == "repeat", ["model_key", "dataset", "task_key"]].drop_duplicates()
    frame = frame.merge(repeated, on=["model_key", "dataset", "task_key"])  # only entries with repeats: far fewer rows
    frame = frame.assign(
        prediction=predictions(frame),
        correct=frame["correct"].astype(float),
        confidence=frame["confidence"].astype(float),
    )
    rows = []
    for (entry, dataset), group in frame.assign(entry=entry_label(frame)).groupby(["entry", "dataset"]):
        repeats = group[group["factor"] == "repeat"]
        if repeats.empty:
            continue
        base = group[(group["factor"] == "date") & (group["date"] == repeats["date"].iloc[0])]
        runs = pd.concat([base, repeats])
        _, correct, _ = outcome_matrices(runs, "condition_key")
        probs = runs.pivot_table(
            index="item_id", columns="condition_key", values="confidence", aggfunc="first"
        ).dropna()
        changes = int((runs.groupby("item_id")["prediction"].nunique() > 1).sum())
        rows.append(
            {
                "entry": entry,
                "dataset": dataset,
                "runs": correct.shape[0],
                "accuracy_cv": float(cv(correct.mean(1))) if correct.size and correct.mean() else 0.0,
                "max_confidence_difference": float((probs.max(1) - probs.min(1)).max()) if len(probs) else float("nan"),
                "prediction_changes": changes,
            }
        )
    return pd.DataFrame(
        rows, columns=["entry", "dataset", "runs", "accuracy_cv", "max_confidence_difference", "prediction_changes"]
    )
