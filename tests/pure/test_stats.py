"""Statistics against hand-computed or scipy values on small synthetic data with known answers."""

import numpy as np
import oracles
import pandas as pd
import pytest
from oracles import condition_metrics
from scipy import stats as scipy_stats

from dateeval import stats
from dateeval.metrics.calibration import ece, ece_rows
from dateeval.results.bands import bands
from dateeval.results.chance import chance
from dateeval.results import inference, variation


def test_cv_is_sample_std_over_mean():
    assert variation.cv(np.array([0.5, 0.6, 0.7])) == pytest.approx(0.1 / 0.6)


def test_cochran_q_hand_computed():
    # items x dates: [[1,1,0],[1,0,0],[1,1,1],[0,1,0]] -> C=[3,3,1], N=7, sum R^2=15: Q = 2*(3*19-49)/(21-15) = 8/3
    correct = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 0]]).T
    result = chance.cochran_q(correct)
    assert result["q"] == pytest.approx(8 / 3) and result["df"] == 2
    assert result["p_value"] == pytest.approx(np.exp(-4 / 3))  # chi2 with 2 df: sf(q) = exp(-q/2)
    assert chance.cochran_q(np.ones((3, 5)))["p_value"] == 1.0


def test_batched_ece_matches_the_reference():
    rng = np.random.default_rng(3)
    confidence, correct = rng.uniform(0.3, 1, (4, 50)), (rng.uniform(0, 1, (4, 50)) < 0.6).astype(float)
    assert ece_rows(confidence, correct) == pytest.approx([ece(c, y) for c, y in zip(confidence, correct)])


@pytest.mark.parametrize(
    "confidence,correct",
    [
        ([0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.9, 1.0], [0, 0, 1, 1, 0, 1, 1, 1]),  # ties and bin edges (k / 10)
        ([0.0, 0.05, 0.1, 0.95, 1.0, 1.0], [0, 0, 0, 1, 1, 1]),  # bins at rate 0 and 1: no counting noise to remove
        ([0.55, 0.6, 0.55, 0.58], [1, 0, 0, 1]),  # one bin at rate 0.5, a gap smaller than its noise: floored at 0
        ([0.7], [0]),  # one item: its gap, nothing to debias
        ([0.7], [1]),
    ],
)
def test_debiased_ece_equals_its_definition_by_loops(confidence, correct):
    """Every entry point of the printed ECE against the definition as loops with E|X| integrated numerically."""
    expected = oracles.debiased_ece_by_loops(confidence, correct)
    confidence, correct = np.array(confidence), np.array(correct, dtype=float)
    assert ece(confidence, correct) == pytest.approx(expected, abs=1e-9)
    assert ece_rows(confidence[None, :], correct[None, :])[0] == pytest.approx(expected, abs=1e-9)
    assert stats.ece(confidence, correct).value == pytest.approx(expected, abs=1e-9)


def test_debiased_ece_of_one_item_is_its_gap_and_the_plug_in_is_never_below():
    assert ece(np.array([0.7]), np.array([0.0])) == pytest.approx(0.7)
    rng = np.random.default_rng(5)
    confidence, correct = rng.uniform(0, 1, (50, 30)), (rng.uniform(0, 1, (50, 30)) < 0.5).astype(float)
    assert (ece_rows(confidence, correct) <= ece_rows(confidence, correct, debiased=False) + 1e-12).all()


def test_the_ece_interval_holds_the_estimate_and_none_is_given_below_fifty_questions():
    rng = np.random.default_rng(2)
    confidence = rng.beta(5, 2, (3, 60))
    correct = (rng.random(confidence.shape) < confidence**1.5).astype(float)
    low, high = bands.ece_interval(confidence, correct)
    assert (
        (low <= ece_rows(confidence, correct)) & (ece_rows(confidence, correct, debiased=False) <= high)
    ).all() and (low >= 0).all()
    assert np.isnan(bands.ece_interval(confidence[:, :49], correct[:, :49])).all()
    assert np.isnan(stats.ece(confidence[0, :49], correct[0, :49]).low)


def _synthetic(n_dates=60, n_items=300, effect=0.0, seed=0) -> np.ndarray:
    """dates x items outcomes; each item has its own skill; ``effect`` lifts the first third of dates."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.2, 0.9, n_items)
    lift = np.where(np.arange(n_dates) < n_dates // 3, effect, 0.0)[:, None]
    return (rng.uniform(0, 1, (n_dates, n_items)) < np.clip(skill + lift, 0, 1)).astype(float)


def test_null_band_separates_no_effect_from_a_planted_effect():
    none = oracles.null_band(_synthetic(effect=0.0), n_perm=300)
    assert none["delta"] <= none["null_upper"] and none["p_value"] > 0.05
    planted = oracles.null_band(_synthetic(effect=0.15), n_perm=300)
    assert planted["delta"] > planted["null_upper"] and planted["p_value"] < 0.01
    q_none, q_planted = chance.cochran_q(_synthetic(effect=0.0)), chance.cochran_q(_synthetic(effect=0.15))
    assert q_none["p_value"] > 0.05 and q_planted["p_value"] < 1e-6


def test_null_band_draws_are_those_of_fresh_arrays_per_date():
    """The permutation draws are pinned: reused buffers and float32 counts give what the plain loop gives, bit for bit."""
    correct = _synthetic(n_dates=30, n_items=200) > 0.5
    right = correct.sum(0)
    remaining = np.broadcast_to(
        right[(right > 0) & (right < 30)].astype(np.int32), (40, int(((right > 0) & (right < 30)).sum()))
    ).copy()
    expected, rng = np.empty((40, 30), dtype=np.int64), np.random.default_rng(7)
    for date in range(30):
        taken = rng.random(remaining.shape, dtype=np.float32) * (30 - date) < remaining
        remaining -= taken
        expected[:, date] = taken.sum(1)
    np.testing.assert_array_equal(chance._shuffled_counts(correct, 40, np.random.default_rng(7)), expected)


def test_deterministic_items_give_a_zero_band():
    constant = np.tile((np.arange(40) % 2).astype(float), (10, 1))  # every date identical
    band = oracles.null_band(constant, n_perm=50)
    assert band["delta"] == 0 and band["null_upper"] == 0


def test_same_direction_and_correlations_against_scipy():
    a = np.array([0.50, 0.55, 0.45, 0.60, 0.52])
    b = np.array([0.40, 0.42, 0.38, 0.47, 0.41])
    assert inference.same_direction(a, b) == pytest.approx(1.0)
    dates = pd.date_range("2024-01-01", periods=5).strftime("%Y-%m-%d")
    metrics = pd.DataFrame(
        [
            {"entry": e, "dataset": d, "factor": "date", "date": day, "accuracy": v}
            for e, d, values in (("m1", "x", a), ("m1", "y", b), ("m2", "x", b[::-1]))
            for day, v in zip(dates, values)
        ]
    )
    table = inference.cross_correlations(metrics)
    pair = table[(table["a"] == "m1 / x") & (table["b"] == "m1 / y")].iloc[0]
    assert pair["comparison"] == "same model, two datasets" and pair["pearson"] == pytest.approx(
        scipy_stats.pearsonr(a, b).statistic
    )
    assert set(table["comparison"]) == {"same model, two datasets", "two models, same dataset"}
    trend = inference.date_trend(metrics)
    row = trend[(trend["entry"] == "m1") & (trend["dataset"] == "x")].iloc[0]
    assert row["spearman"] == pytest.approx(scipy_stats.spearmanr(range(5), a).statistic)


def test_date_budget_converges_to_the_full_year():
    accuracy = _synthetic(n_dates=366, n_items=200, effect=0.05).mean(1)
    table = inference.date_budget(accuracy, sizes=(7, 120, 366), n_draws=100)
    full = table.set_index("dates").loc[366]
    assert full["delta_within"] == 1.0 and full["cv_within"] == 1.0 and full["delta_ratio"] == pytest.approx(1.0)
    small = table.set_index("dates").loc[7]
    assert small["delta_ratio"] < 1.0  # a few dates underestimate the spread of the year


def _rows(
    correct: np.ndarray, factor: str, conditions: list[str], date: str = "2024-01-01", dtype="float32"
) -> list[dict]:
    rows = []
    for name, outcomes in zip(conditions, correct):
        for i, c in enumerate(outcomes):
            rows.append(
                {
                    "model": "m",
                    "dtype": dtype,
                    "device": "cpu",
                    "hardware": "x86",
                    "model_key": dtype,
                    "dataset": "d",
                    "task_key": "t",
                    "condition": name,
                    "condition_key": f"{dtype}-{name}",
                    "factor": factor,
                    "date_mode": "date",
                    "date": name if factor == "date" else date,
                    "item_id": f"i{i}",
                    "correct": bool(c),
                    "confidence": 0.7,
                    "pred": int(c),
                    "answer": 1,
                }
            )
    return rows


def test_factor_table_uses_the_base_condition_and_same_items():
    dates = [f"2024-01-0{d}" for d in range(1, 6)]
    by_date = _synthetic(n_dates=5, n_items=40, seed=1)
    by_batch = _synthetic(n_dates=2, n_items=40, seed=2)
    frame = pd.DataFrame(
        _rows(by_date, "date", dates)
        + _rows(by_batch, "batch_size", ["b1", "b8"])
        + _rows(by_date, "date", dates, dtype="bfloat16")
    )
    table = oracles.factor_table(frame).set_index(["entry", "factor"])
    date_row = table.loc[("m (float32, cpu)", "date")]
    assert date_row["levels"] == 5 and date_row["accuracy_cv"] == pytest.approx(variation.cv(by_date.mean(1)))
    assert date_row["accuracy_cv_low"] <= date_row["accuracy_cv_noise_free"] <= date_row["accuracy_cv_high"]
    batch = table.loc[("m (float32, cpu)", "batch_size")]
    assert batch["levels"] == 3  # two batch sizes plus the base condition on 2024-01-01
    expected = variation.cv(np.vstack([by_batch, by_date[:1]]).mean(1))
    assert batch["accuracy_cv"] == pytest.approx(expected)
    precision = table.loc[("m (cpu)", "precision")]
    assert precision["levels"] == 2 and precision["accuracy_cv"] == 0.0  # identical outcomes in both dtypes


def test_run_to_run_and_significance_tables():
    frame = pd.DataFrame(_rows(_synthetic(n_dates=6, n_items=30), "date", [f"2024-01-0{d}" for d in range(1, 7)]))
    repeat = frame[frame["condition"] == "2024-01-01"].assign(
        factor="repeat", condition="2024-01-01,repeat=1", condition_key="r1"
    )
    frame = pd.concat([frame, repeat], ignore_index=True)
    determinism = inference.run_to_run(frame).iloc[0]
    assert determinism["runs"] == 2 and determinism["accuracy_cv"] == 0 and determinism["prediction_changes"] == 0
    significance = oracles.date_significance(frame, n_perm=100).iloc[0]
    assert significance["n_dates"] == 6 and 0 < significance["p_value"] <= 1
    metrics = condition_metrics(frame)
    assert set(metrics["factor"]) == {"date", "repeat"}


def test_hardware_factor_and_gpu_entry_labels():
    from dateeval.results.descriptive import entry_label

    outcomes = _synthetic(n_dates=2, n_items=30, seed=4)
    rows = []
    for gpu, correct in zip(("NVIDIA A100", "NVIDIA A40"), outcomes):
        for row in _rows(correct[None], "date", ["2024-01-01"]):
            rows.append({**row, "device": "cuda", "hardware": gpu, "model_key": "same"})
    frame = pd.DataFrame(rows)
    assert set(entry_label(frame)) == {"m (float32, cuda: NVIDIA A100)", "m (float32, cuda: NVIDIA A40)"}
    table = oracles.factor_table(frame)
    hardware = table[table["factor"] == "hardware"].iloc[0]
    assert hardware["levels"] == 2 and hardware["accuracy_cv"] == pytest.approx(variation.cv(outcomes.mean(1)))


def test_largest_of_k_equals_a_plain_loop():
    draws = [chance.null_draws(_synthetic(12, 20, seed=seed), 200) for seed in range(5)]
    deltas = [0.1, 0.25, 0.15, 0.2, 0.05]
    assert chance.largest_of(deltas, draws) == pytest.approx(oracles.largest_of(deltas, draws))


def test_the_headline_test_holds_its_level_where_picking_the_largest_does_not():
    """With K = 7 entries and no date effect, testing the largest delta against its own entry's band calls it beyond
    chance far more often than 5%; testing it against the null of the largest of 7 does not."""
    naive = family = 0
    for trial in range(60):
        rows = [chance.significance("e", "d", _synthetic(12, 30, seed=100 * trial + entry), 100) for entry in range(7)]
        top = max(rows, key=lambda row: row.delta)
        naive += top.p_value < 0.05
        family += chance.largest_of([row.delta for row in rows], [row.null_draws for row in rows])["p_value"] < 0.05
    assert family <= 6 and naive >= 10, (naive, family)  # measured: 12 vs 3 of 60


def test_the_verdict_holds_its_level_where_the_smallest_of_k_does_not():
    """The verdict over K = 7 null entries: the smallest entry's own permutation p below 5% far more often than 5%;
    the family-wise p-value (min-p over the entries' Cochran's Q, joint shuffles) not."""
    naive = family = 0
    for trial in range(60):
        matrices = [_synthetic(12, 30, seed=100 * trial + entry) for entry in range(7)]
        naive += min(chance.significance("e", "d", m, 100).cochran_permutation_p for m in matrices) < 0.05
        family += chance.date_effect_family([[m] for m in matrices], n_perm=100, seed=trial) < 0.05
    assert family <= 6 and naive >= 10, (naive, family)


@pytest.mark.parametrize("case", ["ties", "zero_and_one_rates", "two_dates", "one_item", "two_groups"])
def test_the_verdict_equals_the_exact_permutation_p_by_brute_force(case):
    """Against every joint permutation of tiny tables: tied entries (one model twice), an entry right (or wrong) on
    every question beside a varying one, two dates, one question (Cochran's Q is the same on every arrangement: p = 1),
    and two sets shuffled independently. The Monte-Carlo p is within 4 standard errors of the exact one."""
    a = np.array([[1, 1, 1], [0, 0, 1], [0, 1, 0]])  # 3 dates x 3 questions
    b = np.array([[1, 1, 0, 1], [0, 0, 0, 1]])  # 2 dates x 4 questions
    groups = {
        "ties": [[a, a.copy(), 1 - a]],
        "zero_and_one_rates": [[a, np.ones_like(a), np.zeros_like(a)]],
        "two_dates": [[b, np.array([[1, 0, 0, 0], [0, 1, 1, 0]])]],
        "one_item": [[np.array([[1], [0], [0]]), np.array([[0], [1], [1]])]],
        "two_groups": [[b], [a]],
    }[case]
    exact = oracles.exact_family_p(groups)
    found = chance.date_effect_family(groups, n_perm=4000, seed=1)
    assert abs(found - exact) <= 4 * np.sqrt(exact * (1 - exact) / 4000) + 1 / 4001, (found, exact)
    if case == "one_item":
        assert found == 1.0


def test_joint_shuffles_keep_the_entries_dependence():
    """Entries that answer alike stay alike in every joint shuffle (their per-date counts are equal draw by draw), each
    question keeps its right answers, and an entry's counts are those of permuting each question's dates."""
    correct = _synthetic(12, 30, seed=5)
    counts = chance.joint_shuffled_counts(np.stack([correct, correct]), 50, np.random.default_rng(0))
    np.testing.assert_array_equal(counts[0], counts[1])
    right = correct.sum(0)
    moving = (right > 0) & (right < 12)
    assert (counts[0].sum(1) == right[moving].sum()).all()
    assert chance.date_effect_family([[correct, correct]], n_perm=200) == chance.date_effect_family(
        [[correct]], n_perm=200
    )


def test_the_verdict_can_reject_with_fifty_entries():
    """The old min-p could not go below (1 + K) / (B + 1) with K entries: with 50 entries and one strong date effect the
    verdict rejects, at its smallest value 1 / (B + 1)."""
    matrices = [_synthetic(12, 30, seed=entry) for entry in range(49)] + [
        _synthetic(12, 60, effect=0.5, seed=99)[:, :30]
    ]
    assert chance.date_effect_family([[m] for m in matrices], n_perm=200) == pytest.approx(1 / 201)


def test_corpus_band_is_the_log_jackknife_t_of_the_segments_in_a_loop():
    """BLEU's per-date interval: each leave-one-segment-out corpus score from the other segments' statistics (a loop),
    their jackknife SE on the log scale, score x exp(-+ t_{n-1} SE); a date with a leave-one-out BLEU of 0 gets none."""
    from dateeval.metrics.corpus import score_from_stats, segment_stats

    hypotheses = [
        [
            "the cat sat on the mat",
            "a dog barks loudly at night",
            "it rains today in the city",
            "we go home now after work",
        ],
        ["the cat is on the mat", "a dog barked at night", "it rained today in town", "we go home after work"],
    ]
    references = [
        "the cat sat on the mat",
        "the dog barks loudly at night",
        "it is raining today in the city",
        "we go home now after work",
    ]
    stats = np.array([segment_stats(day, references)["bleu"] for day in hypotheses])  # dates x segments x statistics
    band = bands.corpus_band("e", ["2024-01-01", "2024-01-02"], stats, "bleu")
    for day, row in enumerate(band.itertuples()):
        segments = [np.array(s) for s in stats[day]]
        full = score_from_stats("bleu", [sum(segments)])
        left = [score_from_stats("bleu", [sum(x for j, x in enumerate(segments) if j != i)]) for i in range(4)]
        if min(left) <= 0:
            assert np.isnan(row.low) and np.isnan(row.high)
            continue
        logs = np.log(left)
        se = np.sqrt(3 / 4 * np.sum((logs - logs.mean()) ** 2))
        t = scipy_stats.t.ppf(0.975, 3)
        assert (row.low, row.high) == pytest.approx((full * np.exp(-t * se), min(100, full * np.exp(t * se))))
        assert row.low < full < row.high


def test_the_reorder_share_of_arrays_equals_the_kendall_tau_count():
    """``descriptive.reorder_share`` (the chance draws' share) is ``reordering(kendall_taus(...))``'s share on the same scores."""
    from dateeval.results import descriptive

    rng = np.random.default_rng(4)
    scores = rng.integers(0, 6, (9, 4)) / 5
    metrics = pd.DataFrame(
        [
            {
                "entry": f"m{e}",
                "dataset": "d",
                "factor": "date",
                "date": f"2024-01-{d + 1:02d}",
                "accuracy": scores[d, e],
            }
            for d in range(9)
            for e in range(4)
        ]
    )
    assert descriptive.reorder_share(scores) == descriptive.reordering(descriptive.kendall_taus(metrics, "d"))["share"]


def test_reorder_chance_equals_every_joint_permutation_on_a_tiny_table():
    """Two models, three dates, two questions: the chance share is the mean share over all (3!)^2 joint arrangements of
    the questions' dates (Monte-Carlo within 4 SE), and a share at or above every arrangement's has p near 1 / (B + 1)."""
    from itertools import permutations, product

    from dateeval.results import descriptive

    group = np.array([[[1, 0], [0, 1], [1, 1]], [[0, 1], [1, 1], [0, 0]]])  # entries x dates x questions
    shares = []
    for orders in product(list(permutations(range(3))), repeat=2):
        counts = np.stack(
            [np.stack([entry[list(order), q] for q, order in enumerate(orders)], 1).sum(1) for entry in group], 1
        )
        shares.append(descriptive.reorder_share(counts))
    shares = np.array(shares)
    found = chance.reorder_chance(group, observed=1.0, n_perm=1500)
    finite = shares[np.isfinite(shares)]
    assert abs(found["chance"] - finite.mean()) <= 4 * finite.std() / np.sqrt(1500) + 1e-12, (found, finite.mean())
    assert found["p_value"] == pytest.approx(np.mean(finite >= 1.0), abs=0.03)


def test_a_planted_reordering_is_beyond_chance_and_a_fixed_order_is_not():
    """With 400 questions, models 15 points apart keep their order under shuffles (chance share near 0); a date effect
    that swaps them on 2 of 12 dates reorders 20 of 66 date pairs, far above chance."""
    from dateeval.results import descriptive

    rng = np.random.default_rng(5)
    skill = rng.uniform(0.2, 0.8, 400)
    fixed = np.stack([(rng.random((12, 400)) < np.clip(skill + lift, 0, 1)) for lift in (0.0, 0.15)])
    none = chance.reorder_chance(fixed, observed=descriptive.reorder_share(fixed.sum(2).T))
    assert none["chance"] < 0.05 and none["p_value"] == 1.0
    lift = np.where(np.arange(12)[:, None] < 2, -0.15, 0.15)
    swapped = np.stack([rng.random((12, 400)) < skill, rng.random((12, 400)) < np.clip(skill + lift, 0, 1)])
    observed = descriptive.reorder_share(swapped.sum(2).T)
    found = chance.reorder_chance(swapped, observed)
    assert observed == pytest.approx(20 / 66) and found["chance"] < 0.05 and found["p_value"] < 0.01, (observed, found)
