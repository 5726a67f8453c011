"""The date-robust score of a sparse sweep (issue 46 §2): oracles over every sample of small grids, the dense interval
when every cell is scored, and coverage of the population score with known truth (bench/sparse_coverage.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dateeval import stats
from dateeval.results.sparse import estimated
from dateeval.results.robust import robust
from dateeval.results import variation

GRIDS = {
    "mixed": (np.random.default_rng(0).random((5, 30)) < 0.6).astype(float),
    "all right": np.ones((4, 6)),
    "all wrong": np.zeros((4, 6)),
    "ties": np.tile([[1.0, 0.0, 1.0]], (3, 2)),
    "two dates, two items": np.array([[1.0, 0.0], [1.0, 1.0]]),
    "one right answer": np.eye(1, 12 * 8).reshape(12, 8),
}


@pytest.mark.parametrize("name", GRIDS)
def test_with_every_cell_scored_it_is_the_dense_interval(name):
    """π = 1 everywhere: no sample error, and the estimated mean squares are the grid's own, so the interval is
    ``date_robust``'s whatever the predictor."""
    grid = GRIDS[name]
    predictor = np.random.default_rng(1).random(grid.shape[1])
    assert estimated.sparse_robust(grid, np.ones(grid.shape), predictor) == pytest.approx(
        robust.date_robust(grid), rel=1e-12, abs=1e-12
    )
    assert stats.sparse_robust_score(grid, 1.0 + 0 * predictor, predictor) == pytest.approx(
        stats.robust_score(grid), abs=1e-12
    )


def _every_sample(grid: np.ndarray, pi: np.ndarray):
    """Every Poisson sample of the grid's cells with its probability."""
    for mask in itertools.product([False, True], repeat=grid.size):
        drawn = np.array(mask).reshape(grid.shape)
        yield np.where(drawn, grid, np.nan), float(np.prod(np.where(drawn, pi, 1 - pi)))


@pytest.mark.parametrize(
    "grid",
    [np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]), np.ones((2, 3))],
    ids=["2x3", "3x2", "all right"],
)
def test_the_mean_squares_and_score_are_unbiased_over_every_sample(grid):
    """The brute-force oracle: the probability-weighted mean over all 2^cells samples of the estimated mean squares
    (before the floor at 0) and of the score is the dense grid's, exactly; a date scored in full stays exact."""
    rng = np.random.default_rng(2)
    pi = rng.uniform(0.2, 0.9, grid.shape)
    pi[0] = 1.0  # a pilot date
    predictor = rng.random(grid.shape[1])
    squares, score, total = np.zeros(3), 0.0, 0.0
    for values, weight in _every_sample(grid, pi):
        if np.isnan(values[0]).any():
            assert weight == 0
            continue
        squares += weight * np.array(estimated.unbiased_squares(values, pi, predictor))
        score += weight * estimated.difference_estimates(values, pi, predictor).value.mean()
        total += weight
    assert total == pytest.approx(1.0)
    assert squares == pytest.approx(np.array(variation.mean_squares(grid)), abs=1e-12)
    assert score == pytest.approx(grid.mean(), abs=1e-12)


def test_the_sample_widens_the_interval_and_keeps_it_in_zero_one():
    """Fewer cells, a wider interval; near 0 the interval stays in [0, 1] and holds the estimate."""
    grid = (np.random.default_rng(3).random((20, 100)) < 0.03).astype(float)
    predictor = grid[:3].mean(0)
    dense = estimated.sparse_robust(grid, np.ones(grid.shape), predictor)
    pi = np.full(grid.shape, 0.3)
    pi[:3] = 1
    drawn = np.where(np.random.default_rng(4).random(grid.shape) < pi, grid, np.nan)
    score, low, high, _ = estimated.sparse_robust(drawn, pi, predictor)
    assert high - low > dense[2] - dense[1]
    assert 0 <= low <= score <= high <= 1


def test_bad_samples_get_one_clear_error():
    grid = np.ones((3, 4))
    with pytest.raises(stats.UsageError, match="two or more"):
        stats.sparse_robust_score(grid[:1], np.ones(4), np.ones(4))
    with pytest.raises(stats.UsageError, match="0/1 grades"):
        stats.sparse_robust_score(grid * 0.5, np.ones(4), np.ones(4))
    with pytest.raises(stats.UsageError, match="inclusion"):
        stats.sparse_robust_score(grid, np.zeros(4), np.ones(4))


@pytest.mark.parametrize(
    "n_items,n_dates,budget,planted",
    [
        (10, 12, 0.5, {}),
        (20, 12, 0.5, {"rate": 0.05}),
        (300, 40, 0.2, {"rate": 0.03}),
        (300, 40, 0.2, {"rate": 0.97}),
        (300, 40, 0.2, {"movers": 0.5}),
        (50, 40, 0.2, {"date_effect": 0.3}),
        (300, 40, 0.2, {"movers": 0.02, "hidden": 0.2}),
    ],
)
def test_the_sparse_robust_interval_covers_the_population_score(sparse_study, n_items, n_dates, budget, planted):
    """Known truth: the date-marginal score of the population a planted flip structure draws its questions and dates
    from; a new store and a new draw of the design per repetition. Coverage at least 0.95 - 2 SE."""
    found = sparse_study.robust_study(n_items, n_dates, budget, 300, planted)
    assert found["coverage"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 300), found


def test_the_robust_check_has_teeth(sparse_study):
    """The same check fails an interval that counts only the sample's error (the dense grid taken as the truth)."""
    found = sparse_study.robust_study(300, 40, 0.2, 300, {}, design_only=True)
    assert found["coverage"] < 0.8, found


def _twin_samples(seed: int, shared: bool) -> tuple:
    """Two entries' samples of one 2 x 3 grid design: A's and B's grades, probabilities and predictors."""
    rng = np.random.default_rng(seed)
    grid_a = (rng.random((2, 3)) < 0.5).astype(float)
    grid_b = np.where(rng.random((2, 3)) < 0.3, 1 - grid_a, grid_a)
    pi_a, pi_b = rng.uniform(0.2, 0.9, (2, 3)), rng.uniform(0.2, 0.9, (2, 3))
    return grid_a, grid_b, pi_a, pi_b, rng.random(3), rng.random(3)


def _sample(values, inclusion, predictor, seed):
    keys = ["d0", "d1"]
    exact = np.zeros(2, dtype=bool)
    return estimated.Sample(keys, keys, ["a", "b", "c"], values, inclusion, predictor, exact, seed)


@pytest.mark.parametrize("shared", [True, False], ids=["one seed", "two seeds"])
def test_the_paired_difference_is_unbiased_over_every_joint_sample(shared):
    """The brute-force oracle of two sparse entries: every joint draw of a 2 x 3 grid (with one seed a cell's uniform
    is shared, so it is drawn in both, in the likelier one only, or in neither), weighted by its probability. The
    estimated mean squares of the difference average to the dense difference's, and each cell's variance estimate
    (the covariance term included) to that cell's true variance."""
    grid_a, grid_b, pi_a, pi_b, m_a, m_b = _twin_samples(7, shared)
    states = []  # per cell: (drawn in A, drawn in B, probability)
    for a_pi, b_pi in zip(pi_a.ravel(), pi_b.ravel()):
        if shared:
            low, high = sorted((a_pi, b_pi))
            states.append([(True, True, low), (a_pi > b_pi, b_pi > a_pi, high - low), (False, False, 1 - high)])
        else:
            states.append(
                [(x, y, (a_pi if x else 1 - a_pi) * (b_pi if y else 1 - b_pi)) for x in (0, 1) for y in (0, 1)]
            )
    squares, cell_mean, cell_square, variance_mean = np.zeros(3), np.zeros(6), np.zeros(6), np.zeros(6)
    for choice in itertools.product(*states):
        weight = float(np.prod([state[2] for state in choice]))
        if weight == 0:
            continue
        drawn_a = np.array([bool(state[0]) for state in choice]).reshape(2, 3)
        drawn_b = np.array([bool(state[1]) for state in choice]).reshape(2, 3)
        a = _sample(np.where(drawn_a, grid_a, np.nan), pi_a, m_a, 1)
        b = _sample(np.where(drawn_b, grid_b, np.nan), pi_b, m_b, 1 if shared else 2)
        difference, variance = estimated.difference_cells(a, b)
        squares += weight * np.array(estimated.squares_of(difference, variance))
        cell_mean += weight * difference.ravel()
        cell_square += weight * difference.ravel() ** 2
        variance_mean += weight * variance.ravel()
    assert cell_mean == pytest.approx((grid_a - grid_b).ravel(), abs=1e-12)
    assert variance_mean == pytest.approx(cell_square - cell_mean**2, abs=1e-12)
    assert squares == pytest.approx(np.array(variation.mean_squares(grid_a - grid_b)), abs=1e-12)


def test_with_every_cell_scored_the_paired_difference_is_the_dense_one():
    grid_a = (np.random.default_rng(8).random((6, 30)) < 0.6).astype(float)
    grid_b = (np.random.default_rng(9).random((6, 30)) < 0.4).astype(float)
    dates, items = [f"d{i}" for i in range(6)], [f"q{i}" for i in range(30)]
    found = estimated.paired_difference(
        estimated.dense_sample(dates, items, grid_a), estimated.dense_sample(dates, items, grid_b)
    )
    assert found == pytest.approx(robust.paired_difference(grid_a, grid_b), abs=1e-12)


@pytest.mark.parametrize(
    "n_items,n_dates,budget,pair,planted",
    [
        (300, 40, 0.2, "twins", {}),
        (300, 40, 0.2, "twins, two seeds", {}),
        (300, 40, 0.2, "twins, B dense", {}),
        (300, 40, 0.2, "apart", {}),
        (10, 12, 0.5, "twins", {}),
        (300, 40, 0.2, "twins", {"rate": 0.03}),
        (300, 40, 0.2, "twins", {"date_effect": 0.3}),
    ],
)
def test_the_sparse_paired_difference_covers_the_population_difference(
    sparse_study, n_items, n_dates, budget, pair, planted
):
    """Two entries with known truth (twins: one model's questions, their dates drawn anew; apart: independent
    questions at other rates), each swept by the design; coverage at least 0.95 - 2 SE."""
    found = sparse_study.compare_study(n_items, n_dates, budget, 300, pair, planted)
    assert found["coverage"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 300), found


@pytest.mark.parametrize("name", GRIDS)
def test_with_every_cell_scored_the_spread_is_the_dense_one(name):
    """π = 1 everywhere: the date effect's SD and its interval are the dense grid's (``stats.date_spread``), NaN
    bounds included (all right, all wrong, ties: no question changes)."""
    grid = GRIDS[name]
    predictor = np.random.default_rng(5).random(grid.shape[1])
    sparse = stats.sparse_date_spread(grid, np.ones(grid.shape[1]), predictor)
    assert sparse == pytest.approx(stats.date_spread(grid), rel=1e-9, abs=1e-12, nan_ok=True)


def test_the_spread_and_its_interval_equal_their_definitions():
    """By loops: each date's difference estimate and its own Horvitz-Thompson variance; the estimate is the unbiased
    date component's root; at the interval's ends the noncentral F with Satterthwaite's degrees of freedom puts 97.5%
    and 2.5% below the observed F (dates' estimates against counting noise plus the sample's)."""
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(6)
    grid = (rng.random((8, 30)) < 0.4).astype(float)
    grid[::2, :10], grid[1::2, :10] = 1.0, 0.0  # a date effect
    pi = rng.uniform(0.3, 1.0, grid.shape[1])
    pi = np.tile(pi, (8, 1))
    pi[:2] = 1.0  # pilot dates
    predictor = grid[:2].mean(0)
    values = np.where(rng.random(grid.shape) < pi, grid, np.nan)
    estimate, low, high = stats.sparse_date_spread(values, pi, predictor)
    dates, items = grid.shape
    value, own, drawn_uncertain = [], [], 0
    for d in range(dates):
        total, variance = 0.0, 0.0
        for i in range(items):
            r = 0.0 if np.isnan(values[d, i]) else values[d, i] - predictor[i]
            total += predictor[i] + r / pi[d, i]
            variance += (1 - pi[d, i]) * r**2 / pi[d, i] ** 2
            drawn_uncertain += (not np.isnan(values[d, i])) and pi[d, i] < 1
        value.append(total / items)
        own.append(variance / items**2)
    ms_item, ms_date, ms_residual = estimated.unbiased_squares(values, pi, predictor)
    assert estimate**2 == pytest.approx(max(0.0, (ms_date - ms_residual) / items), abs=1e-12)
    mean = sum(value) / dates
    ms_level = items * sum((v - mean) ** 2 for v in value) / (dates - 1)
    design = sum(own) / dates * items
    noise = ms_residual + design
    d1 = dates - 1
    d2 = noise**2 / (ms_residual**2 / (d1 * (items - 1)) + design**2 / (drawn_uncertain - (dates - 2)))
    f = ms_level / noise
    assert low > 0
    assert scipy_stats.ncf.cdf(f, d1, d2, low**2 * items * d1 / noise) == pytest.approx(0.975, abs=1e-6)
    step = 1 / max(pi[d, i] for d in range(dates) for i in range(items) if pi[d, i] < 1 and not np.isnan(values[d, i]))
    widened = (ms_level + 0.5 * (1 - 1 / dates) * step**2 / (items * d1)) / noise
    assert scipy_stats.ncf.cdf(widened, d1, d2, high**2 * items * d1 / noise) == pytest.approx(0.025, abs=1e-6)


def test_nothing_moved_in_the_sample_still_gives_an_upper_end():
    """No drawn cell differs from its predictor: the sample cannot rule out a change it did not draw, so the upper end
    comes from the pooled variance's prior and one drawn answer's step, wider the fewer cells were drawn (a dense grid
    with no change has no interval: its SD is 0 for certain)."""
    grid = np.tile((np.arange(40) % 3 == 0).astype(float), (10, 1))
    highs = []
    for share in (0.1, 0.3):
        pi = np.full(grid.shape, share)
        pi[:3] = 1.0
        values = np.where(np.random.default_rng(7).random(grid.shape) < pi, grid, np.nan)
        estimate, low, high = stats.sparse_date_spread(values, pi, grid[:3].mean(0))
        assert estimate == low == 0 < high < 1
        highs.append(high)
    assert highs[0] > highs[1]
    assert np.isnan(stats.date_spread(grid).high)


@pytest.mark.parametrize(
    "n_items,n_dates,budget,planted",
    [
        (10, 12, 0.5, {}),
        (20, 12, 0.5, {"date_effect": 0.3}),
        (50, 40, 0.2, {"date_effect": 0.3}),
        (300, 40, 0.2, {"rate": 0.03, "date_effect": 0.3}),
        (300, 40, 0.2, {"rate": 0.97, "date_effect": 0.3}),
        (300, 40, 0.2, {"movers": 0.02, "hidden": 0.2}),
    ],
)
def test_the_sparse_spread_interval_covers_the_true_sd(sparse_study, n_items, n_dates, budget, planted):
    """Known truth: the SD of the dates' expected rates on the store's questions (0 without a planted effect); a new
    store and draw per repetition. Coverage at least 0.95 - 2 SE; leaving the sample's noise out must fail."""
    found = sparse_study.spread_study(n_items, n_dates, budget, 300, planted)
    assert found["coverage"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 300), found
    if n_items >= 50:
        assert found["ignored"] < 0.8, found


def test_the_date_sd_interval_never_leaves_the_range_rates_can_take():
    """Issue 62 §3, oracle by enumeration: over every 0/1 grid of 2-3 dates and 2-3 questions, no end of the date SD's
    interval exceeds the largest SD (ddof 1, as the date component) the dates' rates in [0, 1] can have, found by
    trying every vector of rates on the grid's steps; ``[[1, 0], [0, 1]]`` gave 1.53 (the largest is 0.707)."""
    for n_dates, n_items in itertools.product((2, 3), (2, 3)):
        rates = np.array(list(itertools.product(np.linspace(0, 1, n_items + 1), repeat=n_dates)))
        largest = float(np.std(rates, axis=1, ddof=1).max())
        assert variation.largest_sd(n_dates) == pytest.approx(largest, abs=1e-12)
        for cells in itertools.product((0.0, 1.0), repeat=n_dates * n_items):
            found = stats.date_spread(np.reshape(cells, (n_dates, n_items)))
            assert all(not value > largest + 1e-12 for value in found), (cells, found)
    assert stats.date_spread([[1, 0], [0, 1]]).high == pytest.approx(0.5**0.5, abs=1e-12)


def test_a_sample_never_gives_an_interval_that_looks_certain():
    """Issue 62 §3: ``sparse_date_spread`` gave (0, 0, 0) in 4 of 200 draws where 20-28 drawn cells moved, and with no
    cell drawn at all: the sample cannot rule out a change it did not see, so the upper end is never 0 (at least the
    one a typical null outcome gives), in any of 200 draws, and with no cell drawn."""
    rng = np.random.default_rng(62)
    grid = (rng.random((21, 40)) < 0.5).astype(float)
    grid[3:, :8] = rng.random((18, 8)) < 0.5  # 8 questions move with the date
    pi = np.full(grid.shape, 0.15)
    pi[[0, 10, 20]] = 1.0  # pilot dates
    predictor = grid[[0, 10, 20]].mean(0)
    for _ in range(200):
        values = np.where(rng.random(grid.shape) < pi, grid, np.nan)
        estimate, low, high = stats.sparse_date_spread(values, pi, predictor)
        assert low <= estimate <= high and high > 0.005, (estimate, low, high)
    nothing = np.where(pi == 1, grid, np.nan)
    estimate, low, high = stats.sparse_date_spread(nothing, pi, predictor)
    assert high > 0.05, (estimate, low, high)
