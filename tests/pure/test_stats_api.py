"""``dateeval.stats``, the public statistics on plain arrays, against brute-force oracles (loops, root finding, every
permutation), and as the implementation the pages and the CLI print."""

import math

import numpy as np
import oracles
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as scipy_stats

from dateeval import stats
from dateeval.results.bands import bands
from dateeval.results.chance import chance
from dateeval.results.robust import robust


def _binomial_ends(right: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson by its definition: the rates at which a count this extreme has probability 2.5% on each side."""
    low = (
        0.0
        if right == 0
        else optimize.brentq(lambda p: scipy_stats.binom.sf(right - 1, n, p) - 0.025, 1e-12, 1 - 1e-12, xtol=1e-14)
    )
    high = (
        1.0
        if right == n
        else optimize.brentq(lambda p: scipy_stats.binom.cdf(right, n, p) - 0.025, 1e-12, 1 - 1e-12, xtol=1e-14)
    )
    return low, high


@pytest.mark.parametrize("right,n", [(0, 10), (10, 10), (3, 10), (0, 1), (1, 1), (1, 366), (500, 1000)])
def test_rate_interval_is_clopper_pearson_by_its_definition(right, n):
    found = stats.rate_interval(right, n)
    assert isinstance(found, stats.Estimate) and found.value == right / n
    assert (found.low, found.high) == pytest.approx(_binomial_ends(right, n), abs=1e-9)
    low, high = bands.clopper_pearson(np.array([right]), n)  # the Curves page's band: the same numbers
    assert (found.low, found.high) == (float(low[0]), float(high[0]))


def _loop_robust(matrix: np.ndarray) -> tuple[float, float, float]:
    """The date-robust score and its interval: the union of :func:`_loop_korn_graubard` of the matrix and of the matrix
    with a question right on every date and one wrong on every date added."""
    score, low, high = _loop_korn_graubard(matrix)
    _, padded_low, padded_high = _loop_korn_graubard(
        np.hstack([matrix, np.ones((len(matrix), 1)), np.zeros((len(matrix), 1))])
    )
    return score, min(low, padded_low), max(high, padded_high)


def _loop_korn_graubard(matrix: np.ndarray) -> tuple[float, float, float]:
    """The date-robust score and its Korn-Graubard interval from the loop ANOVA: effective n = p(1-p)/Var (at most
    the cells), shrunk by (z / t_df)^2 with Satterthwaite's df, then Clopper-Pearson at that n by root finding."""
    dates, items = matrix.shape
    anova = oracles.two_way_anova(matrix.tolist())
    score = float(sum(map(sum, matrix.tolist())) / (dates * items))
    variance = max(0.0, (anova["ms_date"] + anova["ms_item"] - anova["ms_residual"]) / (dates * items))
    numerator = anova["ms_date"] + anova["ms_item"] - anova["ms_residual"]
    denominator = (
        anova["ms_date"] ** 2 / (dates - 1)
        + anova["ms_item"] ** 2 / (items - 1)
        + anova["ms_residual"] ** 2 / ((items - 1) * (dates - 1))
    )
    df = max(1.0, numerator**2 / denominator) if numerator > 0 and denominator > 0 else items - 1
    effective = min(score * (1 - score) / variance, dates * items) if 0 < score < 1 and variance > 0 else items
    effective *= (scipy_stats.norm.ppf(0.975) / scipy_stats.t.ppf(0.975, df)) ** 2
    right = score * effective
    low = 0.0 if right == 0 else scipy_stats.beta.ppf(0.025, right, effective - right + 1)
    high = 1.0 if right >= effective else scipy_stats.beta.ppf(0.975, right + 1, effective - right)
    return score, float(low), float(high)


@pytest.mark.parametrize(
    "seed,dates,items,rate", [(0, 12, 20, 0.3), (1, 2, 10, 0.5), (2, 366, 10, 0.05), (3, 5, 30, 0.9)]
)
def test_robust_score_equals_the_loop_anova_and_the_printed_interval(seed, dates, items, rate):
    rng = np.random.default_rng(seed)
    matrix = (rng.random((dates, items)) < rng.uniform(0, 2 * rate, items).clip(0, 1)).astype(float)
    found = stats.robust_score(matrix)
    assert tuple(found) == pytest.approx(_loop_robust(matrix), abs=1e-9)
    row = robust.entry_statistics(matrix, n_boot=50)  # what `dateeval robust` and What to report print
    assert (row.score, row.low, row.high) == tuple(found)


def test_robust_score_does_not_jump_between_no_right_answer_and_one():
    """Issue 35: with 10 questions x 366 dates the upper end was 0.388 with no right answer and 0.0019 with one."""
    none, one = np.zeros((366, 10)), np.zeros((366, 10))
    one[0, 0] = 1
    assert stats.robust_score(none).high > 0 and stats.robust_score(none).low == 0
    assert stats.robust_score(one).low <= 1 / 3660 <= stats.robust_score(one).high
    assert stats.robust_score(one).high >= 0.5 * stats.robust_score(none).high, (
        stats.robust_score(none),
        stats.robust_score(one),
    )


def test_date_effect_test_equals_every_permutation_and_the_headlines_test():
    a = np.array([[1, 1, 1], [0, 0, 1], [0, 1, 0]])
    entries = [a, a.copy(), np.array([[0, 1, 1], [1, 0, 1], [0, 0, 0]])]
    exact = oracles.exact_family_p([entries])
    found = stats.date_effect_test(entries)
    assert abs(found - exact) <= 4 * math.sqrt(exact * (1 - exact) / chance.VERDICT_PERM) + 1 / (
        chance.VERDICT_PERM + 1
    )
    assert 0.05 < exact < 0.95 and found == chance.date_effect_family([entries], seed=0)  # the headline's function
    with pytest.raises(stats.UsageError, match="same dates and questions"):
        stats.date_effect_test([a, np.ones((3, 4))])


def test_ece_is_the_debiased_binned_gap_and_gives_no_interval_below_fifty_questions():
    rng = np.random.default_rng(0)
    confidence = rng.beta(5, 2, 49)
    correct = (rng.random(49) < confidence**1.5).astype(float)
    found = stats.ece(confidence, correct)
    assert found.value == pytest.approx(oracles.debiased_ece_by_loops(confidence.tolist(), correct.tolist()), abs=1e-9)
    assert math.isnan(found.low) and math.isnan(found.high)


def test_ece_interval_ends_are_the_brier_bound_above_and_below_the_estimate():
    """High: the plug-in (the binned gap by a loop) plus t(n-1) x the root of the Brier score over n; low: at or below
    the debiased estimate, at least 0, and above 0 for a clearly overconfident model on 1,000 questions."""
    rng = np.random.default_rng(1)
    confidence = rng.beta(5, 2, 1000)
    correct = (rng.random(1000) < confidence**1.5).astype(float)
    found = stats.ece(confidence, correct)
    bins = np.minimum(np.ceil(confidence * 10).astype(int) - 1, 9)
    plug_in = sum(abs(np.sum(correct[bins == b] - confidence[bins == b])) for b in range(10)) / 1000
    brier = sum((y - c) ** 2 for y, c in zip(correct, confidence)) / 1000
    assert found.high == pytest.approx(plug_in + scipy_stats.t.ppf(0.975, 999) * math.sqrt(brier / 1000))
    assert 0 < found.low <= found.value <= plug_in <= found.high


def test_paired_difference_is_the_question_clustered_t_interval_when_the_date_adds_nothing():
    """Both models answer each question alike on every date (no date part in the difference): the interval is the
    textbook one over the questions' mean differences, t with questions - 1 degrees of freedom."""
    rng = np.random.default_rng(2)
    a_items, b_items = (rng.random(25) < 0.6).astype(float), (rng.random(25) < 0.4).astype(float)
    a, b = np.tile(a_items, (6, 1)), np.tile(b_items, (6, 1))
    found = stats.paired_difference(a, b)
    per_question = [float(np.mean(a[:, i] - b[:, i])) for i in range(25)]
    half = scipy_stats.t.ppf(0.975, 24) * np.std(per_question, ddof=1) / math.sqrt(25)
    assert tuple(found) == pytest.approx(
        (np.mean(per_question), np.mean(per_question) - half, np.mean(per_question) + half)
    )


def test_paired_difference_covers_the_true_difference():
    """Two models on shared questions (one harder than the other by a known amount), answers varying with the date:
    the 95% interval covers the true difference of their date-robust scores in at least 0.95 - 3 SE of 300 stores."""
    rng = np.random.default_rng(3)
    hits, reps = 0, 300
    for _ in range(reps):
        skill = rng.uniform(0.1, 0.9, 30)
        a = (rng.random((8, 30)) < skill).astype(float)
        b = (rng.random((8, 30)) < np.clip(skill - 0.1, 0, 1)).astype(float)
        truth = float(np.mean(skill - np.clip(skill - 0.1, 0, 1)))  # the difference over these questions' rates
        found = stats.paired_difference(a, b)
        hits += found.low <= truth <= found.high
    assert hits / reps >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps), hits / reps


@pytest.mark.parametrize(
    "call,says",
    [
        (lambda: stats.robust_score(np.ones(5)), "dates x questions"),
        (lambda: stats.robust_score(np.full((3, 4), 0.5)), "0/1 grades"),
        (lambda: stats.paired_difference(np.ones((3, 4)), np.ones((3, 5))), "same dates"),
        (lambda: stats.rate_interval(11, 10), "0 <= right <= n"),
        (lambda: stats.ece([0.5, 0.6], [1.0]), "equal-length"),
        (lambda: stats.rate_interval(2.5, 10), "0 <= right <= n"),
        (lambda: stats.rate_interval(True, 10), "0 <= right <= n"),
        (
            lambda: stats.robust_score(np.ma.masked_array(np.ones((3, 4)), mask=np.eye(3, 4))),
            "correct is a masked array",
        ),
        (lambda: stats.robust_score([[1, 0, 1], [1, 0]]), "correct must be a rectangular array"),
        (
            lambda: stats.robust_score(pd.DataFrame([[1, pd.NA], [0, 1]], dtype=object)),
            "correct must be a rectangular array",
        ),
        (lambda: stats.robust_score([[1.0, float("nan")], [0.0, 1.0]]), "correct holds missing values"),
        (lambda: stats.paired_difference([[1, 0], [1, 1]], [[1, 0], [1]]), "b must be a rectangular array"),
        (lambda: stats.ece([0.5, None], [1, 0]), "confidence holds missing values"),
        (lambda: stats.date_effect_test([np.ones((3, 4))], seed=-1), "seed must be a whole number 0 or more"),
        (lambda: stats.date_effect_test([[[1, 0], [1]]]), "entries\\[0\\] must be a rectangular array"),
    ],
)
def test_bad_arrays_get_one_clear_error(call, says):
    with pytest.raises(stats.UsageError, match=says) as raised:
        call()
    assert "\n" not in str(raised.value)


def test_table8s_ece_and_its_delta_interval_are_stats_ece_on_the_stores_questions(tmp_path):
    """A store of 60 questions x 3 dates: the summary's (Table 8's) per-date ECE extremes are ``stats.ece`` of each date's
    questions, and its worst-to-best delta carries ``bands.ece_difference_interval`` of those two dates, paired
    over the same questions; the report's Table 8 prints both ends."""
    from dateeval import results
    from dateeval.results.report.report import paper_tables
    from dateeval.store import Store, sidecars

    rng = np.random.default_rng(4)
    dates, store = ["2024-01-01", "2024-01-02", "2024-01-03"], Store(tmp_path)
    right = rng.beta(3, 3, 60)
    confidence = np.stack([right**power for power in (1.0, 0.5, 0.8)])
    correct = (rng.random(confidence.shape) < right).astype(float)
    for d, day in enumerate(dates):
        rows = [
            {
                "model": "m",
                "model_key": "k",
                "dtype": "float32",
                "device": "cpu",
                "hardware": "cpu",
                "dataset": "d",
                "task_key": "t",
                "condition": day,
                "condition_key": day,
                "factor": "date",
                "date_mode": "date",
                "date": day,
                "item_id": f"i{i}",
                "prompt_hash": f"h{i}",
                "correct": bool(correct[d, i]),
                "confidence": float(confidence[d, i]),
                "pred": 1,
                "answer": 1,
            }
            for i in range(60)
        ]
        sidecars.write_unit(store, store.unit_path("m", "d", day, day), rows)
    view = results.open(tmp_path)[0]
    row = view.summary().iloc[0]
    per_date = [stats.ece(confidence[d], correct[d]).value for d in range(3)]
    worst, best = int(np.argmax(per_date)), int(np.argmin(per_date))
    assert (row["ece_max"], row["ece_min"]) == pytest.approx((per_date[worst], per_date[best]))
    assert (row["ece_worst_date"], row["ece_best_date"]) == (dates[worst], dates[best])
    low, high = bands.ece_difference_interval(confidence[[worst, best]], correct[[worst, best]])
    assert (row["ece_delta_low"], row["ece_delta_high"]) == pytest.approx((low, high)) and low < row["ece_delta"] < high
    tables, _ = paper_tables(view)
    table8 = tables["Table 8: ECE, worst-to-best date"]
    assert {"ece_delta_low", "ece_delta_high"} <= set(table8.columns)
    beside = view.paper_beside("d").set_index("statistic")["yours"]
    assert beside["Largest worst-to-best delta (ECE)"].endswith(f"(95%: {100 * low:.2f} pp to {100 * high:.2f} pp)")


def test_the_ece_delta_interval_is_the_two_dates_bounds_at_one_and_a_quarter_percent_each():
    rng = np.random.default_rng(6)
    confidence = rng.beta(5, 2, (2, 80))
    correct = (rng.random(confidence.shape) < confidence**1.5).astype(float)
    low, high = bands.ece_interval(confidence, correct, tail=0.0125)
    assert bands.ece_difference_interval(confidence, correct) == pytest.approx((low[0] - high[1], high[0] - low[1]))
    assert all(math.isnan(end) for end in bands.ece_difference_interval(confidence[:, :49], correct[:, :49]))


def test_the_date_effect_test_takes_a_shuffle_count_and_reports_its_progress():
    """At 366 dates x 100,000 questions the 1000 shuffles take a quarter of an hour: a caller may ask for fewer (the p
    then moves in steps of 1 / (shuffles + 1)) and is told how far it has come."""
    rng = np.random.default_rng(5)
    correct = (rng.random((6, 40)) < 0.5).astype(float)
    seen: list[tuple[int, int]] = []
    p = stats.date_effect_test([correct], shuffles=99, progress=lambda done, total: seen.append((done, total)))
    assert (p * 100) == pytest.approx(round(p * 100)) and 0 < p <= 1
    assert seen and seen[-1] == (99, 99) and all(total == 99 for _, total in seen)
    assert stats.date_effect_test([correct]) == chance_family([correct])
    for bad in (0, -5, 2.5, True, 10**7):
        with pytest.raises(stats.UsageError, match="shuffles must be a whole number"):
            stats.date_effect_test([correct], shuffles=bad)


def chance_family(entries: list) -> float:
    from dateeval.results.chance.chance import date_effect_family

    return date_effect_family([entries])


def test_no_interval_claims_a_certainty_the_questions_do_not_give():
    """Issue 47 sections 2 and 3: NaN bounds where no interval holds, never a zero-wide one."""
    import math

    from dateeval import stats

    same = stats.paired_difference([[1, 1], [1, 1]], [[0, 0], [0, 0]])
    assert same.value == 1 and math.isnan(same.low) and math.isnan(same.high)
    spread = stats.paired_difference([[1, 1, 0], [1, 1, 1]], [[0, 0, 0], [0, 1, 0]])
    assert spread.low < spread.value < spread.high
    for confidence, correct in (
        ([1.0] * 60, [1] * 60),
        ([0.99] * 60, [1] * 58 + [0] * 2),
        ([0.01] * 60, [0] * 59 + [1]),
    ):
        found = stats.ece(confidence, correct)
        assert math.isnan(found.low) and math.isnan(found.high), found
    found = stats.ece([0.99] * 60, [1] * 57 + [0] * 3)
    assert found.low < found.high
