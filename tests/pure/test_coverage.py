"""A reduced grid of the coverage study (``bench/coverage.py``, ``docs/coverage.md``): it fails when an interval the
pages print covers less than nominal - 3 Monte-Carlo standard errors, or a test rejects a true null more often than
0.05 + 3 standard errors. The study calls the functions the pages call."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def study():
    return bench_module("coverage")


@pytest.mark.parametrize("n_items,rate", [(10, 0.02), (10, 0.1), (10, 0.3), (20, 0.02), (50, 0.1)])
def test_per_date_bands_cover_at_ten_questions_and_near_zero(study, n_items, rate):
    found = study.band_coverage(n_items, rate, reps=150)
    assert found["coverage"] >= 0.95 - 3 * study.se(0.95, 150 * 12), found


def test_the_study_can_fail_the_percentile_bootstrap_it_replaced(study):
    """The baseline the band replaced falls far short at 10 questions and 2% (0.17 measured): the check has teeth."""
    assert study.band_coverage(10, 0.02, reps=100)["percentile_bootstrap"] < 0.5


@pytest.mark.parametrize("scenario", ["item-dominated", "interaction-heavy"])
def test_the_date_robust_interval_covers_from_twenty_questions(study, scenario):
    found = study.robust_coverage(20, 12, 0.3, scenario, reps=120)
    assert found["printed"] >= 0.95 - 3 * study.se(0.95, 120), found


@pytest.mark.parametrize("n_items,rate", [(10, 0.02), (20, 0.98), (20, 0.05)])
def test_the_date_robust_interval_covers_at_rates_near_zero_and_one(study, n_items, rate):
    """The risky cells (issue 35): 10-20 questions x 366 dates, skewed question difficulty, a rate near 0 or 1, where
    Korn-Graubard alone covered 0.78-0.89; the printed interval (plus-two questions) covers at nominal - 3 SE."""
    found = study.robust_coverage(n_items, 366, rate, "item-dominated", reps=150)
    assert found["printed"] >= 0.95 - 3 * study.se(0.95, 150), found


@pytest.mark.parametrize("n_items,n_dates", [(20, 12), (50, 2)])
def test_the_verdicts_tests_hold_their_size(study, n_items, n_dates):
    found = study.test_rejections(n_items, n_dates, 0.3, 0.0, reps=150)
    limit = 0.05 + 3 * study.se(0.05, 150)
    for test in ("delta_permutation", "cochran_q_chi2", "cochran_q_permutation", "leaves_chance_band"):
        assert found[test] <= limit, (test, found)


def test_the_headlines_family_wise_tests_hold_their_size(study):
    found = study.family_rejections(20, 12, 6, 0.0, reps=150)
    limit = 0.05 + 3 * study.se(0.05, 150)
    assert found["verdict"] <= limit and found["largest_delta_of_k"] <= limit, found


@pytest.mark.parametrize("k", [20, 50])
def test_the_verdict_holds_its_size_with_many_entries(study, k):
    """The risky cells: the min-p it replaced rejected 0.11-0.12 of null stores at 20 entries (every rejection at
    p = 1/201); the verdict over joint shuffles stays within 0.05 + 3 SE at 20 and 50 entries."""
    found = study.family_rejections(50, 12, k, 0.0, reps=150, n_perm=100, with_delta=False)
    assert found["verdict"] <= 0.05 + 3 * study.se(0.05, 150), found


def test_the_verdict_finds_an_effect_at_fifty_entries_as_often_as_bonferroni(study):
    """With 50 entries and a 10 pp date effect in all of them, the verdict rejects at least as often as Cochran's Q per
    entry with a Bonferroni correction (less 2 SE of their difference): joint shuffles keep the entries' dependence."""
    found = study.family_rejections(50, 12, 50, 0.1, reps=60, planted="all", n_perm=100, with_delta=False)
    assert found["verdict"] >= found["bonferroni_q_chi2"] - 2 * study.se(0.5, 60) and found["verdict"] > 0.2, found


@pytest.mark.parametrize("n_items,n_dates,effect", [(10, 12, 0.02), (20, 3, 0.1), (50, 2, 0.02)])
def test_table5s_cv_interval_covers_the_noise_free_cv_where_the_bootstrap_did_not(study, n_items, n_dates, effect):
    """The measured CV's bootstrap covered a 2 pp date effect's CV 0% of the time at 12 dates (counting noise); the
    noise-free CV's interval covers it at nominal - 3 SE from 10 questions and 2 levels up."""
    found = study.cv_coverage(n_items, n_dates, effect, reps=120)
    assert found["coverage"] >= 0.95 - 3 * study.se(0.95, 120), found
    if n_dates == 12:
        assert found["measured_cv_bootstrap"] < 0.5, found


def test_the_bleu_band_covers_from_ten_segments(study):
    """The percentile bootstrap covered 0.85 at 10 segments; the log-scale jackknife-t covers at nominal - 3 SE."""
    found = study.bleu_band_coverage(10, reps=100)
    assert found["coverage"] >= 0.95 - 3 * study.se(0.95, 300) and found["printed"] == 1.0, found


@pytest.mark.parametrize("accuracy", [0.1, 0.9])
def test_the_ece_band_covers_a_calibrated_model_from_fifty_questions(study, accuracy):
    """The risky cells (issue 35): a calibrated model (true ECE 0, where every estimate sits above it) at accuracy 0.1
    or 0.9 on 50 questions. The percentile bootstrap covered 0.50 here; the same bounds without redrawn grades 0.89-0.91."""
    found = study.ece_band_coverage(50, accuracy, "calibrated", reps=100)
    assert found["printed"] and found["coverage"] >= 0.95 - 3 * study.se(0.95, 300), found


def test_the_ece_band_covers_an_overconfident_model_and_the_debiased_ece_is_nearer_the_truth(study):
    found = study.ece_band_coverage(50, 0.5, "overconfident", reps=60)
    assert found["coverage"] >= 0.95 - 3 * study.se(0.95, 180), found
    assert abs(found["debiased_error"]) < abs(found["plug_in_error"]) / 2, found


def test_table8s_ece_delta_interval_covers_a_delta_against_a_calibrated_date(study):
    """The bootstrap of the two debiased ECEs' difference covered 0.49-0.83 here (the calibrated date's ECE at its floor)."""
    found = study.ece_delta_coverage(200, 0.5, ("overconfident", "calibrated"), reps=100)
    assert found["coverage"] >= 0.95 - 3 * study.se(0.95, 100), found


@pytest.mark.parametrize(
    "accuracy,confidence,n_items", [(0.97, 0.99, 100), (0.98, 1.0, 200), (0.03, 0.01, 100), (0.95, 0.99, 50)]
)
def test_the_ece_band_near_accuracy_zero_and_one_covers_where_printed(study, accuracy, confidence, n_items):
    """Issue 47 section 3: one confidence for every question at accuracy near 0 or 1 (covered 0.58-0.80 before)."""
    found = study.ece_constant_coverage(n_items, accuracy, confidence, reps=300)
    assert found["coverage"] >= 0.93 - 2 * study.se(0.93, 300 * (1 - found["no_interval"])), found


@pytest.mark.parametrize(
    "rate_a,rate_b,items,dates", [(0.98, 0.02, 10, 2), (0.95, 0.05, 20, 2), (0.98, 0.5, 10, 12), (0.02, 0.05, 50, 2)]
)
def test_model_against_model_near_zero_and_one_covers_where_printed(study, rate_a, rate_b, items, dates):
    """Issue 47 section 2: zero-wide intervals pulled coverage to 0.86-0.90 at 0.95 against 0.05; they are NaN now."""
    found = study.paired_extreme_coverage(rate_a, rate_b, items, dates, reps=300)
    assert found["coverage"] >= 0.93 - 2 * study.se(0.93, 300 * (1 - found["no_interval"])), found


@pytest.mark.parametrize(
    "n_items,n_dates,budget,planted",
    [
        (10, 12, 0.5, {}),
        (300, 40, 0.2, {"rate": 0.03}),
        (300, 40, 0.2, {"rate": 0.97}),
        (300, 40, 0.2, {"movers": 0.5}),
        (50, 40, 0.2, {"date_effect": 0.3}),
    ],
)
def test_a_sparse_sweeps_per_date_intervals_cover_the_dense_values(sparse_study, n_items, n_dates, budget, planted):
    """Issue 46: planted flip structures with known truth (the dense grid), drawn by the design as ``run --budget``
    draws; the per-date interval covers the dense value on at least 0.93 of (date, draw) pairs, and its drawn share is
    the budget."""
    found = sparse_study.study(sparse_study.simulate(n_items, n_dates, seed=3, **planted), budget, 30, "sparse")
    assert found["coverage"] >= 0.93 - 2 * found["se"], found
    assert abs(found["share"] - budget) < 0.02, found


def test_the_sparse_check_has_teeth(sparse_study, monkeypatch):
    """The same check fails an interval that ignores the unseen cells: the date's own variance alone (no pooling)."""
    from dateeval.results.sparse import estimated

    entry = sparse_study.simulate(300, 40, seed=3, movers=0.02, hidden=0.3)
    monkeypatch.setattr(estimated, "_variance", estimated.own_variance)
    found = sparse_study.study(entry, 0.2, 30, "sparse")
    assert found["coverage"] < 0.93, found


def test_the_planted_check_has_teeth(sparse_study, monkeypatch):
    """The planted-effect check below fails the pooled variance without its date's excess (a date that moves
    questions on its own is then read as steady as the others)."""
    from dateeval.results.sparse import estimated

    pooled = estimated._pooled
    monkeypatch.setattr(estimated, "_variance", lambda *cells: pooled(cells[2], estimated._mean_squares(*cells)))
    entry = sparse_study.plant(sparse_study.simulate(300, 40, seed=1), 0.03, 8, seed=1)
    found = sparse_study.planted_study(entry, 0.2, 40)
    assert found["coverage"] < 0.93, found


@pytest.mark.parametrize("seed", [1, 2])
def test_a_date_effect_where_the_pilot_does_not_look_keeps_its_coverage(sparse_study, seed):
    """Issue 63: 3 points planted on 8 dates, on questions picked at random among those wrong that date (most of them
    steady behind wide margins, where the pilot puts the floor probability): at budget 0.2 the planted dates' intervals
    cover their dense values at least 0.93 of the time (less 2 SE) and their mean error stays below the effect."""
    entry = sparse_study.plant(sparse_study.simulate(300, 40, seed=seed), 0.03, 8, seed=seed)
    found = sparse_study.planted_study(entry, 0.2, 40)
    assert found["coverage"] >= 0.93 - 2 * (0.93 * 0.07 / found["n"]) ** 0.5 and found["error"] < 0.03, found


def test_a_target_width_sweep_covers_at_its_stop(sparse_study):
    """Issue 63 §4: the stop depends on the data (the intervals' widths), so its intervals are Bonferroni's over the
    pre-declared looks: replayed on a planted flip structure with known truth (the dense grid), the per-date intervals
    at the stop cover at least 0.93 of (date, draw) pairs, and every stop that says it reached the width did."""

    from dateeval import stats

    entry = sparse_study.simulate(300, 41, seed=4)
    truth = entry["correct"].mean(1)
    covered = []
    for seed in range(20):
        found = stats.sparse_replay(
            entry["correct"],
            target_width=0.05,
            seed=seed,
            margins=entry["margin"],
            baseline=entry["baseline"],
        )
        drawn = np.array(found.estimated)
        value, low, high = (np.array([getattr(e, end) for e in found.estimates]) for end in ("value", "low", "high"))
        assert found.reached and (np.maximum(value - low, high - value)[drawn] <= 0.05 + 1e-12).all()
        covered += list(((low <= truth + 1e-12) & (truth - 1e-12 <= high))[drawn])
    share = float(np.mean(covered))
    assert share >= 0.93 - 2 * (0.93 * 0.07 / len(covered)) ** 0.5, share
