"""Test oracles: the row-based implementations of statistics the results layer computes once, on the fastest
representation (per-unit sums and condition x item matrices). Tests compare the product's numbers with these on the
same rows; nothing in ``dateeval`` imports them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dateeval.metrics.calibration import ece_by_code
from dateeval.metrics import METRICS
from dateeval.results.bands.bands import BAND_COLUMNS, date_band
from dateeval.results.chance.chance import (
    SIGNIFICANCE_COLUMNS,
    against,
    date_effect_family,
    null_draws,
    significance,
    verdict_groups,
)
from dateeval.results.descriptive import common_items, entry_label
from dateeval.results.inference import FACTOR_COLUMNS, across_factors, entry_factors, graded, outcome_matrices
from dateeval.schema import group_codes as _codes
from dateeval.schema import predictions, with_factor
from dateeval.schema import ENTRY, ENTRY_KEY


def item_flips(frame: pd.DataFrame) -> pd.DataFrame:
    """Per item and entry over the date conditions: how often right, how often the answer changes (Table 7).

    ``changes`` counts answer changes between consecutive dates (for
    generated outputs: a different parsed answer, code or translation);
    ``consistent`` means one answer on every date. ``mean_score`` is the
    mean sentence chrF of translations.
    """
    columns = [
        "entry",
        "dataset",
        "item_id",
        "n_dates",
        "share_observed",
        "n_correct",
        "n_wrong",
        "changes",
        "n_predictions",
        "consistent",
        "mean_confidence",
        "min_confidence",
        "mean_score",
        "answer",
    ]
    rows = with_factor(frame)
    rows = rows[rows["factor"] == "date"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows.assign(
        entry=entry_label(rows),
        prediction=predictions(rows),
        correct=rows["correct"].astype(float),
        score=rows["score"].astype(float) if "score" in rows else np.nan,
    )
    rows = rows.sort_values(["entry", "dataset", "item_id", "date"])
    group = rows.groupby(["entry", "dataset", "item_id"], sort=False)
    previous = group["prediction"].shift()
    rows = rows.assign(changed=(previous.notna() & (rows["prediction"] != previous)).astype(int))
    group = rows.groupby(["entry", "dataset", "item_id"], sort=False)
    out = group.agg(
        n_dates=("prediction", "size"),
        n_correct=("correct", "sum"),
        n_graded=("correct", "count"),
        changes=("changed", "sum"),
        n_predictions=("prediction", "nunique"),
        mean_confidence=("confidence", "mean"),
        min_confidence=("confidence", "min"),
        mean_score=("score", "mean"),
        answer=("answer", "first"),
    ).reset_index()
    out["n_correct"] = out["n_correct"].astype(int)
    out["n_wrong"] = out["n_graded"] - out["n_correct"]
    out["consistent"] = out["n_predictions"] == 1
    dates = rows.groupby(["entry", "dataset"])["condition_key"].nunique()  # the entry's date conditions
    out["share_observed"] = out["n_dates"] / [dates[key] for key in zip(out["entry"], out["dataset"])]
    return out[columns].sort_values(["changes", "mean_confidence"], ascending=[False, True], ignore_index=True)


def confidence_by_consistency(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean confidence of consistent vs inconsistent predictions per entry and dataset (paper Table 7)."""
    columns = ["entry", "dataset", "consistent_confidence", "inconsistent_confidence", "n_inconsistent", "n_items"]
    rows = with_factor(frame)
    rows = rows[rows["factor"] == "date"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows.assign(
        entry=entry_label(rows), prediction=predictions(rows), confidence=rows["confidence"].astype(float)
    )
    stable = (
        rows.groupby(["entry", "dataset", "item_id"])["prediction"].nunique().eq(1).rename("consistent").reset_index()
    )
    rows = rows.merge(stable, on=["entry", "dataset", "item_id"])
    table = rows.pivot_table(
        index=["entry", "dataset"], columns="consistent", values="confidence", aggfunc="mean", dropna=False
    )
    table = table.rename(columns={True: "consistent_confidence", False: "inconsistent_confidence"})
    counts = stable.groupby(["entry", "dataset"]).agg(
        n_items=("consistent", "size"), n_inconsistent=("consistent", lambda c: int((~c).sum()))
    )
    table = counts.join(table).reset_index()
    for column in ("consistent_confidence", "inconsistent_confidence"):
        if column not in table:
            table[column] = np.nan
    return table[columns]


def factor_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 5: CV of accuracy and ECE for every factor swept, per entry and dataset, same items.

    A factor's levels are its own conditions plus the base condition (the
    date sweep's condition on the factor's date, every other factor at its
    default). Precision compares entries of one model that differ only in
    dtype, hardware those that differ only in the machine (e.g. two GPU
    models), each on a date they share.
    """
    frame = graded(frame)
    frame = frame.assign(entry=entry_label(frame))
    rows = []
    for (entry, dataset), group in frame.groupby(["entry", "dataset"], sort=True):
        rows += entry_factors(
            entry,
            dataset,
            group[["factor", "date", "condition_key"]].drop_duplicates(ignore_index=True),
            lambda keys, group=group: outcome_matrices(group[group["condition_key"].isin(keys)], "condition_key"),
        )
    return pd.DataFrame(rows + across_factors(frame), columns=FACTOR_COLUMNS)


def date_significance(frame: pd.DataFrame, n_perm: int = 500) -> pd.DataFrame:
    """Per entry and dataset: the observed delta, its null band and p-value, and Cochran's Q (graded rows only)."""
    return significance_rows(frame, n_perm).reindex(columns=SIGNIFICANCE_COLUMNS)


def date_bands(rows: pd.DataFrame, metric: str, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
    """95% bootstrap interval of accuracy or ECE on every date, per entry, from resampling the questions.

    Every date uses the same resamples (the items are paired across dates),
    and each resample is a weight per item, so all dates x resamples come
    from matrix products: no loop over resamples. BLEU and chrF are corpus
    scores without per-item grades here: no band.
    """
    rows = graded(rows)
    rows = rows[rows["factor"] == "date"]
    out = []
    named = "entry" in rows and rows["entry"].notna().all()
    for entry, group in rows.assign(entry=rows["entry"] if named else entry_label(rows)).groupby("entry", sort=True):
        out.append(date_band(entry, *outcome_matrices(group, "date"), metric, n_boot, seed))
    out = [band for band in out if len(band)]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=BAND_COLUMNS)


def null_band(correct: np.ndarray, n_perm: int = 500, level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Worst-to-best delta against what chance alone gives over the same dates and items (:func:`null_draws`)."""
    return against(float(np.ptp(correct.mean(1))), null_draws(correct, n_perm, seed), level)


def significance_rows(frame: pd.DataFrame, n_perm: int = 200) -> pd.DataFrame:
    """``chance.significance`` (with its null draws) of every entry with two or more dates, from rows."""
    frame = graded(frame)
    rows = []
    for (entry, dataset), group in frame.assign(entry=entry_label(frame)).groupby(["entry", "dataset"]):
        dated = group[group["factor"] == "date"]
        if dated["condition_key"].nunique() >= 2:
            rows.append(significance(entry, dataset, outcome_matrices(dated, "condition_key")[1], n_perm).record())
    return pd.DataFrame(rows)


def verdict(frame: pd.DataFrame) -> float:
    """The headline's family-wise p-value from rows: every entry with two or more dates, its date x item matrix with
    rows in date order, entries on one dataset and the same dates shuffled jointly."""
    frame = graded(frame)
    keys, matrices = [], []
    for (entry, dataset), group in frame.assign(entry=entry_label(frame)).groupby(["entry", "dataset"]):
        dated = group[group["factor"] == "date"]
        if dated["condition_key"].nunique() >= 2:
            dates, correct, _ = outcome_matrices(dated, "date")
            keys.append((dataset, tuple(str(day) for day in dates)))
            matrices.append(correct)
    return date_effect_family(verdict_groups(keys, matrices))


def exact_family_p(groups: list[list[np.ndarray]]) -> float:
    """The family-wise p-value over EVERY joint permutation (each question's dates permuted alike in every entry of a
    group, groups independently): the share of tables whose smallest chi-square Cochran p is at most the observed."""
    from itertools import permutations, product

    from scipy.stats import chi2

    def logp(matrix):
        right, n_dates = matrix.sum(0), matrix.shape[0]
        denominator = n_dates * right.sum() - np.sum(right**2)
        if denominator == 0:
            return 0.0
        counts = matrix.sum(1)
        q = (n_dates - 1) * (n_dates * np.sum(counts**2) - counts.sum() ** 2) / denominator
        return float(chi2.logsf(q, n_dates - 1))

    def tables(group):  # every joint arrangement of one group: a permutation of the dates per question
        n_dates, n_items = group[0].shape
        for orders in product(list(permutations(range(n_dates))), repeat=n_items):
            yield [np.stack([m[list(order), i] for i, order in enumerate(orders)], 1) for m in group]

    observed = min(logp(m) for group in groups for m in group)
    null = [
        min(logp(m) for arrangement in arrangements for m in arrangement)
        for arrangements in product(*(list(tables(g)) for g in groups))
    ]
    return float(np.mean(np.array(null) <= observed + 1e-9 * max(1, abs(observed))))


def largest_of(deltas: list[float], draws: list[np.ndarray], level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """``chance.largest_of`` as a plain loop over the permutations."""
    rng = np.random.default_rng(seed)
    shuffled = [rng.permutation(np.asarray(d, dtype=float)) for d in draws]
    maxima = np.array([max(entry[j] for entry in shuffled) for j in range(min(len(d) for d in draws))])
    observed = max(deltas)
    return {
        "delta": observed,
        "null_median": float(np.median(maxima)),
        "null_upper": float(np.quantile(maxima, level)),
        "p_value": (1 + sum(1 for value in maxima if value >= observed - 1e-12)) / (len(maxima) + 1),
    }


def two_way_anova(matrix: list[list[float]]) -> dict[str, float]:
    """Two-way random-effects ANOVA without replication (rows = dates, columns = items) by explicit loops, the reference
    for ``robust.variance_components``: sums of squares, mean squares, and the method-of-moments components
    E[MS_item] = s_res + D s_item, E[MS_date] = s_res + I s_date, E[MS_res] = s_res (negatives set to 0)."""
    dates, items = len(matrix), len(matrix[0])
    grand = sum(sum(row) for row in matrix) / (dates * items)
    date_means = [sum(row) / items for row in matrix]
    item_means = [sum(matrix[d][i] for d in range(dates)) / dates for i in range(items)]
    ss_total = sum((matrix[d][i] - grand) ** 2 for d in range(dates) for i in range(items))
    ss_date = items * sum((mean - grand) ** 2 for mean in date_means)
    ss_item = dates * sum((mean - grand) ** 2 for mean in item_means)
    ss_residual = ss_total - ss_date - ss_item
    ms_item, ms_date, ms_residual = (
        ss_item / (items - 1),
        ss_date / (dates - 1),
        ss_residual / ((items - 1) * (dates - 1)),
    )
    return {
        "ms_item": ms_item,
        "ms_date": ms_date,
        "ms_residual": ms_residual,
        "item": max(0.0, (ms_item - ms_residual) / dates),
        "date": max(0.0, (ms_date - ms_residual) / items),
        "residual": ms_residual,
    }


def rank_intervals(scores: pd.DataFrame) -> pd.DataFrame:
    """``ranks.rank_intervals`` by recounting: an entry's rank on a date is 1 + the entries strictly ahead of it;
    the central 95% are the sorted ranks at positions ceil(q n) - 1 (the inverted CDF)."""
    import math

    rows = []
    for entry in scores.columns:
        ranks = sorted(
            1 + sum(1 for other in scores.columns if scores.at[day, other] > scores.at[day, entry])
            for day in scores.index
        )
        n = len(ranks)
        rows.append(
            {
                "entry": entry,
                "rank_best": ranks[0],
                "rank_worst": ranks[-1],
                "rank_low": ranks[max(0, math.ceil(0.025 * n) - 1)],
                "rank_high": ranks[max(0, math.ceil(0.975 * n) - 1)],
                "first_share": sum(rank == 1 for rank in ranks) / n,
                "n_ranked_dates": n,
            }
        )
    return pd.DataFrame(rows)


def pigeonhole_means(matrix: np.ndarray, date_draws: np.ndarray, item_draws: np.ndarray) -> list[float]:
    """The two-way bootstrap as a plain loop: for each resample, the mean over the drawn dates x drawn items (with repeats)."""
    means = []
    for dates, items in zip(date_draws, item_draws):
        cells = [float(matrix[d, i]) for d in dates for i in items]
        means.append(sum(cells) / len(cells))
    return means


def _mean_by_code(codes: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Mean of the finite values per group; NaN for a group without any."""
    keep = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(codes[keep], weights=values[keep], minlength=groups) / np.bincount(
            codes[keep], minlength=groups
        )


def _corpus_scores(frame: pd.DataFrame, codes: np.ndarray, groups: int) -> dict[str, np.ndarray]:
    """Corpus BLEU and chrF per group from the rows' stored sufficient statistics (NaN where a group has none)."""
    from dateeval.metrics.corpus import METRICS as MT_METRICS
    from dateeval.metrics.corpus import score_from_stats

    out = {}
    for name in MT_METRICS:
        scores = np.full(groups, np.nan)
        column = f"{name}_stats"
        if column in frame:
            has = frame[column].notna().to_numpy()
            if has.any():
                stats = np.vstack(frame[column].to_numpy()[has])
                sums = np.zeros((groups, stats.shape[1]))
                np.add.at(sums, codes[has], stats)
                for group in np.unique(codes[has]):
                    scores[group] = score_from_stats(name, sums[group : group + 1])
        out[name] = scores
    return out


def condition_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """The row-by-row reference for ``unit_sums.metrics``: Accuracy, ECE, mean confidence, BLEU and chrF per entry x condition, on the items common to all conditions."""
    columns = ENTRY + [
        "entry",
        "condition",
        "factor",
        "date_mode",
        "date",
        "task",
        "label_variant",
        "n_items",
        *METRICS,
        "mean_confidence",
    ]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = common_items(with_factor(frame))
    codes = _codes(frame, ENTRY_KEY + ["condition_key"])
    groups = int(codes.max()) + 1
    correct, confidence = frame["correct"].astype(float).to_numpy(), frame["confidence"].astype(float).to_numpy()
    first = np.unique(codes, return_index=True)[1]
    firsts = frame.assign(
        **{column: frame[column] if column in frame else None for column in ("task", "label_variant")}
    ).iloc[first]
    metrics = firsts[ENTRY + ["condition", "factor", "date_mode", "date", "task", "label_variant"]].reset_index(
        drop=True
    )
    for column in (
        "task",
        "label_variant",
    ):  # a column some files lack reads as NaN there: missing, as the sums keep it
        metrics[column] = metrics[column].astype(object).where(metrics[column].notna(), None)
    metrics["n_items"] = np.bincount(codes)
    metrics["accuracy"] = _mean_by_code(codes, correct, groups)
    metrics["ece"] = ece_by_code(codes, confidence, correct, groups=groups)
    metrics["mean_confidence"] = _mean_by_code(codes, confidence, groups)
    for name, scores in _corpus_scores(frame, codes, groups).items():
        metrics[name] = scores
    metrics["entry"] = entry_label(metrics)
    return metrics[columns].sort_values(ENTRY + ["date_mode", "date"], ignore_index=True)


def debiased_ece_by_loops(confidence: list[float], correct: list[float], bins: int = 10) -> float:
    """The debiased ECE by its definition (Kumar, Liang & Ma 2019), as loops: bin m holds the confidences in
    ((m-1)/M, m/M] (0 in the first); each filled bin adds n_m / n x (2 |gap| - E|X|), X ~ N(gap, acc (1 - acc) / n_m),
    E|X| integrated numerically (not the closed form the product uses); the sum floored at 0."""
    from scipy import integrate
    from scipy import stats as scipy_stats

    total = 0.0
    for m in range(1, bins + 1):
        inside = [(c, ok) for c, ok in zip(confidence, correct) if (m == 1 or c > (m - 1) / bins) and c <= m / bins]
        if not inside:
            continue
        accuracy = sum(ok for _, ok in inside) / len(inside)
        gap = accuracy - sum(c for c, _ in inside) / len(inside)
        spread = math.sqrt(accuracy * (1 - accuracy) / len(inside))
        if spread == 0:
            expected = abs(gap)
        else:
            density = scipy_stats.norm(gap, spread).pdf
            ends = sorted({gap - 12 * spread, gap + 12 * spread, min(max(0.0, gap - 12 * spread), gap + 12 * spread)})
            expected = sum(
                integrate.quad(lambda x: abs(x) * density(x), a, b, limit=200)[0] for a, b in zip(ends, ends[1:])
            )
        total += len(inside) / len(confidence) * (2 * abs(gap) - expected)
    return max(total, 0.0)
