"""How big is the date effect next to other factors? (paper §5.5, Tables 3, 5)

Inferential statistics over stored per-item outcomes, kept apart from the
descriptive metrics in :mod:`dateeval.results.descriptive`, the tests against
chance in :mod:`dateeval.results.chance.chance`, the per-date intervals in
:mod:`dateeval.results.bands.bands` and the CVs and variance components in
:mod:`dateeval.results.variation`:

* outcome matrices (levels x items) from per-item rows;
* the CV per factor, each factor's levels against the base condition (Table 5);
* trend over the year and correlations across datasets and models (Table 3);
* how many sampled dates estimate the full-year delta and CV;
* the measured run-to-run variation (repeats of one condition).

Every function takes plain arrays or frames read from the store and is tested
against hand-computed or scipy values on synthetic data.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np
import pandas as pd

from dateeval.results.descriptive import entry_label
from dateeval.results.variation import bootstrap_cv, cv
from dateeval.schema import predictions, with_factor

# What stays fixed when comparing entries across precisions or across machines.
SAME_PRECISION_RUN = ["model", "device", "hardware", "dataset", "task_key"]
SAME_MACHINE_RUN = ["model_key", "dataset", "task_key"]


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
    from rows or from ``dateeval.results.sources.item_matrices``, so both give the same numbers.
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
