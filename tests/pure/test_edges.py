"""Every statistic at its edges against a brute-force oracle written here: ties, all-equal outcomes, rates of 0 and 1,
two dates, one item (issue 23). The stores are small and random, so ties are the rule, not the exception; each oracle
is the definition computed by loops, never the product's vectorised code."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from dateeval.results.bands import bands
from dateeval.results.chance import chance
from dateeval.results import descriptive, inference, variation

ENTRIES = ["a", "b", "c", "d"]


def _stores(n_stores: int = 60, seed: int = 7):
    """Random (dates x entries) accuracy tables from few items (1-3), so ties, 0 and 1 are common; two dates included."""
    rng = np.random.default_rng(seed)
    for index in range(n_stores):
        n_dates, n_entries, n_items = int(rng.integers(2, 7)), int(rng.integers(2, 5)), int(rng.integers(1, 4))
        if index % 5 == 0:  # all-equal outcomes: every entry the same on every date
            counts = np.full((n_dates, n_entries), int(rng.integers(0, n_items + 1)))
        else:
            counts = rng.integers(0, n_items + 1, (n_dates, n_entries))
        yield counts / n_items


def _metrics(table: np.ndarray) -> pd.DataFrame:
    rows = [
        dict(
            entry=ENTRIES[e],
            dataset="d",
            factor="date",
            date_mode="date",
            date=f"2024-01-{d + 1:02d}",
            accuracy=float(table[d, e]),
        )
        for d in range(table.shape[0])
        for e in range(table.shape[1])
    ]
    return pd.DataFrame(rows)


def _tau_b(x: list[float], y: list[float]) -> float:
    """Kendall tau-b by its definition: (concordant - discordant) / sqrt((pairs - ties in x)(pairs - ties in y))."""
    concordant = discordant = ties_x = ties_y = pairs = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        pairs += 1
        dx, dy = x[i] - x[j], y[i] - y[j]
        ties_x += dx == 0
        ties_y += dy == 0
        concordant += dx * dy > 0
        discordant += dx * dy < 0
    denominator = (pairs - ties_x) * (pairs - ties_y)
    return (concordant - discordant) / math.sqrt(denominator) if denominator else float("nan")


def _same_order(x: list[float], y: list[float]) -> bool:
    """Every pair of entries compares the same way (<, =, >) on both dates."""
    return all(
        (x[i] > x[j]) == (y[i] > y[j]) and (x[i] == x[j]) == (y[i] == y[j])
        for i, j in itertools.combinations(range(len(x)), 2)
    )


def test_kendall_tau_and_the_reorder_share_equal_their_definitions_on_tied_stores():
    seen_undefined = seen_tied_same = 0
    for table in _stores():
        taus = descriptive.kendall_taus(_metrics(table), "d")
        assert len(taus) == math.comb(table.shape[0], 2)
        expected_defined = expected_reordered = 0
        for row, (i, j) in zip(taus.itertuples(), itertools.combinations(range(table.shape[0]), 2)):
            x, y = list(table[i]), list(table[j])
            tau = _tau_b(x, y)
            defined = not math.isnan(tau)
            assert row.defined == defined
            if defined:
                assert row.tau == pytest.approx(tau, abs=1e-12)
                assert row.tau == pytest.approx(scipy_stats.kendalltau(x, y).statistic, abs=1e-12)
                assert row.same_order == _same_order(x, y)
                assert (row.tau == 1.0) == row.same_order  # exactly 1, never 0.9999999999999998
                expected_defined += 1
                expected_reordered += not _same_order(x, y)
                seen_tied_same += row.same_order and len(set(x)) < len(x)
            else:
                assert math.isnan(row.tau) and not row.same_order
                seen_undefined += 1
        found = descriptive.reordering(taus)
        assert (found["n_defined"], found["n_reordered"], found["n_undefined"]) == (
            expected_defined,
            expected_reordered,
            len(taus) - expected_defined,
        )
        if expected_defined:
            assert found["share"] == expected_reordered / expected_defined
        else:
            assert math.isnan(found["share"])
    assert seen_undefined and seen_tied_same  # the edges were exercised


def test_top_k_keeps_ties_as_ties():
    for table in _stores(seed=11):
        metrics = _metrics(table)
        for k in range(1, table.shape[1] + 1):
            tops = []
            for values in table:
                rank = {ENTRIES[e]: 1 + sum(other > value for other in values) for e, value in enumerate(values)}
                tops.append({(entry, r) for entry, r in rank.items() if r <= k})
            expected = np.mean([a != b for a, b in zip(tops, tops[1:])])
            assert descriptive.top_k_reorders(metrics, "d", k) == pytest.approx(expected)
    tied_then_alone = _metrics(np.array([[0.5, 0.5, 0.5], [0.6, 0.5, 0.5]]))
    assert (
        descriptive.top_k_reorders(tied_then_alone, "d", 1) == 1.0
    )  # three tied first, then "a" alone: a different top 1


def test_identical_orderings_never_count_as_reordered():
    """The issue's two-date case: the same order on both dates is 0 reordered pairs and tau exactly 1."""
    same = _metrics(np.array([[0.25, 0.5, 0.75], [0.3, 0.55, 0.8]]))
    found = descriptive.reordering(descriptive.kendall_taus(same, "d"))
    assert found == {"n_pairs": 1, "n_defined": 1, "n_undefined": 0, "n_reordered": 0, "share": 0.0, "mean_tau": 1.0}
    every_tied = _metrics(np.array([[0.5, 0.5], [0.5, 0.5], [0.25, 0.75]]))
    found = descriptive.reordering(descriptive.kendall_taus(every_tied, "d"))
    assert (found["n_undefined"], found["n_defined"]) == (3, 0) and math.isnan(found["share"])
    assert "No date pair has a defined order" in descriptive.reordering_words(found)


def _cochran_by_loops(correct: np.ndarray) -> float:
    k, n = correct.shape  # dates x items
    column = [sum(correct[d, i] for i in range(n)) for d in range(k)]
    row = [sum(correct[d, i] for d in range(k)) for i in range(n)]
    total = sum(column)
    denominator = k * total - sum(r * r for r in row)
    return 0.0 if denominator == 0 else (k - 1) * (k * sum(c * c for c in column) - total**2) / denominator


def _matrices(n: int = 40, seed: int = 3):
    """Small dates x items right/wrong matrices: two dates, one item, all right, all wrong among them."""
    rng = np.random.default_rng(seed)
    yield np.ones((2, 1)), np.zeros((3, 1)), np.ones((2, 4)), np.zeros((4, 3)), np.array([[1.0], [0.0]])
    for _ in range(n):
        n_dates, n_items = int(rng.integers(2, 5)), int(rng.integers(1, 5))
        yield (rng.random((n_dates, n_items)) < rng.choice([0.0, 0.2, 0.5, 1.0])).astype(float)


def test_cochran_q_equals_its_definition():
    for group in _matrices():
        for correct in group if isinstance(group, tuple) else (group,):
            found = chance.cochran_q(correct)
            assert found["q"] == pytest.approx(_cochran_by_loops(correct), abs=1e-9)
            assert found["df"] == correct.shape[0] - 1
            assert 0 <= found["p_value"] <= 1


def _exact_null_p(correct: np.ndarray, statistic=lambda m: np.ptp(m.mean(1))) -> float:
    """The exact permutation p-value of a statistic of the dates x items matrix (default: max - min per-date accuracy):
    every item's column in every order, enumerated."""
    observed = statistic(correct)
    columns = [sorted(set(itertools.permutations(correct[:, i]))) for i in range(correct.shape[1])]
    hits = total = 0
    for choice in itertools.product(*columns):
        total += 1
        hits += statistic(np.array(choice).T) >= observed - 1e-9
    return hits / total


def test_the_null_band_p_value_agrees_with_exact_enumeration():
    """Monte-Carlo p (with its +1 correction) within 4 standard errors of the exact permutation p, on tiny matrices."""
    cases = [
        np.array([[1.0, 0, 1], [0, 0, 1]]),
        np.array([[1.0, 1, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0]]),
        np.ones((2, 3)),
        np.array([[1.0], [0.0]]),
        np.array([[1.0, 0], [0, 1], [0, 0]]),
    ]
    n_perm = 4000
    for correct in cases:
        exact = _exact_null_p(correct)
        found = chance.against(float(np.ptp(correct.mean(1))), chance.null_draws(correct, n_perm, seed=1))["p_value"]
        assert abs(found - exact) <= 4 * math.sqrt(exact * (1 - exact) / n_perm) + 2 / n_perm, (correct, found, exact)
        exact_q = _exact_null_p(correct, lambda m: _cochran_by_loops(m))  # Cochran's Q as a permutation statistic
        _, draws, observed, _ = chance.null_tests(correct, n_perm, seed=1)
        found_q = chance.permutation_p(observed, draws)
        assert abs(found_q - exact_q) <= 4 * math.sqrt(exact_q * (1 - exact_q) / n_perm) + 2 / n_perm, (
            correct,
            found_q,
            exact_q,
        )


def _clopper_pearson_by_search(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The exact interval by its definition, inverting the binomial tails by bisection (no beta quantiles)."""

    def solve(tail, target: float) -> float:
        low, high = 0.0, 1.0
        for _ in range(80):
            middle = (low + high) / 2
            low, high = (middle, high) if tail(middle) < target else (low, middle)
        return (low + high) / 2

    lower = 0.0 if k == 0 else solve(lambda p: scipy_stats.binom.sf(k - 1, n, p), alpha / 2)  # P(X >= k) rises with p
    upper = 1.0 if k == n else solve(lambda p: -scipy_stats.binom.cdf(k, n, p), -alpha / 2)  # P(X <= k) falls with p
    return lower, upper


@pytest.mark.parametrize("n", [1, 2, 10, 16, 50])
def test_per_date_rate_bands_are_exact_and_never_zero_width(n):
    right = np.arange(n + 1)
    low, high = bands.clopper_pearson(right, n)
    for k in right:
        expected = _clopper_pearson_by_search(int(k), n)
        assert low[k] == pytest.approx(expected[0], abs=1e-9) and high[k] == pytest.approx(expected[1], abs=1e-9)
        assert low[k] <= k / n <= high[k] and high[k] - low[k] > 0
    correct = (np.arange(n)[None, :] < right[:, None]).astype(float)  # date d has d right
    band = bands.date_band(
        "e", list(pd.date_range("2024-01-01", periods=n + 1)), correct, np.full(correct.shape, 0.5), "accuracy"
    )
    assert np.allclose(band["low"], low) and np.allclose(band["high"], high)


def test_table_5s_ece_cv_is_the_cv_of_the_plug_in_ece_as_the_paper_computes_it():
    """Brute force: each level's plug-in ECE by hand (10 equal-width bins, |accuracy - confidence| weighted by the
    bin's share), their sample standard deviation over their mean. A well-calibrated level (whose debiased ECE is
    floored at 0) does not make the CV swing, and generated answers (no confidence) have none."""
    rng = np.random.default_rng(3)
    confidence = rng.uniform(0.2, 1.0, (5, 60))
    correct = (rng.random((5, 60)) < confidence ** np.array([[1.0], [0.7], [0.5], [1.0], [0.8]])).astype(float)

    def plug_in(c: np.ndarray, y: np.ndarray) -> float:
        bins = np.clip(np.ceil(c * 10).astype(int) - 1, 0, 9)  # bin m holds ((m-1)/10, m/10] (App. C.1)
        return sum(
            abs(y[bins == b].mean() - c[bins == b].mean()) * (bins == b).mean() for b in range(10) if (bins == b).any()
        )

    by_hand = [plug_in(c, y) for c, y in zip(confidence, correct)]
    found = variation.bootstrap_cv(correct, confidence)
    assert found["ece_cv"] == pytest.approx(np.std(by_hand, ddof=1) / np.mean(by_hand), rel=1e-9)
    assert "ece_cv_low" not in found and "ece_cv_high" not in found  # no interval whose coverage is unmeasured
    assert math.isnan(variation.bootstrap_cv(correct, np.full(correct.shape, np.nan))["ece_cv"])


def test_a_cv_near_zero_is_said_to_be_not_meaningful_and_its_interval_is_the_noise_free_ones():
    """One right answer on one of four dates: the measured CV is 200% of counting noise (GSM8K's 233.5% with a zero-width
    "[233.55, 233.55]"), flagged; the interval shown is the noise-free CV's, never zero-wide. On 200 questions with no
    level effect the measured CV is all noise: the noise-free estimate is below it and the interval starts at 0."""
    from dateeval.metrics import cv_text

    correct = np.zeros((4, 16))
    correct[0, 3] = 1
    found = variation.bootstrap_cv(correct, np.full(correct.shape, np.nan))
    assert (
        found["accuracy_cv"] == pytest.approx(variation.cv(correct.mean(1)))
        and found["accuracy_cv"] > 1
        and not found["accuracy_cv_meaningful"]
    )
    assert (
        0 <= found["accuracy_cv_low"] <= found["accuracy_cv_noise_free"] <= found["accuracy_cv_high"]
        and found["accuracy_cv_low"] < found["accuracy_cv_high"]
    )
    shown = cv_text(
        found["accuracy_cv"],
        found["accuracy_cv_low"],
        found["accuracy_cv_high"],
        False,
        found["accuracy_cv_noise_free"],
    )
    assert shown.startswith("200.00% (without counting noise ") and shown.endswith(" (not meaningful: mean near 0)")
    rng = np.random.default_rng(0)
    typical = variation.bootstrap_cv((rng.random((6, 200)) < 0.5).astype(float), np.full((6, 200), np.nan))
    assert typical["accuracy_cv_meaningful"] and typical["accuracy_cv_low"] == 0 < typical["accuracy_cv_high"]
    assert typical["accuracy_cv_noise_free"] < typical["accuracy_cv"]
    assert cv_text(0.0123, 0.01, 0.02) == "1.23% [1.00%, 2.00%]"
    assert cv_text(0.0123, 0.0, 0.02, True, 0.005) == "1.23% (without counting noise 0.50% [0.00%, 2.00%])"


def test_the_noise_free_cv_and_its_interval_equal_their_definitions():
    """The estimate is the ANOVA's level variance by loops; each end of the interval is the noncentrality at which the
    noncentral F puts 97.5% (low) or 2.5% (high, continuity-corrected) below the observed F; ties included."""
    from scipy import stats as scipy_stats

    from tests.oracles import two_way_anova

    seen = 0
    for group in _matrices(60, seed=11):
        for correct in group if isinstance(group, tuple) else (group,):
            levels, items = correct.shape
            estimate, low, high = variation.noise_free_cv(correct)
            if levels < 2 or items < 2 or correct.mean() == 0:
                assert math.isnan(estimate) and math.isnan(low) and math.isnan(high)
                continue
            anova = two_way_anova(correct.tolist())
            mean = sum(map(sum, correct.tolist())) / correct.size
            assert estimate**2 == pytest.approx(
                max(0.0, (anova["ms_date"] - anova["ms_residual"]) / items) / mean**2, abs=1e-12
            )  # squared: sqrt magnifies rounding
            if anova["ms_residual"] <= 1e-12:
                assert math.isnan(low) and math.isnan(high)
                continue
            seen += 1
            d1, d2, ms_res = levels - 1, (levels - 1) * (items - 1), anova["ms_residual"]

            def noncentrality(cv: float) -> float:  # the interval's map, inverted
                return cv**2 * mean**2 * items * d1 / ms_res

            f = anova["ms_date"] / ms_res
            if low > 0:
                assert scipy_stats.ncf.cdf(f, d1, d2, noncentrality(low)) == pytest.approx(0.975, abs=1e-6)
            else:
                assert scipy_stats.f.cdf(f, d1, d2) <= 0.975
            f_widened = (
                anova["ms_date"] + 0.5 * (1 - 1 / levels) / (items * d1)
            ) / ms_res  # half of one answer's step in the SS
            if high * mean == pytest.approx(variation.largest_sd(levels), abs=1e-12):
                continue  # the upper end cut at the largest SD rates in [0, 1] can have
            if scipy_stats.f.cdf(f_widened, d1, d2) <= 0.025:  # the inversion's upper end would be 0: a null's median
                f_widened = scipy_stats.f.ppf(0.5, d1, d2)
            assert scipy_stats.ncf.cdf(f_widened, d1, d2, noncentrality(high)) == pytest.approx(0.025, abs=1e-6)
    assert seen >= 20


def test_each_metric_shows_a_difference_at_its_own_resolution():
    """A share of 20 questions moves in 5 pp steps (whole points); ECE does not: 0.04 pp is not '0 pp', 24.65 not '25'."""
    from dateeval.metrics import METRICS

    assert METRICS["accuracy"].delta(0.15, 20) == "15 pp" and METRICS["accuracy"].delta(0.0123, 5000) == "1.23 pp"
    assert METRICS["ece"].delta(0.0004, 20) == "0.04 pp" and METRICS["ece"].delta(0.2465, 20) == "24.65 pp"
    assert METRICS["bleu"].delta(2.84, 20) == "2.84"


def test_the_date_budget_agrees_with_every_subset_of_dates():
    """The date budget's sampled shares against the exact share over every m-subset of the dates (within 4 SE), on
    tied and all-equal accuracies; all-equal and two dates give the exact answer (1.0)."""
    rng = np.random.default_rng(5)
    cases = [
        np.round(rng.random(7) * 4) / 4,
        np.array([0.5, 0.5, 0.5, 0.25, 0.75, 0.5]),
        np.full(6, 0.3),
        np.array([0.2, 0.4]),
    ]
    for accuracy in cases:
        full_delta, full_cv = np.ptp(accuracy), float(variation.cv(accuracy))
        sizes = tuple(m for m in (2, 3, 4) if m <= len(accuracy))
        found = inference.date_budget(accuracy, sizes=sizes, n_draws=4000, seed=1).set_index("dates")
        for m in sizes:
            subsets = [accuracy[list(pick)] for pick in itertools.combinations(range(len(accuracy)), m)]
            within = np.mean([abs(np.ptp(s) - full_delta) <= 0.2 * full_delta for s in subsets]) if full_delta else 1.0
            cv_within = np.mean([abs(variation.cv(s) - full_cv) <= 0.2 * full_cv for s in subsets]) if full_cv else 1.0
            for expected, column in ((within, "delta_within"), (cv_within, "cv_within")):
                assert abs(found.loc[m, column] - expected) <= 4 * math.sqrt(expected * (1 - expected) / 4000) + 1e-9, (
                    accuracy,
                    m,
                    column,
                )
