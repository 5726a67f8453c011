"""The PromptEval peer (``bench/prompteval.py``, issue 63 item 1): its stratified sampler's counts, the extended Rasch
fit against a brute-force objective and finite differences, recovery of planted parameters, and the edges a sweep meets
(one condition, ties, all-0 and all-1 grids). Fast: no model."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def pe():
    return bench_module("prompteval")


def planted(seed: int, n_rows: int = 40, n_cols: int = 300, theta_sd: float = 1.0, beta_sd: float = 3.0):
    """A grid drawn from the model itself. beta_sd = 3: most questions nearly always right or wrong, as on MMLU."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, theta_sd, n_rows)
    beta = rng.normal(0.0, beta_sd, n_cols)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] + beta[None, :])))
    return theta, beta, (rng.random(p.shape) < p).astype(float)


def spread(counts: np.ndarray) -> int:
    return int(counts.max() - counts.min())


# --- the sampler ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_rows,n_cols,share", [(42, 300, 0.12), (42, 300, 0.2), (42, 300, 0.3), (41, 300, 0.97), (7, 13, 0.5), (5, 3, 1.0)]
)
def test_the_sampler_scores_exactly_n_cells_balanced_over_conditions_and_questions(pe, n_rows, n_cols, share):
    n_cells = int(round(share * n_rows * n_cols))
    for seed in range(5):
        mask = pe.balanced_cells(n_rows, n_cols, n_cells, seed)
        assert mask.shape == (n_rows, n_cols) and mask.dtype == bool
        assert int(mask.sum()) == n_cells
        rows = mask.sum(axis=1)
        assert set(rows.tolist()) <= {n_cells // n_rows, -(-n_cells // n_rows)}, rows
        assert spread(rows) <= 1 and spread(mask.sum(axis=0)) <= 1


def test_the_sampler_is_balanced_at_every_cell_count_of_a_small_grid(pe):
    """Every n_cells from 0 to the full grid (the exhaustive check the balance argument claims)."""
    for n_cells in range(6 * 11 + 1):
        mask = pe.balanced_cells(6, 11, n_cells, seed=n_cells)
        assert int(mask.sum()) == n_cells
        assert spread(mask.sum(axis=1)) <= 1 and spread(mask.sum(axis=0)) <= 1, n_cells


def test_the_sampler_is_random_by_seed_and_repeatable(pe):
    first = pe.balanced_cells(42, 300, 1500, seed=3)
    assert np.array_equal(first, pe.balanced_cells(42, 300, 1500, seed=3))
    other = pe.balanced_cells(42, 300, 1500, seed=4)
    assert not np.array_equal(first, other)
    # Not a fixed pattern: over seeds, every cell of the grid is drawn at some point, near its 1500/12600 share.
    hits = sum(pe.balanced_cells(42, 300, 1500, seed=s).astype(int) for s in range(200))
    assert hits.min() > 0
    assert abs(hits.mean() / 200 - 1500 / 12600) < 1e-12


def test_cells_marked_always_are_scored_and_count_toward_n_cells(pe):
    """A dense no-date row (always scored): it holds all 300 questions, the other 41 rows share the rest evenly, and
    the questions stay within 1 of each other (the dense row adds 1 to every question)."""
    n_rows, n_cols, n_cells = 42, 300, 2520
    always = np.zeros((n_rows, n_cols), dtype=bool)
    always[0] = True
    for seed in range(5):
        mask = pe.balanced_cells(n_rows, n_cols, n_cells, seed, always=always)
        assert int(mask.sum()) == n_cells and mask[0].all()
        others = mask[1:].sum(axis=1)
        left = n_cells - n_cols
        assert set(others.tolist()) <= {left // (n_rows - 1), -(-left // (n_rows - 1))}, others
        assert spread(mask.sum(axis=0)) <= 1


def test_rows_with_many_marked_cells_get_no_more_until_the_others_catch_up(pe):
    always = np.zeros((4, 10), dtype=bool)
    always[0, :8] = True  # row 0 already has 8
    always[1, :2] = True
    mask = pe.balanced_cells(4, 10, 20, seed=0, always=always)
    assert (mask & always).sum() == always.sum()
    assert mask.sum(axis=1).tolist() == [8, 4, 4, 4]
    assert spread(mask.sum(axis=0)) <= 1


def test_the_sampler_refuses_counts_it_cannot_meet(pe):
    with pytest.raises(ValueError):
        pe.balanced_cells(3, 4, 13, seed=0)
    with pytest.raises(ValueError):
        pe.balanced_cells(3, 4, -1, seed=0)
    with pytest.raises(ValueError):
        pe.balanced_cells(3, 4, 3, seed=0, always=np.ones((3, 4), dtype=bool))
    with pytest.raises(ValueError):
        pe.balanced_cells(3, 4, 5, seed=0, always=np.ones((4, 3), dtype=bool))


# --- the objective and its gradient --------------------------------------------------------------------------------


def brute_objective(params: np.ndarray, grades: np.ndarray, scored: np.ndarray, l2: float) -> float:
    """The penalised negative log-likelihood cell by cell, written from its definition."""
    n_rows, n_cols = scored.shape
    total = 0.0
    for i in range(n_rows):
        for j in range(n_cols):
            if scored[i, j]:
                p = 1.0 / (1.0 + np.exp(-(params[i] + params[n_rows + j])))
                total -= grades[i, j] * np.log(p) + (1.0 - grades[i, j]) * np.log(1.0 - p)
    return total + 0.5 * l2 * sum(x * x for x in params)


@pytest.mark.parametrize("l2", [0.01, 1.0])
def test_the_objective_and_its_gradient_match_a_brute_force_oracle(pe, l2):
    rng = np.random.default_rng(11)
    n_rows, n_cols = 6, 9
    grades = (rng.random((n_rows, n_cols)) < 0.6).astype(float)
    scored = rng.random((n_rows, n_cols)) < 0.5
    grades[~scored] = np.nan  # unscored cells are never read
    for _ in range(5):
        params = rng.normal(0.0, 1.5, n_rows + n_cols)
        value, grad = pe.rasch_objective(params, grades, scored, l2)
        assert value == pytest.approx(brute_objective(params, grades, scored, l2), rel=1e-12, abs=1e-12)
        h = 1e-6
        numeric = np.array(
            [
                (
                    brute_objective(params + h * e, grades, scored, l2)
                    - brute_objective(params - h * e, grades, scored, l2)
                )
                / (2 * h)
                for e in np.eye(params.size)
            ]
        )
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7)


def test_the_hessian_vector_product_matches_differences_of_the_gradient(pe):
    rng = np.random.default_rng(12)
    n_rows, n_cols = 5, 8
    grades = (rng.random((n_rows, n_cols)) < 0.5).astype(float)
    scored = rng.random((n_rows, n_cols)) < 0.6
    rows, cols = np.nonzero(scored)
    y = grades[rows, cols]
    for _ in range(5):
        params = rng.normal(0.0, 1.5, n_rows + n_cols)
        vector = rng.normal(size=params.size)
        h = 1e-6
        numeric = (
            pe.rasch_objective(params + h * vector, grades, scored, 0.01)[1]
            - pe.rasch_objective(params - h * vector, grades, scored, 0.01)[1]
        ) / (2 * h)
        exact = pe._hessp_cells(params, vector, rows, cols, y, n_rows, 0.01)
        np.testing.assert_allclose(exact, numeric, rtol=1e-6, atol=1e-7)


def test_the_fit_is_the_penalised_optimum(pe):
    """At the returned parameters the gradient vanishes and no nearby point is lower (the objective is convex)."""
    _, _, grades = planted(5, 20, 60)
    scored = pe.balanced_cells(20, 60, 300, seed=5)
    theta, beta = pe.fit_rasch(grades, scored)
    params = np.concatenate([theta, beta])
    value, grad = pe.rasch_objective(params, grades, scored)
    assert np.abs(grad).max() < 1e-5
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert pe.rasch_objective(params + 1e-3 * rng.normal(size=params.size), grades, scored)[0] >= value


@pytest.mark.parametrize("share", [0.03, 0.12, 0.3])
def test_newton_and_lbfgs_reach_the_same_optimum(pe, share):
    _, _, grades = planted(8, 42, 300)
    scored = pe.balanced_cells(42, 300, int(share * 42 * 300), seed=8)
    newton = np.concatenate(pe.fit_rasch(grades, scored, solver="newton"))
    lbfgs = np.concatenate(pe.fit_rasch(grades, scored, solver="lbfgs"))
    assert pe.rasch_objective(newton, grades, scored)[0] <= pe.rasch_objective(lbfgs, grades, scored)[0] + 1e-7
    # Estimates (shares) agree to 1e-5 even where an all-right question's beta sits in the flat tail.
    p_newton = 1.0 / (1.0 + np.exp(-(newton[:42, None] + newton[None, 42:])))
    p_lbfgs = 1.0 / (1.0 + np.exp(-(lbfgs[:42, None] + lbfgs[None, 42:])))
    assert np.abs(p_newton - p_lbfgs).max() < 1e-4
    np.testing.assert_allclose(
        pe.rasch_estimates(grades, scored, solver="newton"),
        pe.rasch_estimates(grades, scored, solver="lbfgs"),
        atol=1e-5,
    )


# --- the fit and the estimates ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_the_fit_recovers_planted_parameters_from_30_percent_of_a_40_by_300_grid(pe, seed):
    theta, beta, grades = planted(seed)
    scored = pe.balanced_cells(40, 300, int(0.3 * 40 * 300), seed)
    theta_hat, beta_hat = pe.fit_rasch(grades, scored)
    assert np.corrcoef(theta_hat, theta)[0, 1] > 0.9
    assert np.corrcoef(beta_hat, beta)[0, 1] > 0.9
    # And the estimates beat the plain mean of each row's scored cells (what imputation is for).
    dense = grades.mean(axis=1)
    plain = (grades * scored).sum(axis=1) / scored.sum(axis=1)
    rasch = pe.rasch_estimates(grades, scored)
    assert np.abs(rasch - dense).mean() < 0.85 * np.abs(plain - dense).mean()  # 0.57-0.75 measured


def test_estimates_are_observed_where_scored_and_the_fit_elsewhere(pe):
    _, _, grades = planted(2, 12, 50)
    scored = pe.balanced_cells(12, 50, 150, seed=2)
    theta, beta = pe.fit_rasch(grades, scored, l2=0.1)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] + beta[None, :])))
    expected = np.where(scored, grades, p).mean(axis=1)
    np.testing.assert_allclose(pe.rasch_estimates(grades, scored, l2=0.1), expected, rtol=0, atol=1e-12)


def test_with_every_cell_scored_the_estimates_are_the_dense_means_exactly(pe):
    _, _, grades = planted(3, 42, 300)
    everything = pe.balanced_cells(42, 300, 42 * 300, seed=0)
    assert everything.all()
    assert np.array_equal(pe.rasch_estimates(grades, everything), grades.mean(axis=1))


@pytest.mark.parametrize(
    "name,grades",
    [
        ("all wrong", np.zeros((8, 30))),
        ("all right", np.ones((8, 30))),
        ("one condition", (np.random.default_rng(0).random((1, 30)) < 0.5).astype(float)),
        ("one condition all right", np.ones((1, 30))),
        ("one question", (np.random.default_rng(1).random((8, 1)) < 0.5).astype(float)),
    ],
)
def test_degenerate_grids_give_finite_fits_and_estimates_in_range(pe, name, grades):
    n_rows, n_cols = grades.shape
    for n_cells in (0, 1, max(1, grades.size // 3), grades.size - 1):
        scored = pe.balanced_cells(n_rows, n_cols, n_cells, seed=n_cells)
        theta, beta = pe.fit_rasch(grades, scored)
        assert np.isfinite(theta).all() and np.isfinite(beta).all(), (name, n_cells)
        est = pe.rasch_estimates(grades, scored)
        assert np.isfinite(est).all() and ((est >= 0) & (est <= 1)).all(), (name, n_cells)
    if grades.min() == grades.max() and n_rows * n_cols > 1:
        # All equal: the imputed cells lean hard toward that grade.
        scored = pe.balanced_cells(n_rows, n_cols, grades.size // 3, seed=0)
        assert np.abs(pe.rasch_estimates(grades, scored) - grades[0, 0]).max() < 0.05


def test_tied_conditions_and_questions_get_equal_parameters(pe):
    """Two conditions with the same grades on the same scored cells (ties), and two identical questions: the fit
    treats each pair alike (the penalised optimum is unique), and everything stays finite."""
    rng = np.random.default_rng(4)
    grades = (rng.random((6, 20)) < 0.5).astype(float)
    scored = rng.random((6, 20)) < 0.6
    grades[1], scored[1] = grades[0], scored[0]
    grades[:, 7], scored[:, 7] = grades[:, 3], scored[:, 3]
    theta, beta = pe.fit_rasch(grades, scored)
    assert theta[0] == pytest.approx(theta[1], abs=1e-5)
    assert beta[3] == pytest.approx(beta[7], abs=1e-5)
    est = pe.rasch_estimates(grades, scored)
    assert est[0] == pytest.approx(est[1], abs=1e-9)


def test_unscored_conditions_and_questions_rest_on_the_rest(pe):
    """A condition with no scored cell gets theta 0 (the penalty's pull) and its estimate from the questions' betas."""
    _, _, grades = planted(6, 10, 40)
    scored = pe.balanced_cells(10, 40, 160, seed=6)
    scored[4] = False
    scored[:, 9] = False
    theta, beta = pe.fit_rasch(grades, scored)
    assert theta[4] == pytest.approx(0.0, abs=1e-6) and beta[9] == pytest.approx(0.0, abs=1e-6)
    assert np.isfinite(pe.rasch_estimates(grades, scored)).all()


def test_the_fit_refuses_what_it_cannot_fit(pe):
    with pytest.raises(ValueError):
        pe.fit_rasch(np.zeros((3, 4)), np.ones((3, 5), dtype=bool))
    with pytest.raises(ValueError):
        pe.fit_rasch(np.zeros((3, 4)), np.ones((3, 4), dtype=bool), l2=0.0)
    with pytest.raises(ValueError):
        pe.fit_rasch(np.zeros((3, 4)), np.eye(3, 4, dtype=bool), solver="sgd")


def test_a_42_by_300_fit_takes_well_under_a_second(pe):
    """The bench fits hundreds of seeds. The fastest of three tries per budget (a loaded machine inflates single
    timings; about 10-60 ms measured on two loaded cores)."""
    _, _, grades = planted(7, 42, 300, theta_sd=0.2)
    worst = 0.0
    for share in (0.12, 0.2, 0.3):
        scored = pe.balanced_cells(42, 300, int(share * 42 * 300), seed=7)
        tries = []
        for _ in range(3):
            start = time.perf_counter()
            pe.rasch_estimates(grades, scored)
            tries.append(time.perf_counter() - start)
        worst = max(worst, min(tries))
    assert worst < 0.3, worst
