"""The date effect against chance for a sparse entry (issue 46 §2, ``results.sparse_chance``): the shuffles against a
brute-force enumeration, the dense test where every cell is drawn, and the test's size and power with known truth."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dateeval.results.chance import chance, sparse_chance
from dateeval.results.sparse.estimated import Sample


def _sample(values: np.ndarray, inclusion: np.ndarray, exact: np.ndarray) -> Sample:
    n_dates, n_items = values.shape
    keys = [f"d{i}" for i in range(n_dates)]
    predictor = (
        np.nan_to_num(np.nanmean(np.where(exact[:, None], values, np.nan), 0)) if exact.any() else np.zeros(n_items)
    )
    return Sample(keys, keys, [f"q{i}" for i in range(n_items)], values, inclusion, predictor, exact)


def _statistic(values: np.ndarray, exact: np.ndarray) -> float:
    """The statistic from its definition, with loops: Cochran's Q for an incomplete grid over the drawn dates."""
    free = np.isfinite(values) & ~exact[:, None]
    total = 0.0
    for date in range(len(values)):
        right = expected = spread = 0.0
        for item in range(values.shape[1]):
            column = values[free[:, item], item]
            share = column.mean() if len(column) else 0.0
            if free[date, item] and 0 < share < 1:
                right, expected, spread = right + values[date, item], expected + share, spread + share * (1 - share)
        total += (right - expected) ** 2 / spread if spread > 0 else 0.0
    return total


def test_the_shuffles_match_every_arrangement():
    """The brute-force oracle: every arrangement of each question's drawn grades over its drawn dates (equally likely
    under the null), the exact p-value of the observed statistic; the shuffles' p-value within 4 Monte-Carlo SE."""
    nan = np.nan
    values = np.array(
        [[1, 0, 1, 1], [1, 1, 0, 1], [0, nan, 1, 0], [1, 0, nan, 1], [nan, 0, 0, 1], [1, 1, 0, nan]], dtype=float
    )
    exact = np.array([True, False, False, False, False, False])
    inclusion = np.where(exact[:, None], 1.0, np.array([0.9, 0.6, 0.5, 0.8]))
    sample = _sample(values, inclusion, exact)
    observed = _statistic(values, exact)
    free = np.isfinite(values) & ~exact[:, None]
    per_item = []
    for item in range(values.shape[1]):
        rows = np.flatnonzero(free[:, item])
        per_item.append([(rows, order) for order in set(itertools.permutations(values[rows, item]))])
    statistics = []
    for choice in itertools.product(*per_item):
        arranged = values.copy()
        for item, (rows, order) in enumerate(choice):
            arranged[rows, item] = order
        statistics.append(_statistic(arranged, exact))
    exact_p = np.mean(np.array(statistics) >= observed - 1e-9)
    found = sparse_chance.shuffles(sample, 20_000, seed=1)
    assert found.statistic == pytest.approx(observed)
    shuffled_p = np.mean(found.null >= found.statistic - 1e-9)
    assert abs(shuffled_p - exact_p) <= 4 * np.sqrt(exact_p * (1 - exact_p) / 20_000) + 1e-3, (shuffled_p, exact_p)


def test_each_shuffle_s_estimates_are_what_the_readers_give_its_grades():
    """With the cross-fitted predictor (each cell's from the other dates and a prior), every shuffle's per-date values
    are the difference estimates of one arrangement of each question's drawn grades, recomputed from scratch (the
    predictor re-fitted on the arranged grid): checked against every arrangement."""
    from dateeval.results.sparse.estimated import cross_fitted, difference_estimates

    nan = np.nan
    values = np.array([[1, 0, 1], [0, nan, 1], [1, 0, nan], [nan, 1, 0], [1, 1, 0]], dtype=float)
    exact = np.array([True, False, False, False, False])
    inclusion = np.where(exact[:, None], 1.0, np.array([0.9, 0.6, 0.5]))
    prior = np.array([1.0, 0.0, 1.0])
    keys = [f"d{i}" for i in range(5)]
    sample = Sample(keys, keys, ["a", "b", "c"], values, inclusion, cross_fitted(values, prior, 1.0), exact, None, 1.0)
    free = np.isfinite(values) & ~exact[:, None]
    per_item = []
    for item in range(3):
        rows = np.flatnonzero(free[:, item])
        per_item.append([(rows, order) for order in set(itertools.permutations(values[rows, item]))])
    arranged_estimates = []
    for choice in itertools.product(*per_item):
        arranged = values.copy()
        for item, (rows, order) in enumerate(choice):
            arranged[rows, item] = order
        predictor = cross_fitted(arranged, prior, 1.0)
        arranged_estimates.append(difference_estimates(arranged, inclusion, predictor).value)
    found = sparse_chance.shuffles(sample, 500, seed=3)
    assert np.allclose(found.observed, difference_estimates(values, inclusion, sample.predictor).value)
    for row in found.shuffled:
        assert min(np.abs(row - estimate).max() for estimate in arranged_estimates) < 1e-12


def test_with_every_cell_drawn_it_is_cochrans_q_by_permutation():
    """π = 1 on every date and none kept fixed: the statistic is Cochran's Q (up to a constant), so both tests
    estimate one exact p-value."""
    correct = (np.random.default_rng(5).random((12, 40)) < 0.5).astype(float)
    correct[:6, :10] = 1  # a date effect on 10 questions
    sample = _sample(correct, np.ones(correct.shape), np.zeros(12, dtype=bool))
    found = sparse_chance.shuffles(sample, 4000, seed=2)
    dense = chance.significance("e", "d", correct, 4000).cochran_permutation_p
    assert chance.permutation_p(found.statistic - 1e-9, found.null) == pytest.approx(dense, abs=0.01)


def test_a_sample_where_nothing_varies_is_within_chance():
    values = np.ones((5, 4))
    values[1:, 0] = np.nan
    row = sparse_chance.significance(
        "e", "d", _sample(values, np.full((5, 4), 0.5), np.eye(5, 1, dtype=bool)[:, 0]), 50
    )
    assert row.delta == 0 and not row.exceeds_chance and row.cochran_permutation_p == pytest.approx(1.0)


@pytest.mark.parametrize(
    "n_items,n_dates,budget,planted",
    [
        (10, 12, 0.5, {}),
        (300, 40, 0.2, {"rate": 0.03}),
        (300, 40, 0.2, {"rate": 0.97}),
        (300, 40, 0.2, {"movers": 0.5}),
        (300, 120, 0.1, {"movers": 0.05}),
    ],
)
def test_the_sparse_verdict_holds_its_size(sparse_study, n_items, n_dates, budget, planted):
    """No date effect (each question's grades exchangeable across dates): rejections at 0.05 at most 0.05 + 2 SE."""
    found = sparse_study.verdict_study(n_items, n_dates, budget, 200, planted, n_perm=100)
    assert found["sparse"] <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 200), found


def test_the_sparse_verdict_finds_a_planted_effect(sparse_study):
    """A planted date effect: the drawn cells alone (one date, the pilot, is scored in full) find
    it more often than not at a fifth of the dense grid's cost (measured: 0.51 against the dense grid's 1.00)."""
    found = sparse_study.verdict_study(300, 40, 0.2, 200, {"date_effect": 0.3}, n_perm=100)
    assert found["sparse"] > 0.4, found


def test_bonferroni_joins_tests_whatever_their_dependence():
    """The store's verdict with sparse entries: the smallest p-value times their number, at most 1; ties, one test,
    none."""
    assert chance.bonferroni([0.01, 0.2, 0.01]) == pytest.approx(0.03)
    assert chance.bonferroni([0.6, 0.9]) == 1.0
    assert chance.bonferroni([0.04]) == 0.04
    assert chance.bonferroni([]) == 1.0


@pytest.mark.parametrize("planted", [{}, {"rate": 0.03}])
def test_the_stores_verdict_with_sparse_entries_holds_its_size(sparse_study, planted):
    """Two sparse and two dense twins under the null: the verdict rejects at most 0.05 + 2 SE of 200 stores."""
    assert sparse_study.family_study(300, 40, 0.2, 200, planted) <= 0.05 + 2 * (0.0475 / 200) ** 0.5


def test_the_stores_verdict_over_many_entries_holds_its_size(sparse_study):
    """Twenty sparse entries and four dense twins of 10 questions (21 tests joined): at most 0.05 + 2 SE of 200 stores."""
    assert sparse_study.family_study(10, 12, 0.5, 200, {}, entries=(20, 4)) <= 0.05 + 2 * (0.0475 / 200) ** 0.5


def test_the_stores_verdict_with_sparse_entries_finds_a_planted_effect(sparse_study):
    assert sparse_study.family_study(300, 40, 0.2, 40, {"date_effect": 0.3}) >= 0.9


def test_the_stores_verdict_over_many_sparse_entries_finds_a_planted_effect(sparse_study):
    """Twenty sparse entries and four dense twins with an effect (21 tests joined by Bonferroni, each at 0.05 / 21
    = 0.0024): a sparse entry's p-value can go below its 200 shuffles' floor of 0.005, so the verdict still finds it."""
    assert sparse_study.family_study(300, 40, 0.2, 10, {"date_effect": 0.3}, entries=(20, 4)) >= 0.7
