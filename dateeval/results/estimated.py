"""Per-date values of a sparse sweep (``dateeval.sparse``), estimated from its drawn cells with design-based intervals.

A sparse entry's dense conditions (baselines, pilot dates, any date scored in full) are exact. Every other date's mean
over the N questions (accuracy, mean confidence: any per-question value) is the **difference estimator** against the
pilot: each question's predictor ``m`` is its mean over the pilot dates, and

    value = (sum_i m_i + sum_{i drawn} (y_i - m_i) / pi_i) / N

which is design-unbiased for the value a dense sweep would give on those N questions, whatever the predictor
(Sarndal, Swensson and Wretman, *Model Assisted Survey Sampling*, 6.3). Most questions never move, so most residuals
are 0 and the estimate is close to exact from few cells. Its variance under Poisson sampling is estimated two ways and
the larger is used: the date's own Horvitz-Thompson variance estimate, and one that pools the squared residuals of
every date's drawn cells within strata of equal inclusion probability (with one pseudo-cell of squared residual 1/4
per stratum, so a stratum where nothing moved in the sample still admits that something might). The date's own
estimate is unbiased but, with few moving cells, often zero; the pooled one is stable. The interval is the normal one,
value +- 1.96 SE, cut to [0, 1]. Coverage against dense sweeps: docs/coverage.md ("Sparse sweeps").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from dateeval import sparse
from dateeval.errors import DateEvalError

Z = 1.959963984540054
PRIOR_CELLS = 1.0  # pseudo-cells per stratum in the pooled variance
PRIOR_SQUARE = 0.25  # their squared residual: a cell that moves half the time


class Estimates(NamedTuple):
    """Per date: the estimate (design-unbiased, so not cut to [0, 1]: a rare draw can step outside), its 95% interval
    cut to [0, 1], and the cells drawn."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_scored: np.ndarray


def difference_estimates(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> Estimates:
    """Each date's mean over the questions from its drawn cells.

    ``values`` is dates x questions with NaN where a cell was not drawn, ``inclusion`` the cells' probabilities
    (dates x questions, or one per question), ``predictor`` one value per question fixed before the draw."""
    values = np.asarray(values, dtype=float)
    pi = np.broadcast_to(np.asarray(inclusion, dtype=float), values.shape)
    m = np.asarray(predictor, dtype=float)
    n = values.shape[1]
    drawn = np.isfinite(values)
    residual = np.where(drawn, values - m, 0.0)
    weighted = np.where(drawn, residual / pi, 0.0)
    value = (m.sum() + weighted.sum(1)) / n
    variance = np.maximum(own_variance(drawn, residual, pi), _pooled(drawn, residual, pi)) / n**2
    half = Z * np.sqrt(variance)
    return Estimates(value, np.clip(value - half, 0, 1), np.clip(value + half, 0, 1), drawn.sum(1))


def own_variance(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per date, the Horvitz-Thompson estimate of the variance of the residuals' weighted total under Poisson sampling:
    sum over drawn cells of (1 - pi) r^2 / pi^2 (unbiased; tests/test_sparse_design.py enumerates every sample)."""
    return np.where(drawn, (1 - pi) * residual**2 / pi**2, 0.0).sum(1)


def _pooled(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per date, sum over its uncertain cells of (1 - pi) / pi times its stratum's mean squared residual, where a
    stratum is the cells whose probabilities lie within a factor of 2 (over every date)."""
    uncertain = pi < 1
    stratum = np.where(uncertain, np.floor(-np.log2(np.where(uncertain, pi, 1.0))), -1).astype(int)
    size = stratum.max() + 1 if uncertain.any() else 0
    seen = np.bincount(stratum[drawn & uncertain], minlength=size)
    squares = np.bincount(stratum[drawn & uncertain], weights=residual[drawn & uncertain] ** 2, minlength=size)
    mean_square = (squares + PRIOR_SQUARE * PRIOR_CELLS) / (seen + PRIOR_CELLS)
    per_cell = np.where(uncertain, (1 - pi) / pi * mean_square[np.clip(stratum, 0, None)] if size else 0.0, 0.0)
    return per_cell.sum(1)


def design_of(texts: pd.Series) -> sparse.Design:
    """The design an entry's drawn rows were drawn under: the largest budget's (a larger budget's draw holds every
    smaller one's cells). Designs of different seeds or pilots in one entry cannot be read as one sample."""
    designs = [sparse.Design.from_json(text) for text in texts.dropna().unique()]
    if len({(design.seed, design.pilot) for design in designs}) > 1:
        raise DateEvalError(
            "an entry holds sparse draws of different seeds or pilot dates: they are not one sample "
            "(sweep it again with one --budget-seed, into a new store)"
        )
    return max(designs, key=lambda design: design.budget)


def entry_estimates(rows: pd.DataFrame, column: str = "correct") -> pd.DataFrame:
    """Per date condition of one sparse entry (rows: ``item_id``, ``condition_key``, ``date``, ``factor``, ``design``,
    ``probs``, ``column``): ``condition_key``, ``date``, ``value``, ``low``, ``high``, ``n_scored``, ``n_items``,
    ``estimated``. Exact dates have NaN bounds here (the caller gives them their dense interval); an estimate is shown
    as a share, cut to [0, 1]."""
    design = design_of(rows["design"])
    dated = rows[rows["factor"].eq("date")].drop_duplicates(["condition_key", "item_id"])
    keys = list(design.pilot)
    items = np.array(sorted(dated.loc[dated["condition_key"].isin(keys), "item_id"].astype(str).unique()))
    try:
        pi = design.inclusion(sparse.pilot_propensity(dated, keys, list(items)))
    except sparse.PilotIncomplete:
        raise DateEvalError(
            "a sparse entry's pilot dates are incomplete in the store: run its sweep again to finish them"
        ) from None
    table = dated.pivot(index="condition_key", columns="item_id", values=column).reindex(columns=items).astype(float)
    predictor = np.nanmean(table.loc[keys].to_numpy(), 0)
    dates = dated.groupby("condition_key")["date"].first()
    exact = table.notna().sum(1).eq(len(items)) | table.index.isin(keys)
    out = pd.DataFrame(
        {
            "condition_key": table.index,
            "date": dates.reindex(table.index).to_numpy(),
            "value": table.mean(1).to_numpy(),
            "low": np.nan,
            "high": np.nan,
            "n_scored": table.notna().sum(1).to_numpy(),
            "n_items": len(items),
            "estimated": ~exact.to_numpy(),
        }
    )
    drawn_keys = list(table.index[~exact.to_numpy()])
    if drawn_keys:
        chosen = sparse.uniforms(design.seed, list(items), drawn_keys) < pi
        values = table.loc[drawn_keys].to_numpy()
        if (chosen & ~np.isfinite(values) & ~np.isnan(predictor)).any():
            raise DateEvalError(
                "a sparse entry's drawn cells are not all in the store (a sweep stopped early): run it again to finish them"
            )
        found = difference_estimates(np.where(chosen, values, np.nan), pi, np.nan_to_num(predictor))
        at = out["estimated"].to_numpy()
        out.loc[at, ["value", "low", "high"]] = np.column_stack(
            [np.clip(found.value, 0, 1), found.low, found.high]
        )  # a share, as shown
        out.loc[at, "n_scored"] = found.n_scored
    return out


def drawn(sums: pd.DataFrame) -> pd.Series:
    """Which per-unit sums hold a sparse entry's drawn dates (a sample of its questions): the statistics that need every
    question on every date read the rest, and these only through :func:`entry_estimates`."""
    if "design" not in sums or sums["design"].isna().all():
        return pd.Series(False, index=sums.index)
    sparse_entries = sums.groupby(["entry", "dataset"])["design"].transform(lambda designs: designs.notna().any())
    counted = sums.groupby(["entry", "dataset", "condition_key"])["n_rows"].transform("sum")
    population = counted.groupby([sums["entry"], sums["dataset"]]).transform("max")
    return sparse_entries & sums["factor"].eq("date") & counted.lt(population)
