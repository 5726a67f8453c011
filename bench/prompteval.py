"""The PromptEval peer: the extended Rasch baseline that sparse sweeps are measured against (issue 63, item 1).

**What PromptEval is.** Maia Polo et al., "Efficient multi-prompt evaluation of LLMs" (NeurIPS 2024, arXiv
2405.17202) estimate a model's accuracy under each of many prompt conditions (here: dates) from a small share of the
conditions x questions grid. They score a stratified sample of cells (balanced over conditions and over questions),
fit an extended Rasch model

    logit P(right on condition i, question j) = theta_i + beta_j

by L2-regularised logistic regression on the scored cells only, and estimate condition i's accuracy as the mean over
questions of the observed grade where the cell was scored and the fitted probability sigmoid(theta_i + beta_j) where
it was not. (The paper also fits covariate versions, theta_i = x_i' gamma and beta_j = z_j' psi from prompt and question
embeddings, and reads quantiles of the per-condition estimates; neither is needed here: dates have no embeddings, and
the comparison is per date.)

**What this module implements**, written from the paper's description (numpy and scipy only):

* ``balanced_cells``: the stratified cell sampler. Exactly ``n_cells`` cells; each condition gets floor or ceil of
  ``n_cells / n_conditions`` (after water-filling around cells marked ``always``); each question's count is as equal
  as possible (within 1 of every other when nothing is marked ``always``), random ties broken by ``seed``.
* ``fit_rasch``: maximum penalised likelihood of the model above, on the scored cells only, by
  ``scipy.optimize.minimize`` with the analytic gradient (``rasch_objective``) and Hessian-vector product: trust-region
  Newton-CG by default (what liblinear, PromptEval's solver, runs), L-BFGS on request (``solver="lbfgs"``); both
  reach the same optimum (the objective is strictly convex), the tests check it.
* ``rasch_estimates``: PromptEval's per-condition estimate (observed where scored, imputed by the fit elsewhere).

**The regularisation**, as PromptEval sets it: a fixed penalty, not cross-validated. Its code fits scikit-learn's
``LogisticRegression(C=100, fit_intercept=False)`` on one-hot condition and question columns, i.e. minimises
``sum of log-losses + ||w||^2 / (2 C)``; ``l2 = 1 / C = 0.01`` here is the same objective. It is weak on purpose: it
only keeps the fit finite where the likelihood has no maximum (a question right, or wrong, on every cell it was scored
on; an all-0 or all-1 grid) and leaves the rest to the data. Two details differ from that code and do not change what
is estimated beyond O(l2): it pins the last question's beta to 0 (the model is unchanged by theta + c, beta - c), here
every parameter is penalised alike and the penalty picks c; and it flips one random label when every scored grade is
equal (scikit-learn refuses a single class), here the penalised fit of such a grid is simply finite.

**What it does not do:** give an interval. PromptEval reports point estimates (and quantiles of them); nothing here
says how far an estimate may be from the dense value, and it is biased wherever the additive model is wrong (a date
effect that lives on some questions only). That is the gap dateeval's design-based intervals fill.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

# PromptEval's penalty: scikit-learn's C = 100 on a sum of log-losses, i.e. l2 / 2 * ||params||^2 with l2 = 1 / C.
DEFAULT_L2 = 0.01


def _row_targets(counts0: np.ndarray, n_items: int, n_cells: int, rng: np.random.Generator) -> np.ndarray:
    """Cells per condition: water-fill from the cells already marked (``counts0``) up to ``n_cells`` in all, every
    row at a common level ``L`` (or its own marked count when that is higher), the leftover cells one each to rows at
    ``L`` chosen at random."""
    lo, hi = 0, n_items
    while lo < hi:  # the largest L with sum(clip(L, counts0, n_items)) <= n_cells
        mid = (lo + hi + 1) // 2
        if np.maximum(counts0, mid).sum() <= n_cells:
            lo = mid
        else:
            hi = mid - 1
    targets = np.maximum(counts0, lo)
    left = n_cells - int(targets.sum())
    if left:
        at_level = np.flatnonzero((targets == lo) & (lo < n_items))
        targets[rng.choice(at_level, size=left, replace=False)] += 1
    return targets


def balanced_cells(
    n_conditions: int, n_items: int, n_cells: int, seed: int, always: np.ndarray | None = None
) -> np.ndarray:
    """PromptEval's stratified cell sampler: a ``n_conditions x n_items`` boolean mask with exactly ``n_cells`` True.

    Each condition gets floor or ceil of ``n_cells / n_conditions`` cells; each question's count is as equal as
    possible (every question within 1 of every other). ``always`` (same shape, optional) marks cells scored anyway,
    e.g. a dense baseline row: they are True in the mask and count toward ``n_cells``; the rest is spread so the
    conditions' totals are as equal as the marked cells allow (water-filling: a row with more marked cells gets none
    until the others catch up) and, within that, over the questions least covered so far.

    Construction: the conditions in random order, each takes its cells from the questions with the fewest cells so
    far (ties at random). With column counts all m or m + 1, taking k <= n_items distinct least-covered columns leaves
    them all in {m, m + 1} or {m + 1, m + 2}, so every question stays within 1 of every other (PromptEval's own loop,
    one cell at a time, can break this once a row holds all the least-covered questions). A dense ``always`` row adds
    1 to every question and keeps that; an arbitrary ``always`` pattern is balanced as far as it allows.
    """
    if n_conditions < 1 or n_items < 1:
        raise ValueError("the grid needs at least one condition and one question")
    mask = np.zeros((n_conditions, n_items), dtype=bool)
    if always is not None:
        always = np.asarray(always, dtype=bool)
        if always.shape != mask.shape:
            raise ValueError(f"always has shape {always.shape}, the grid {mask.shape}")
        mask |= always
    marked = int(mask.sum())
    if not marked <= n_cells <= mask.size:
        raise ValueError(
            f"n_cells = {n_cells} must lie between the cells marked always ({marked}) and the grid ({mask.size})"
        )
    rng = np.random.default_rng(seed)
    counts0 = mask.sum(axis=1)
    targets = _row_targets(counts0, n_items, n_cells, rng)
    column = mask.sum(axis=0).astype(float)
    for i in rng.permutation(n_conditions):
        k = int(targets[i] - counts0[i])
        if k == 0:
            continue
        # Least-covered free columns first, ties broken by a random key in (0, 1).
        key = column + rng.random(n_items)
        key[mask[i]] = np.inf
        chosen = np.argpartition(key, k - 1)[:k]
        mask[i, chosen] = True
        column[chosen] += 1
    return mask


def _objective_cells(
    params: np.ndarray, rows: np.ndarray, cols: np.ndarray, y: np.ndarray, n_rows: int, l2: float
) -> tuple[float, np.ndarray]:
    """``rasch_objective`` on the scored cells as flat lists (row index, column index, grade): what the fit runs."""
    theta, beta = params[:n_rows], params[n_rows:]
    z = theta[rows] + beta[cols]
    loss = float(np.sum(np.logaddexp(0.0, z) - y * z)) + 0.5 * l2 * float(params @ params)
    residual = expit(z) - y
    grad = l2 * params
    grad[:n_rows] += np.bincount(rows, weights=residual, minlength=n_rows)
    grad[n_rows:] += np.bincount(cols, weights=residual, minlength=params.size - n_rows)
    return loss, grad


def _hessp_cells(
    params: np.ndarray, vector: np.ndarray, rows: np.ndarray, cols: np.ndarray, y: np.ndarray, n_rows: int, l2: float
) -> np.ndarray:
    """The objective's Hessian times ``vector``: sum over scored cells of p (1 - p) (v_theta_i + v_beta_j) on row i
    and on column j, plus ``l2 * vector``."""
    p = expit(params[:n_rows][rows] + params[n_rows:][cols])
    t = p * (1.0 - p) * (vector[:n_rows][rows] + vector[n_rows:][cols])
    out = l2 * vector
    out[:n_rows] += np.bincount(rows, weights=t, minlength=n_rows)
    out[n_rows:] += np.bincount(cols, weights=t, minlength=vector.size - n_rows)
    return out


def _cells(grades: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(scored)
    return rows, cols, np.asarray(grades, dtype=float)[rows, cols]


def rasch_objective(
    params: np.ndarray, grades: np.ndarray, scored: np.ndarray, l2: float = DEFAULT_L2
) -> tuple[float, np.ndarray]:
    """The penalised negative log-likelihood and its gradient, for ``params = [theta (rows), beta (columns)]``:

        sum over scored (i, j) of  log(1 + exp(z_ij)) - y_ij z_ij,   z_ij = theta_i + beta_j
        + l2 / 2 * (||theta||^2 + ||beta||^2)

    ``grades`` may hold anything (NaN included) where ``scored`` is False; grades in [0, 1] that are not 0/1 are read
    as the cross-entropy's targets."""
    scored = np.asarray(scored, dtype=bool)
    rows, cols, y = _cells(grades, scored)
    return _objective_cells(np.asarray(params, dtype=float), rows, cols, y, scored.shape[0], l2)


def fit_rasch(
    grades: np.ndarray, scored: np.ndarray, l2: float = DEFAULT_L2, solver: str = "newton"
) -> tuple[np.ndarray, np.ndarray]:
    """The extended Rasch model ``logit P(right) = theta_condition + beta_question``, fitted on the scored cells by
    L2-penalised maximum likelihood. Returns ``(theta per condition, beta per question)``.

    ``l2`` defaults to PromptEval's fixed penalty (scikit-learn's C = 100, see the module docstring): weak, there only
    to keep the fit finite where the likelihood has no maximum. A condition or question with no scored cell gets 0
    (the penalty's pull), so its prediction rests on the other parameters alone. Must be > 0.

    ``solver``: ``"newton"`` (default), trust-region Newton-CG with the analytic gradient and Hessian-vector product
    (``scipy.optimize.minimize(method="trust-ncg")``, as liblinear's TRON), stopping at a gradient norm of 1e-6 (on a
    sum of log-losses: the estimates are then exact to far below 1e-6 of a point); about 10-30 ms on 42 x 300.
    ``"lbfgs"``: L-BFGS-B with the analytic gradient, to the same optimum. It takes 4-5 times more iterations, and its
    BLAS calls go multi-threaded: on a busy machine a fit took 0.5-1 s where Newton took 20 ms (14 ms with
    ``OPENBLAS_NUM_THREADS=1``), so it is the cross-check, not the default."""
    grades = np.asarray(grades, dtype=float)
    scored = np.asarray(scored, dtype=bool)
    if grades.shape != scored.shape or grades.ndim != 2:
        raise ValueError(f"grades {grades.shape} and scored {scored.shape} must be the same 2-d shape")
    if not l2 > 0:
        raise ValueError("l2 must be > 0 (without it an all-right question has no finite fit)")
    n_rows, n_cols = scored.shape
    rows, cols, y = _cells(grades, scored)
    if y.size == 0:
        return np.zeros(n_rows), np.zeros(n_cols)
    # Start: each row's logit of its (smoothed) scored mean, questions at 0.
    row_mean = (np.bincount(rows, weights=y, minlength=n_rows) + 0.5) / (np.bincount(rows, minlength=n_rows) + 1.0)
    start = np.concatenate([np.log(row_mean / (1.0 - row_mean)), np.zeros(n_cols)])
    args = (rows, cols, y, n_rows, l2)
    if solver == "newton":
        found = minimize(
            _objective_cells,
            start,
            args=args,
            jac=True,
            hessp=_hessp_cells,
            method="trust-ncg",
            options={"maxiter": 500, "gtol": 1e-6},
        )
    elif solver == "lbfgs":
        found = minimize(
            _objective_cells,
            start,
            args=args,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 5000, "maxcor": 20, "gtol": 1e-6, "ftol": 1e-13},
        )
    else:
        raise ValueError(f"solver must be 'newton' or 'lbfgs', not {solver!r}")
    params = found.x
    return params[:n_rows].copy(), params[n_rows:].copy()


def rasch_estimates(grades: np.ndarray, scored: np.ndarray, **kwargs: float) -> np.ndarray:
    """PromptEval's estimate per condition (row): the mean over questions of the observed grade where the cell was
    scored and the fitted ``sigmoid(theta + beta)`` where it was not. ``kwargs`` go to ``fit_rasch`` (``l2``). With
    every cell scored this is the dense mean exactly (no fit is run)."""
    grades = np.asarray(grades, dtype=float)
    scored = np.asarray(scored, dtype=bool)
    if scored.all():
        return grades.mean(axis=1)
    theta, beta = fit_rasch(grades, scored, **kwargs)
    filled = np.where(scored, grades, expit(theta[:, None] + beta[None, :]))
    return filled.mean(axis=1)
