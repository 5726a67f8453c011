"""Per-date values of a sparse sweep (``dateeval.sparse``), estimated from its drawn cells with design-based intervals.

A sparse entry's dense conditions (the pilot, any date scored in full) are exact. Every other date's mean over the N
questions (accuracy, mean confidence: any per-question value) is the **difference estimator** against a predictor:

    value = (sum_i m_i + sum_{i drawn} (y_i - m_i) / pi_i) / N

which is design-unbiased for the value a dense sweep would give on those N questions whatever the predictor, so long
as the predictor of a date's cells does not depend on that date's draw (Sarndal, Swensson and Wretman, *Model
Assisted Survey Sampling*, 6.3). The predictor is **cross-fitted over dates** (:func:`cross_fitted`): each question's
mean over every *other* date's scored cells, with the pilot's grade as one more observation. Cells are drawn
independently, so conditional on the other dates' draws each date's estimate is unbiased with the usual Poisson
variance; a question that moves on a third of its dates is predicted near 1/3 instead of by one pilot grade, which
halves its squared residuals, and most questions never move, so most residuals are 0 and the estimate is close to
exact from few cells (docs/coverage.md, "Against the best peer at the same cells").

The variance (:func:`_variance`) is the pooled one (:func:`_pooled`): each question gets the mean of its squared
residuals over every date it was drawn on (a question's residuals have the same expectation on every date unless the
date itself moves it), shrunk by one pseudo-cell toward its stratum of equal inclusion probability, whose mean carries
one pseudo-cell of squared residual 1/4 (a stratum where nothing moved in the sample still admits that something
might). A date that moves questions on its own is seen by its own cells: the pooled variance is scaled up by the ratio of the date's own
Horvitz-Thompson variance to what the pooled mean squares predict for the same drawn cells (:func:`_excess`; a ratio
estimator, never below 1). Taking the larger of the two variances instead covered 0.987-0.998 on a real store
(docs/coverage.md): most dates' own estimate is noise around the pooled one, and the larger of two noisy estimates is
biased up. The interval is the normal one, value +- 1.96 SE, cut to [0, 1].
Coverage against dense sweeps: docs/coverage.md ("Sparse sweeps").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from dateeval import sparse
from dateeval.errors import DateEvalError
from dateeval.results.robust import robust
from dateeval.results import variation
from dateeval.results.robust.robust_row import EntryStatistics
from dateeval.store.designs import DesignRecord

Z = 1.959963984540054
PRIOR_CELLS = 1.0  # pseudo-cells per stratum in the pooled variance
PRIOR_SQUARE = 0.25  # their squared residual: a cell that moves half the time
UNSEEN = 0.5  # the predictor of a question scored on no other date: the value nearest every 0/1 grade at worst


class Estimates(NamedTuple):
    """Per date: the estimate (design-unbiased, so not cut to [0, 1]: a rare draw can step outside), its 95% interval
    cut to [0, 1], and the cells drawn."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_scored: np.ndarray


def difference_estimates(
    values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray, critical: float = Z
) -> Estimates:
    """Each date's mean over the questions from its drawn cells.

    ``values`` is dates x questions with NaN where a cell was not drawn, ``inclusion`` the cells' probabilities
    (dates x questions, or one per question), ``predictor`` one value per question fixed before the draw, or one per
    cell (dates x questions) where no date's row depends on that date's own draw (:func:`cross_fitted`); ``critical``
    the normal quantile (``sparse.critical``: wider after a ``--target-width`` sweep's data-dependent stop)."""
    value, variance, drawn = _per_date(values, inclusion, predictor)
    half = np.where(
        np.isfinite(variance), critical * np.sqrt(variance), np.inf
    )  # a weight past float's range: no bound
    return Estimates(value, np.clip(value - half, 0, 1), np.clip(value + half, 0, 1), drawn.sum(1))


def _per_date(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per date the difference estimate and its variance (the pooled one, scaled by the date's excess), and which
    cells were drawn. A date scored in full (every probability 1) gets its exact value and variance 0."""
    drawn, residual, pi = _residuals(values, inclusion, predictor)
    n = drawn.shape[1]
    variance = _variance(drawn, residual, pi) / n**2
    return _estimates(predictor, residual, pi), variance, drawn


def _estimates(predictor: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per date the difference estimate, (sum of the predictor + the residuals' weighted total) / questions."""
    return (np.broadcast_to(predictor, residual.shape).sum(1) + (residual / pi).sum(1)) / residual.shape[1]


def cross_fitted(values: np.ndarray, prior: np.ndarray | None = None, weight: float = 0.0) -> np.ndarray:
    """Each cell's predictor, dates x questions: its question's mean over the scored cells of every other date
    (``values``: dates x questions, NaN where not scored), with ``prior`` (one value per question: the pilot's, where
    the pilot is not among the dates) counted as ``weight`` more cells.

    Why: a date's difference estimate stays design-unbiased with any predictor its own draw did not shape, and the
    other dates' cells are drawn independently of it; the question's rate over many dates predicts a cell better than
    one pilot grade. A question scored on no other date (and without a prior) gets :data:`UNSEEN`, a constant, so
    each date's estimate stays linear in its own drawn values (``sparse_chance`` shuffles them)."""
    values = np.asarray(values, dtype=float)
    seen = np.isfinite(values)
    y = np.where(seen, values, 0.0)
    total, count = y.sum(0), seen.sum(0).astype(float)
    if prior is not None and weight > 0:
        total, count = total + weight * np.nan_to_num(np.asarray(prior, dtype=float)), count + weight
    others, counted = total[None, :] - y, count[None, :] - seen
    return np.divide(others, counted, out=np.full(y.shape, UNSEEN), where=counted > 0)


def own_weight(sample: Sample) -> np.ndarray:
    """Per question, how much one drawn value moves its own date's estimate x questions: 1 / pi for a predictor fixed
    before the draw; with :func:`cross_fitted`'s, less its share in its own date's predictor, which drops it,
    1 / pi + (1 / pi - 1) / (cells of the question elsewhere, the prior's included). Where its probability differs by
    date the weight is its smallest's (a design's drawn dates share one per question)."""
    values = np.asarray(sample.values, dtype=float)
    free = np.isfinite(values) & ~np.asarray(sample.exact)[:, None]
    pi = np.where(free, sample.inclusion, np.inf).min(0)
    pi = np.where(np.isfinite(pi), pi, 1.0)
    if sample.prior_cells is None:
        return 1 / pi
    elsewhere = sample.prior_cells + np.isfinite(values).sum(0) - 1
    return 1 / pi + np.divide(1 / pi - 1, elsewhere, out=np.zeros(len(pi)), where=elsewhere > 0)


def _residuals(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[np.ndarray, ...]:
    """Which cells were drawn, each one's residual from the predictor (0 where not drawn) and the cells'
    probabilities, all dates x questions."""
    values = np.asarray(values, dtype=float)
    drawn = np.isfinite(values)
    residual = np.where(drawn, values - np.asarray(predictor, dtype=float), 0.0)
    return drawn, residual, np.broadcast_to(np.asarray(inclusion, dtype=float), values.shape)


def cells(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's design-unbiased value, m + d (y - m) / pi (d: drawn), and the unbiased estimate of its variance
    under Poisson sampling, d (1 - pi) (y - m)^2 / pi^2; cells are drawn independently, so they are uncorrelated."""
    drawn, residual, pi = _residuals(values, inclusion, predictor)
    return np.asarray(predictor, dtype=float) + residual / pi, np.where(drawn, (1 - pi) * residual**2 / pi**2, 0.0)


def mean_squares(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[float, float, float]:
    """:func:`unbiased_squares`, each set to 0 where its estimate falls below 0 (as the components are)."""
    return tuple(max(0.0, square) for square in unbiased_squares(values, inclusion, predictor))  # type: ignore[return-value]


def unbiased_squares(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[float, float, float]:
    """Design-unbiased estimates of the mean squares (items, dates, residual) the dense grid would give
    (``variation.mean_squares``), from a sample of its cells.

    Each sum of squares is |P y|^2 for a projection P of the grid; for uncorrelated cell estimates
    E |P y_hat|^2 = |P y|^2 + sum_c P_cc Var(y_hat_c), so subtracting sum_c P_cc v_c (v: :func:`cells`' variance
    estimates) leaves it unbiased. P_cc is (1 - 1/I) / D for items, (1 - 1/D) / I for dates, (1 - 1/D)(1 - 1/I) for
    the residual (D dates, I items); tests/results/test_sparse_robust.py checks it over every sample of small grids."""
    return squares_of(*cells(values, inclusion, predictor))


def squares_of(imputed: np.ndarray, variance: np.ndarray) -> tuple[float, float, float]:
    """:func:`unbiased_squares` of cells estimated without bias (``imputed``) with unbiased estimates of their
    variances (``variance``), uncorrelated across cells."""
    n_dates, n_items = imputed.shape
    total = float(variance.sum())
    dfs = (n_items - 1, n_dates - 1, (n_items - 1) * (n_dates - 1))
    diagonals = ((1 - 1 / n_items) / n_dates, (1 - 1 / n_dates) / n_items, (1 - 1 / n_dates) * (1 - 1 / n_items))
    squares = variation.mean_squares(imputed)
    return tuple(  # type: ignore[return-value]
        (square * df - diagonal * total) / df for square, df, diagonal in zip(squares, dfs, diagonals)
    )


def sparse_robust(
    values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray
) -> tuple[float, float, float, float]:
    """The date-robust score (the mean over dates and questions, ``robust.date_robust``) of a sample of a dates x
    questions grid of grades, with its 95% interval and degrees of freedom: (score, low, high, df).

    The score is the mean of the dates' difference estimates (design-unbiased for the dense grid's mean; cut to [0, 1]).
    Its error has two independent parts, so their variances add: the dense grid's own, over questions and dates (from
    :func:`mean_squares`, estimated without bias), and the sample's (each date's variance, :func:`difference_estimates`',
    summed over dates / D^2). The interval is ``robust.date_robust``'s (Korn-Graubard with plus-two questions) at that
    variance; with every cell scored it is ``date_robust``'s, exactly. Coverage: docs/coverage.md ("Sparse sweeps")."""
    values = np.asarray(values, dtype=float)
    inclusion = np.broadcast_to(np.asarray(inclusion, dtype=float), values.shape)
    predictor = np.broadcast_to(np.asarray(predictor, dtype=float), values.shape)
    scored = np.ones((len(values), 2))  # the plus-two questions are scored on every date
    padded = _robust_of(
        robust.plus_two(values), np.hstack([inclusion, scored]), np.hstack([predictor, scored * [1, 0]])
    )
    return robust.widened(_robust_of(values, inclusion, predictor), padded)


def _robust_of(values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray) -> tuple[float, float, float, float]:
    """Korn-Graubard's interval at the score cut to [0, 1]; where the cut moved it (a rare draw of heavy cells), widened
    to hold the normal one around the mean as estimated, which would otherwise read as certain near 0 or 1."""
    value, variance, _ = _per_date(values, inclusion, predictor)
    raw = float(value.mean())
    score = float(np.clip(raw, 0, 1))
    n_dates, n_items = values.shape
    squares = mean_squares(values, inclusion, predictor)
    design = float(variance.sum()) / n_dates**2
    _, low, high, df = robust.korn_graubard_from(score, squares, n_dates, n_items, design)
    total = max(0.0, (squares[1] + squares[0] - squares[2]) / (n_dates * n_items)) + design
    if raw == score and np.isfinite(total):
        return score, low, high, df
    half = Z * np.sqrt(total) if np.isfinite(total) else np.inf
    return score, min(low, float(np.clip(raw - half, 0, 1))), max(high, float(np.clip(raw + half, 0, 1))), df


def sparse_spread(
    values: np.ndarray, inclusion: np.ndarray, predictor: np.ndarray, squares: tuple[float, float, float]
) -> tuple[float, float, float]:
    """The SD across dates of the dates' true rates (the date variance component, ``variation.level_sd``) of a sample
    of a dates x questions grid, with its 95% interval: (estimate, low, high). ``squares``: its :func:`mean_squares`.

    The estimate is the square root of the date component of ``squares`` (design-unbiased before the root). The
    interval is ``level_sd``'s on the dates' estimates: their spread holds the sample's error besides the counting
    noise, so the noise the F sets them against is MS_residual plus the mean over dates of each date's own
    Horvitz-Thompson variance (:func:`own_variance`; stable once averaged over dates, where the pooled one's prior
    overstated it and covered 0.51) x questions, on Satterthwaite's degrees of freedom (the design's: the drawn cells
    of dates not scored in full, less one per such date); where no drawn cell moved, the noise is the pooled
    variance's (with its prior: the sample cannot rule out what it did not draw) and the upper end's continuity
    correction one drawn answer's step. With every cell scored it is the dense interval.
    Coverage: docs/coverage.md ("Sparse sweeps")."""
    n_dates, n_items = np.shape(values)
    if n_dates < 2 or n_items < 2:
        return float("nan"), float("nan"), float("nan")
    drawn, residual, pi = _residuals(values, inclusion, predictor)
    estimate = variation.components_from(squares, n_dates, n_items).date ** 0.5
    value = _estimates(predictor, residual, pi)
    pooled = _pooled(pi, _mean_squares(drawn, residual, pi))
    design = float(own_variance(drawn, residual, pi).mean() or pooled.mean()) / n_items**2
    uncertain = drawn & (pi < 1)
    design_df = max(1, int(uncertain.sum()) - int(np.any(pi < 1, axis=1).sum()))
    step = 1 / float(pi[uncertain].max()) if uncertain.any() else 1.0  # one drawn answer moved, its date's estimate
    ms_level = n_items * float(np.var(value, ddof=1))
    _, low, high = variation.level_sd(ms_level, squares[2], n_dates, n_items, design, design_df, step)
    return estimate, min(low, estimate), max(high, estimate)


def own_variance(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per date, the Horvitz-Thompson estimate of the variance of the residuals' weighted total under Poisson sampling:
    sum over drawn cells of (1 - pi) r^2 / pi^2 (unbiased; tests/pure/test_sparse_design.py enumerates every sample)."""
    return np.where(drawn, (1 - pi) * residual**2 / pi**2, 0.0).sum(1)


def _variance(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per date, the variance of the residuals' weighted total: the pooled one scaled by the date's excess."""
    squares = _mean_squares(drawn, residual, pi)
    return _pooled(pi, squares) * _excess(drawn, residual, pi, squares)


def _pooled(pi: np.ndarray, squares: np.ndarray) -> np.ndarray:
    """Per date, sum over its uncertain cells of (1 - pi) / pi times their mean squares (:func:`_mean_squares`)."""
    uncertain = pi < 1
    return np.where(uncertain, (1 - pi) / np.where(uncertain, pi, 1.0) * squares, 0.0).sum(1)


def _excess(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray, squares: np.ndarray) -> np.ndarray:
    """Per date, how much its own drawn cells' residuals exceed what the pooled mean squares predict for them: the
    Horvitz-Thompson variance (:func:`own_variance`) over the same sum with each cell's squared residual replaced by
    its mean squares ``squares`` (:func:`_mean_squares`; both unbiased for their totals, and correlated through the
    cells drawn, so their ratio is steadier than either), at least 1; 1 where no uncertain cell was drawn."""
    uncertain = drawn & (pi < 1)
    weight = np.where(uncertain, (1 - pi) / np.where(uncertain, pi, 1.0) ** 2, 0.0)
    expected = (weight * squares).sum(1)
    own = (weight * residual**2).sum(1)
    return np.maximum(1.0, np.divide(own, expected, out=np.ones(len(pi)), where=expected > 0))


def _mean_squares(drawn: np.ndarray, residual: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per cell (dates x questions), its question's mean squared residual over the dates it was drawn on, shrunk by
    one pseudo-cell toward the mean of the cells whose probabilities lie within a factor of 2 of its own (a stratum,
    over every date and question; with its own pseudo-cell of 1/4); 0 on cells scored for certain."""
    uncertain = pi < 1
    if not uncertain.any():
        return np.zeros(pi.shape)
    sampled = drawn & uncertain
    stratum = np.where(uncertain, np.floor(-np.log2(np.where(uncertain, pi, 1.0))), 0).astype(int)
    size = stratum.max() + 1
    seen = np.bincount(stratum[sampled], minlength=size)
    squares = np.bincount(stratum[sampled], weights=residual[sampled] ** 2, minlength=size)
    stratum_square = (squares + PRIOR_SQUARE * PRIOR_CELLS) / (seen + PRIOR_CELLS)
    own_squares = np.where(sampled, residual**2, 0.0).sum(0)
    mean_square = (own_squares[None, :] + stratum_square[stratum]) / (sampled.sum(0)[None, :] + 1)
    return np.where(uncertain, mean_square, 0.0)


def design_of(texts: pd.Series, record: DesignRecord | None = None) -> sparse.Design:
    """The design an entry's drawn rows were drawn under: the largest budget's (a larger budget's draw holds every
    smaller one's cells), of those its design record holds where it has one (every drawn row's must be among them).
    Designs of different seeds, pilots or baselines in one entry cannot be read as one sample."""
    designs = {sparse.Design.from_json(text) for text in texts.dropna().unique()}
    if record is not None:
        held = {sparse.Design.from_json(text) for text in record.designs}
        if not designs <= held:
            raise DateEvalError("its drawn rows carry a design its design record does not hold (the store was altered)")
        designs = held
    if len({(design.seed, design.pilot, design.baseline) for design in designs}) > 1:
        seeds = sorted({design.seed for design in designs})
        raise DateEvalError(
            f"it holds sparse draws of --budget-seed {', '.join(map(str, seeds))} or of different pilot dates or baselines: they "
            "are not one sample (sweep it again with one --budget-seed, into a new store)"
        )
    if not designs:
        raise DateEvalError("it holds no sparse design")
    return max(designs, key=lambda design: design.budget)


class Sample(NamedTuple):
    """One sparse entry's date conditions as a sample of its dense grid, in date order: ``values`` (dates x questions,
    NaN where a cell was not drawn), ``inclusion`` (the cells' probabilities, 1 on dates scored in full), the
    ``predictor`` (per cell, :func:`cross_fitted`; or one per question), and which dates are ``exact`` (scored in
    full)."""

    keys: list
    dates: list
    items: list
    values: np.ndarray
    inclusion: np.ndarray
    predictor: np.ndarray
    exact: np.ndarray
    seed: int | None = None  # the design's, which fixes each cell's uniform; None for a dense entry
    prior_cells: float | None = None  # the predictor's prior weight where it is cross-fitted; None: fixed before
    critical: float = Z  # the per-date intervals' normal quantile (``sparse.critical`` of the design's looks)

    def share_scored(self) -> float:
        """The share of the grid's cells that were scored."""
        return float(np.isfinite(self.values).mean())

    def of_dates(self, keep: np.ndarray) -> Sample:
        """The sample of the dates ``keep`` marks (a mask over its dates), its design unchanged."""
        picked = np.flatnonzero(keep)
        return self._replace(
            keys=[self.keys[i] for i in picked],
            dates=[self.dates[i] for i in picked],
            values=self.values[picked],
            inclusion=self.inclusion[picked],
            predictor=self.predictor[picked] if np.ndim(self.predictor) == 2 else self.predictor,
            exact=self.exact[picked],
        )


def sample_of(rows: pd.DataFrame, record: DesignRecord | None = None, column: str = "correct") -> Sample:
    """The :class:`Sample` of one sparse entry's rows (``item_id``, ``condition_key``, ``date``, ``factor``, ``design``,
    ``probs``, ``column`` and, where read, ``inclusion``) and its design record (``dateeval.store.designs``; None for
    a store from before records, whose dates are the ones its rows hold).

    Every date the record says was swept is in the sample, a date whose draw chose no cell included (estimated from the
    other dates' cells, with the interval that implies). The pilot is read from the rows of any factor (a design of
    round 2 had the no-date baseline as its pilot); the baseline is the predictor's prior. What the design claims is
    checked against what is stored, or the entry is
    refused in one line: the pilot (distinct dates, where the record puts them), each design (recomputed from the
    pilot, the budget and the grid), each drawn row's stored inclusion probability, every stored cell drawn by it
    (``u < pi``), and every cell it drew stored (a missing one is named by its date)."""
    design = design_of(rows["design"], record)
    # As text: a read's dictionary-encoded columns are categories in the order the files were read, which would
    # order the dates (and each sum over them) differently from one read to the next.
    rows = rows.drop_duplicates(["condition_key", "item_id"]).astype({"condition_key": str, "date": str})
    keys = list(design.pilot)
    piloted = rows[rows["condition_key"].isin(keys)]
    items = sorted(piloted["item_id"].astype(str).unique())
    try:
        w = sparse.pilot_propensity(rows, keys, items, design.baseline)
    except sparse.PilotIncomplete:
        raise DateEvalError(
            "its pilot (or the no-date baseline its design read) is incomplete in the store: run its sweep again to "
            "finish it"
        ) from None
    if record is not None:
        _check_record(record, design, w)
    dated = rows[rows["factor"].eq("date")]
    _check_inclusion(dated, w, items)
    pi = design.inclusion(w)
    dates = dated.groupby("condition_key")["date"].first()
    if record is not None:
        dates = dates.combine_first(pd.Series(dict(record.dates), dtype=str))
    dates = dates.sort_values(kind="stable")
    table = dated.pivot(index="condition_key", columns="item_id", values=column).reindex(dates.index, columns=items)
    values = table.astype(float).to_numpy()
    pilot = piloted.pivot(index="condition_key", columns="item_id", values=column).reindex(keys, columns=items)
    graded = np.isfinite(pilot.astype(float).to_numpy()).any(0)  # not: a question graded on no pilot condition
    exact = np.isfinite(values).all(1) | table.index.isin(keys)
    under = sparse.chosen(design, w, items, list(table.index))
    if (~exact[:, None] & ~under & np.isfinite(values)).any():
        raise DateEvalError("it holds cells its design did not draw (the store was altered, or mixes two sweeps)")
    chosen = np.where(exact[:, None], True, under)
    _check_complete(chosen & ~np.isfinite(values) & graded, list(dates))
    inclusion = np.where(exact[:, None], 1.0, np.broadcast_to(pi, values.shape))
    drawn = np.where(chosen, values, np.nan)
    prior, weight = _prior(rows, pilot.loc[[key for key in keys if key not in table.index]], items, column)
    predictor = cross_fitted(drawn, prior, weight)
    critical = sparse.critical(design.looks)
    return Sample(
        list(table.index), list(dates), items, drawn, inclusion, predictor, exact, design.seed, weight, critical
    )


def _prior(rows: pd.DataFrame, outside: pd.DataFrame, items: list, column: str) -> tuple[np.ndarray | None, float]:
    """The predictor's prior (each question's mean grade) and its weight in cells: the no-date baseline's grades
    where the entry has one (scored in full beside the dates); where a design's pilot is not a swept date (round 2's
    designs, whose pilot was the baseline: ``outside``), that pilot's."""
    baseline = rows[rows["factor"].eq("no-date")]
    if len(outside) or baseline.empty:
        found = outside
    else:
        found = baseline.pivot(index="condition_key", columns="item_id", values=column).reindex(columns=items)
    values = found.astype(float).to_numpy()
    return (np.nanmean(values, 0) if len(values) else None), float(len(values))


def _check_record(record: DesignRecord, design: sparse.Design, w: np.ndarray) -> None:
    """The record's pilot is the design's: the dates where ``sparse.pilot_indices`` puts them among the swept dates, or
    one condition that is not a swept date (round 2's designs, whose pilot was the no-date baseline); on its questions;
    each of its designs is the one ``sparse.solve`` gives for that budget from this pilot."""
    keys = [key for key, _ in record.dates]
    dated = [key for key in record.pilot if key in keys]
    placed = tuple(keys[i] for i in sparse.pilot_indices(len(keys), len(dated))) if dated else ()
    where = placed == tuple(dated) and (len(dated) == len(record.pilot) or len(record.pilot) == 1)
    if record.pilot != design.pilot or not where or record.n_items != len(w) or record.seed != design.seed:
        raise DateEvalError("its design record does not match its pilot (the store was altered)")
    drawn = len(keys) - len(dated)
    for held in map(sparse.Design.from_json, record.designs):
        solved = sparse.design_for(
            w,
            drawn,
            record.n_dense,
            seed=held.seed,
            budget=held.budget,
            pilot=held.pilot,
            floor_share=held.floor_share,
            looks=held.looks,
        )
        if not (np.isclose(solved.scale, held.scale, rtol=1e-6) and np.isclose(solved.floor, held.floor, rtol=1e-6)):
            raise DateEvalError(
                f"its design at budget {held.budget:g} is not the one its pilot gives (the store was altered)"
            )


def _check_inclusion(dated: pd.DataFrame, w: np.ndarray, items: list) -> None:
    """Each drawn row's stored inclusion probability is the one its own design gives its question."""
    if "inclusion" not in dated:
        return
    stored = dated[dated["design"].notna()]
    where = pd.Index(items).get_indexer(stored["item_id"].astype(str))
    for text, part in stored.groupby(stored["design"].astype(str)):
        index = where[stored["design"].astype(str).eq(text).to_numpy()]
        expected = sparse.Design.from_json(text).inclusion(w)[np.clip(index, 0, None)]
        if (index < 0).any() or not np.allclose(part["inclusion"].astype(float), expected, rtol=1e-9, atol=0):
            raise DateEvalError("its stored inclusion probabilities are not its design's (the store was altered)")


def _check_complete(missing: np.ndarray, dates: list) -> None:
    """Name the dates whose drawn cells are not stored (a unit file deleted, a sweep stopped early)."""
    if not missing.any():
        return
    named = ", ".join(f"{dates[row]} ({count})" for row, count in enumerate(missing.sum(1)) if count)
    raise DateEvalError(
        f"its drawn cells are not all in the store: missing on {named}; run its sweep again to score them"
    )


def sparse_statistics(sample: Sample) -> tuple[EntryStatistics, list[float]]:
    """The :class:`EntryStatistics` of a sample and its ``per_date`` estimates: :func:`sparse_robust`'s score and
    interval, the components of :func:`mean_squares`, the cells' share scored. The two-way bootstrap resamples a dense
    grid, so it is not run (NaN)."""
    values, inclusion, predictor = sample.values, sample.inclusion, sample.predictor
    found = sparse_robust(values, inclusion, predictor)
    squares = mean_squares(values, inclusion, predictor)
    components = variation.components_from(squares, *values.shape)
    spread = sparse_spread(values, inclusion, predictor, squares)
    statistics = EntryStatistics.of(found, components, spread, (np.nan,) * 4, sample.share_scored())
    per_date = np.clip(difference_estimates(values, inclusion, predictor).value, 0, 1)
    return statistics, per_date.tolist()


def dense_sample(dates: list, items: list, correct: np.ndarray) -> Sample:
    """A dense entry's dates x items grades as a :class:`Sample` with every cell scored (to compare with a sparse one)."""
    correct = np.asarray(correct, dtype=float)
    return Sample(
        list(dates),
        list(dates),
        list(items),
        correct,
        np.ones(correct.shape),
        np.zeros(correct.shape[1]),
        np.ones(len(correct), dtype=bool),
    )


def compare(a: Sample, b: Sample) -> robust.Comparison | None:
    """``robust.compare``'s findings for two entries of which one or both were swept sparsely, on the dates they share
    (None where fewer than two, or not the same questions): each one's :func:`sparse_robust`, their
    :func:`paired_difference`; the date sensitivity needs every grade and is not estimated (NaN)."""
    common = sorted(set(a.dates) & set(b.dates))
    if len(common) < 2 or list(a.items) != list(b.items):
        return None
    a, b = (sample.of_dates(np.isin(sample.dates, common)) for sample in (a, b))
    score_a, low_a, high_a, _ = sparse_robust(a.values, a.inclusion, a.predictor)
    score_b, low_b, high_b, _ = sparse_robust(b.values, b.inclusion, b.predictor)
    return robust.Comparison(
        a=(score_a, low_a, high_a),
        b=(score_b, low_b, high_b),
        difference=paired_difference(a, b),
        sensitivity=robust.NO_SENSITIVITY,
        n_dates=len(common),
        n_items=len(a.items),
    )


def paired_difference(a: Sample, b: Sample) -> tuple[float, float, float]:
    """A's date-robust score minus B's from their samples of the same dates (in one order) and questions, with
    ``robust.paired_difference``'s interval: the difference grid's mean squares estimated without bias
    (:func:`squares_of`) plus the samples' error.

    Each cell's difference is estimated by A's cell estimate minus B's (:func:`cells`). Swept with one seed (the same
    uniform for a cell in both) a cell is drawn in both with probability min(pi_a, pi_b), else pi_a pi_b; the
    covariance of the two estimates, r_a r_b (pi_ab - pi_a pi_b) / (pi_a pi_b), is estimated without bias from the
    cells drawn in both (divided by pi_ab). The samples' error of the mean is the larger of that difference's own
    estimate and the sum of each sample's (:func:`difference_estimates`' variances, which ignore the covariance: wider
    where the two move together)."""
    difference, variance = difference_cells(a, b)
    squares = tuple(max(0.0, square) for square in squares_of(difference, variance))
    each = sum(_per_date(s.values, s.inclusion, s.predictor)[1].sum() for s in (a, b))
    design = max(float(variance.sum()) / difference.size**2, float(each) / len(difference) ** 2)
    return robust.paired_from(float(difference.mean()), squares, *difference.shape, design)  # type: ignore[arg-type]


def difference_cells(a: Sample, b: Sample) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's estimated difference A - B (:func:`cells`) and the unbiased estimate of its variance, the two
    samples' covariance included (:func:`paired_difference`)."""
    (drawn_a, residual_a, pi_a), (drawn_b, residual_b, pi_b) = (
        _residuals(s.values, s.inclusion, s.predictor) for s in (a, b)
    )
    shared = a.seed is not None and a.seed == b.seed and list(a.keys) == list(b.keys)
    joint = np.minimum(pi_a, pi_b) if shared else pi_a * pi_b
    covariance = np.where(drawn_a & drawn_b, (joint - pi_a * pi_b) / (pi_a * pi_b * joint) * residual_a * residual_b, 0)
    (imputed_a, variance_a), (imputed_b, variance_b) = (cells(s.values, s.inclusion, s.predictor) for s in (a, b))
    return imputed_a - imputed_b, variance_a + variance_b - 2 * covariance


def estimates_table(sample: Sample) -> pd.DataFrame:
    """Per date condition of a sample: ``condition_key``, ``date``, ``value``, ``low``, ``high``, ``n_scored``,
    ``n_items``, ``estimated``. Exact dates have NaN bounds here (the caller gives them their dense interval); an
    estimate is shown as a share, cut to [0, 1]."""
    found = difference_estimates(sample.values, sample.inclusion, sample.predictor, sample.critical)
    exact = np.nanmean(np.where(sample.exact[:, None], sample.values, 0.0), 1)  # a date scored in full: its mean
    return pd.DataFrame(
        {
            "condition_key": sample.keys,
            "date": sample.dates,
            "value": np.where(sample.exact, exact, np.clip(found.value, 0, 1)),
            "low": np.where(sample.exact, np.nan, found.low),
            "high": np.where(sample.exact, np.nan, found.high),
            "n_scored": found.n_scored,
            "n_items": len(sample.items),
            "estimated": ~sample.exact,
        }
    )


def widest(value: np.ndarray, low: np.ndarray, high: np.ndarray, estimated: np.ndarray) -> float:
    """The largest distance from an estimated date's value to either end of its interval (as shown, cut to [0, 1]):
    what ``--target-width`` holds every date within; 0 where no date is estimated."""
    ends = np.maximum(np.asarray(value) - np.asarray(low), np.asarray(high) - np.asarray(value))
    picked = ends[np.asarray(estimated, dtype=bool)]
    return float(picked.max()) if len(picked) else 0.0


def drawn(sums: pd.DataFrame) -> pd.Series:
    """Which per-unit sums hold a sparse entry's drawn dates (a sample of its questions): the statistics that need every
    question on every date read the rest, and these only through a :class:`Sample`."""
    if "design" not in sums or sums["design"].isna().all():
        return pd.Series(False, index=sums.index)
    sparse_entries = sums.groupby(["entry", "dataset"])["design"].transform(lambda designs: designs.notna().any())
    counted = sums.groupby(["entry", "dataset", "condition_key"])["n_rows"].transform("sum")
    population = counted.groupby([sums["entry"], sums["dataset"]]).transform("max")
    return sparse_entries & sums["factor"].eq("date") & counted.lt(population)
