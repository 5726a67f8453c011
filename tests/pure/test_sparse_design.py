"""The sparse design (``dateeval.sparse``) and its estimator (``dateeval.results.sparse.estimated``, ``dateeval.stats.sparse_estimates``):
the draw is fixed by its seed and nests across budgets; the estimate is design-unbiased, checked against every
possible sample (ties, 0/1 values, one question, two dates); bad arrays get one message naming the argument."""

from __future__ import annotations

import datetime as dt
import itertools
import re

import numpy as np
import pytest
from scipy import stats as scipy_stats

from dateeval import sparse, stats
from dateeval.conditions import Condition
from dateeval.engine.drawn import check_affordable
from dateeval.engine.plan import SweepSpec
from dateeval.errors import DateEvalError
from dateeval.results.sparse import estimated
from dateeval.results.sparse.estimated import difference_estimates, own_variance


def test_the_draw_is_fixed_by_its_seed_and_uniform():
    items, keys = [f"q{i}" for i in range(400)], [f"k{j}" for j in range(25)]
    first = sparse.uniforms(0, items, keys)
    assert first.shape == (25, 400) and ((first >= 0) & (first < 1)).all()
    assert np.array_equal(first, sparse.uniforms(0, items, keys))  # a rerun draws the same cells
    assert np.array_equal(
        first[:, 10:20], sparse.uniforms(0, items[10:20], keys)
    )  # a cell's draw is its own, not its position's
    assert not np.array_equal(first, sparse.uniforms(1, items, keys))
    assert scipy_stats.kstest(first.ravel(), "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(first[0], first[1])[0, 1]) < 0.2  # dates drawn independently


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_larger_budget_raises_every_probability_and_spends_what_it_says(seed):
    rng = np.random.default_rng(seed)
    w = np.where(rng.random(500) < 0.7, 0.0, rng.random(500))  # most questions never moved in the pilot
    previous = np.zeros(500)
    for share in (0.01, 0.05, 0.1, 0.3, 0.6, 0.95):
        design = sparse.design_for(w, 40, 0, seed=0, budget=share, pilot=("a",))
        pi = design.inclusion(w)
        assert (pi > 0).all() and (pi <= 1).all()  # every cell can be drawn
        assert (pi >= previous - 1e-12).all()  # nested: a larger budget discards no cell
        assert pi.sum() * 40 == pytest.approx(share * 500 * 40, rel=1e-6)
        previous = pi
    assert sparse.design_for(np.zeros(10), 5, 0, seed=0, budget=0.2, pilot=()).inclusion(np.zeros(10)) == pytest.approx(
        np.full(10, 0.2)
    )


def _spec(dates: int, others: int, budget: float) -> SweepSpec:
    """A sweep of ``dates`` plain dates and ``others`` conditions scored in full (option orders: a factor)."""
    day = dt.date(2024, 1, 1)
    conditions = [Condition(date=day + dt.timedelta(days=i)) for i in range(dates)]
    conditions += [Condition(date=day, option_order=k + 1) for k in range(others)]
    return SweepSpec(models=("m",), datasets=("mmlu",), conditions=tuple(conditions), budget=budget)


@pytest.mark.parametrize(
    ("dates", "others"), [(d, o) for d in range(1, 9) for o in (0, 1, 2, 7)] + [(4, 300), (5, 997)]
)
def test_a_refused_budget_advises_only_a_budget_that_is_taken(dates, others):
    """Issue 62 §6: with 3 dates the advice was "ask for more than 1.00", and 300 factors beside 4 dates (99.7% dense)
    rounded to it too: ``--budget`` refuses anything above 1. Where the dense conditions are the whole grid, no budget
    can be sparse and the advice says so; elsewhere the budget advised is taken, 1 included (every cell drawn)."""
    with pytest.raises(DateEvalError) as refused:
        check_affordable(_spec(dates, others, 0.01))
    said = str(refused.value)
    assert "1.00" not in said or dates > sparse.PILOT
    if dates <= sparse.PILOT:  # no date is drawn: only a dense sweep or more dates helps
        assert f"with {dates} date(s) every condition is scored in full" in said and "drop --budget" in said
        assert "ask for" not in said
        return
    least = float(re.search(r"ask for at least (\d\.\d\d)", said).group(1))
    assert 0 < least <= 1
    check_affordable(_spec(dates, others, least))  # the advice is taken ...
    check_affordable(_spec(dates, others, 1.0))  # ... and so is the whole budget
    with pytest.raises(DateEvalError):
        check_affordable(_spec(dates, others, round(least - 0.01, 2)))  # ... and it is the least such


def test_the_whole_budget_draws_every_cell():
    """``--budget 1`` where dates are drawn: every cell's probability is 1, the dense grid with its design stored."""
    w = np.array([0.0, 0.3, 0.9, 0.0])
    assert (sparse.design_for(w, 7, 0, seed=0, budget=1.0, pilot=("a",)).inclusion(w) == 1).all()


def test_a_design_reads_back_and_damage_is_named():
    design = sparse.design_for(np.array([0.0, 0.5, 0.2]), 4, 0, seed=3, budget=0.4, pilot=("a", "b"))
    assert sparse.Design.from_json(design.to_json()) == design
    with_baseline = sparse.design_for(np.array([0.5]), 4, 2, seed=3, budget=0.4, pilot=("a",), baseline="none")
    assert sparse.Design.from_json(with_baseline.to_json()).baseline == "none"
    older = design.to_json().replace('"baseline": null, ', "").replace('"version": 3', '"version": 2')
    assert sparse.Design.from_json(older) == design  # a design before version 3 read no baseline
    bad = with_baseline.to_json().replace('"baseline": "none"', '"baseline": 7')
    for text in ("", "{}", '{"seed": 0}', design.to_json().replace('"budget": 0.4', '"budget": 7'), bad):
        with pytest.raises(DateEvalError, match="sparse design"):
            sparse.Design.from_json(text)


def test_propensity_follows_the_pilots_changes_and_near_ties():
    correct = np.array([[1, 0, 1, 0], [1, 1, 1, 0], [1, 0, 1, 0]], dtype=float)
    margin = np.array([[0.5, 0.5, 0.001, 0.9], [0.5, 0.4, 0.3, 0.9], [0.6, 0.5, 0.3, 0.9]])
    w = sparse.propensity(correct, margin)
    assert w[1] == pytest.approx(np.sqrt(2 / 9))  # changed on a pilot date: its grade's spread there
    assert w[2] > w[0] and w[2] == pytest.approx(
        sparse.MARGIN_WEIGHT * np.exp(-0.001 / sparse.MARGIN_SCALE)
    )  # a near tie
    assert w[3] < 1e-6 and sparse.propensity(correct)[0] == 0  # steady, wide margin / no probabilities
    assert sparse.propensity(np.full((3, 2), np.nan)).tolist() == [0, 0]  # ungraded answers: the floor samples them
    # the no-date baseline's grade joins the pilot's (the date line moved it), its margins do not
    w = sparse.propensity(correct[:1], margin[:1], baseline=np.array([0, 0, 1, 0]))
    assert (
        w[0] == pytest.approx(0.5)
        and w[1] == pytest.approx(sparse.MARGIN_WEIGHT * np.exp(-0.5 / sparse.MARGIN_SCALE))
        and w[3] < 1e-6
    )


CASES = {
    "ties and mixed": ([1, 0, 1, 1, 0, 1], [0.3, 0.9, 0.5, 0.5, 0.2, 1.0], [0.5, 0.5, 1.0, 0.0, 0.0, 1.0]),
    "all right": ([1, 1, 1, 1, 1], [0.2, 0.4, 0.6, 0.8, 0.3], [1, 1, 0.5, 1, 0]),
    "all wrong": ([0, 0, 0, 0], [0.25, 0.5, 0.75, 0.1], [0, 0, 0, 0.5]),
    "one question": ([1], [0.4], [0.0]),
    "confidences": ([0.31, 0.77, 0.5, 0.5, 0.92], [0.5, 0.1, 0.6, 0.6, 0.3], [0.3, 0.7, 0.5, 0.4, 1.0]),
}


@pytest.mark.parametrize("case", CASES)
def test_the_estimate_and_its_own_variance_are_unbiased_over_every_sample(case):
    """The oracle: every one of the 2^n Poisson samples, weighted by its probability."""
    values, pi, m = (np.array(part, dtype=float) for part in CASES[case])
    n = len(values)
    mean, second, variance = 0.0, 0.0, 0.0
    for drawn in itertools.product([False, True], repeat=n):
        drawn = np.array(drawn)
        if (~drawn & (pi == 1)).any():
            continue  # a certain cell is always drawn
        chance = np.prod(np.where(drawn, pi, 1 - pi))
        found = difference_estimates(np.where(drawn, values, np.nan)[None, :], pi, m)
        mean += chance * found.value[0]
        second += chance * found.value[0] ** 2
        variance += (
            chance * own_variance(drawn[None, :], np.where(drawn, values - m, 0.0)[None, :], pi[None, :])[0] / n**2
        )
    assert mean == pytest.approx(values.mean(), abs=1e-12)
    assert variance == pytest.approx(second - mean**2, abs=1e-12)


def test_two_dates_are_estimated_apart_and_a_fully_drawn_date_is_exact():
    values = np.array([[1, 0, 1, 1], [0, 0, 1, 0]], dtype=float)
    found = difference_estimates(values, np.ones(4), np.array([1, 0, 1, 0.5]))
    assert (
        found.value.tolist() == [0.75, 0.25]
        and found.low.tolist() == [0.75, 0.25]
        and found.n_scored.tolist() == [4, 4]
    )
    partial = difference_estimates(
        np.array([[np.nan, 0, 1, 1], [0, np.nan, np.nan, 0]]), np.full(4, 0.5), np.array([1, 0, 1, 0.5])
    )
    assert partial.value.tolist() == pytest.approx([(2.5 + 0 + 0 + 1) / 4, (2.5 - 2 - 1) / 4])
    assert (partial.low < partial.high).all()  # never zero wide while cells are unseen


def test_an_unmoved_sample_still_gets_an_interval():
    """Nothing moved in the drawn cells: the pooled variance's pseudo-cell keeps the interval open."""
    values = np.where(np.random.default_rng(0).random((10, 200)) < 0.1, 1.0, np.nan)
    found = difference_estimates(values, np.full(200, 0.1), np.ones(200))
    assert (found.value == 1).all() and (found.low < 1).all() and (found.high == 1).all()


def test_the_public_estimator_equals_the_one_the_pages_read():
    rng = np.random.default_rng(1)
    values = np.where(rng.random((3, 50)) < 0.4, (rng.random((3, 50)) < 0.6).astype(float), np.nan)
    pi, m = np.full(50, 0.4), np.full(50, 0.6)
    found = stats.sparse_estimates(values, pi, m)
    direct = difference_estimates(values, pi, m)
    assert [estimate.value for estimate in found] == direct.value.tolist() and [
        estimate.low for estimate in found
    ] == direct.low.tolist()


@pytest.mark.parametrize(
    "values,inclusion,predictor,match",
    [
        (np.ma.masked_array([[1.0, 0.0]], mask=[[0, 1]]), [0.5, 0.5], [0.5, 0.5], "masked"),
        ([[1.0, 0.0]], [0.0, 0.5], [0.5, 0.5], r"\[1e-06, 1\]"),
        ([[1.0, 0.0]], [0.5, 1.5], [0.5, 0.5], r"\[1e-06, 1\]"),
        ([[1.0, 0.0]], [1e-300, 0.5], [0.5, 0.5], r"\[1e-06, 1\]"),
        ([[1.0, 0.0]], [5e-324, 0.5], [0.5, 0.5], r"\[1e-06, 1\]"),
        ([[1.0, np.nan]], [0.5, 1.0], [0.5, 0.5], "probability 1"),
        ([[1.0, 0.0]], [0.5, 0.5, 0.5], [0.5, 0.5], "shape"),
        ([[2.0, 0.0]], [0.5, 0.5], [0.5, 0.5], r"\[0, 1\]"),
        ([[1.0, 0.0]], [0.5, 0.5], [0.5], "predictor"),
        ([[1.0], [0.0, 1.0]], [0.5], [0.5], "rectangular"),
        ([1.0, 0.0], [0.5, 0.5], [0.5, 0.5], "dates x questions"),
        ([[1.0, 0.0]], [0.5, None], [0.5, 0.5], "inclusion"),
    ],
)
def test_bad_arrays_get_one_message_naming_the_problem(values, inclusion, predictor, match):
    with pytest.raises(stats.UsageError, match=match):
        stats.sparse_estimates(values, inclusion, predictor)


def test_the_replay_estimates_every_date_as_the_readers_do():
    """Issue 63 §2: ``stats.sparse_replay`` against loops: every date but the pilot (the first) drawn, each the
    difference estimate of its drawn cells against the cross-fitted predictor (cut to [0, 1]; the baseline, where
    given, its prior) with the readers' interval; the pilot exact with its Clopper-Pearson band; the cells counted with
    the baseline; with the whole budget every date exact and every cell scored."""
    from dateeval.results.sparse.replay import replay

    rng = np.random.default_rng(63)
    grades = (rng.random((12, 40)) < 0.4).astype(float)
    grades[:, :6] = rng.random((12, 6)) < 0.5  # movers
    margins = rng.random(grades.shape)
    for baseline in (np.ones(40), None):
        found = stats.sparse_replay(grades, budget=0.4, seed=3, margins=margins, baseline=baseline)
        sample = replay(grades, 0.4, 3, margins, baseline).sample
        assert found.grid == (12 + (baseline is not None)) * 40
        assert found.cells == int(np.isfinite(sample.values).sum()) + 40 * (baseline is not None)
        pilot = sparse.pilot_indices(12)
        for d, (estimate, drawn) in enumerate(zip(found.estimates, found.estimated)):
            if d in pilot:
                assert not drawn and estimate == stats.rate_interval(int(grades[d].sum()), 40)
                continue
            m = sample.predictor[d]
            total = sum(
                m[i] + (0.0 if np.isnan(sample.values[d, i]) else (grades[d, i] - m[i]) / sample.inclusion[d, i])
                for i in range(40)
            )
            direct = difference_estimates(sample.values, sample.inclusion, sample.predictor)  # pooled over every date
            assert drawn and estimate.value == pytest.approx(min(1.0, max(0.0, total / 40)), abs=1e-12)
            assert (estimate.low, estimate.high) == (direct.low[d], direct.high[d])
    whole = stats.sparse_replay(grades, budget=1.0)
    assert whole.cells == whole.grid and not any(whole.estimated)


def test_the_cross_fitted_predictor_is_each_question_s_mean_over_the_other_dates():
    """A loop's oracle: each cell's predictor is its question's mean over every other date's scored cells and the
    prior at its weight; a question seen nowhere else gets a constant (``UNSEEN``). So no date's predictor moves with
    its own draw (what keeps each date's estimate design-unbiased)."""
    rng = np.random.default_rng(5)
    values = np.where(rng.random((6, 7)) < 0.5, (rng.random((6, 7)) < 0.4).astype(float), np.nan)
    values[:, 0] = np.nan  # scored nowhere
    values[:, 1] = np.nan
    values[2, 1] = 1.0  # scored on one date only
    prior = rng.random(7)
    for weight, given in ((0.0, None), (1.0, prior), (2.5, prior)):
        found = estimated.cross_fitted(values, given, weight)
        for d in range(6):
            others = np.delete(values, d, axis=0)
            for q in range(7):
                seen = others[:, q][np.isfinite(others[:, q])]
                total, count = (
                    seen.sum() + (weight * prior[q] if given is not None else 0),
                    len(seen) + weight * (given is not None),
                )
                assert found[d, q] == pytest.approx(total / count if count else estimated.UNSEEN, abs=1e-12)
        changed = values.copy()
        changed[3] = np.where(np.isfinite(changed[3]), 1 - changed[3], np.nan)  # a date's own draw and grades
        assert np.allclose(estimated.cross_fitted(changed, given, weight)[3], found[3], rtol=0, atol=1e-12)
    assert np.array_equal(estimated.cross_fitted(np.full((2, 3), np.nan)), np.full((2, 3), estimated.UNSEEN))


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"grades": np.ones((1, 4)), "budget": 0.5}, "two or more"),
        ({"grades": np.ones((1, 4)), "budget": 0.5, "baseline": np.ones(4)}, "two or more"),
        ({"grades": np.full((8, 4), 0.5), "budget": 0.5}, "0/1"),
        ({"grades": np.ones((8, 4)), "budget": 0.12}, "spent"),
        ({"grades": np.ones((8, 4)), "budget": 0.1, "baseline": np.ones(4)}, "spent"),
        ({"grades": np.ones((8, 4)), "budget": 1.5}, "budget"),
        ({"grades": np.ones((8, 4)), "budget": 0.5, "baseline": np.ones(3)}, "baseline"),
        ({"grades": np.ones((8, 4)), "budget": 0.5, "margins": np.ones((8, 3))}, "margins"),
        ({"grades": np.ones((8, 4)), "budget": 0.5, "seed": 0.5}, "seed"),
    ],
)
def test_a_replay_of_bad_arguments_is_one_message(arguments, match):
    with pytest.raises(stats.UsageError, match=match):
        stats.sparse_replay(arguments.pop("grades"), **arguments)


def test_a_target_width_replay_stops_at_the_first_look_within_it():
    """Issue 63 §4: ``sparse_replay(target_width=W)`` is the replay at the first of ``sparse.looks(cap)`` where every
    estimated date is within +-W (a loop over the looks as the oracle), its intervals at Bonferroni's critical value
    over the looks; where no look reaches W it stops at the cap and says so."""
    from dateeval.results.sparse.replay import replay

    rng = np.random.default_rng(7)
    grades = (rng.random((20, 60)) < 0.4).astype(float)
    grades[:, :12] = rng.random((20, 12)) < 0.5  # movers
    baseline = (rng.random(60) < 0.4).astype(float)
    budgets = sparse.looks(1.0)
    for width in (0.3, 0.12, 0.05):
        found = stats.sparse_replay(grades, target_width=width, seed=2, baseline=baseline)
        drawn = [replay(grades, budget, 2, None, baseline, looks=len(budgets)) for budget in budgets]
        stop = next((d for d in drawn if d.widest() <= width), drawn[-1])
        assert found.budget == stop.budget and found.reached == (stop.widest() <= width)
        assert [e.value for e in found.estimates] == pytest.approx(list(stop.value), abs=1e-12)
        assert stop.sample.critical == pytest.approx(scipy_stats.norm.ppf(1 - 0.025 / len(budgets)))
    capped = stats.sparse_replay(grades, target_width=0.01, budget=0.25, seed=2, baseline=baseline)
    assert capped.budget == 0.25 and not capped.reached
    assert sparse.looks(0.25) == (0.06, 0.12, 0.25) and sparse.looks(0.3) == (0.06, 0.12, 0.25, 0.3)
    assert sparse.looks(1.0, 0.1) == (0.12, 0.25, 0.5, 1.0) and sparse.looks(0.1, 0.1) == ()
    few = stats.sparse_replay(grades[:10], target_width=0.01, seed=2, baseline=baseline)  # 1 of 11 rows in full
    assert few.budget == 1.0 and few.estimated == [False] * 10  # the cap scores every cell
    short = stats.sparse_replay(grades[:10], target_width=0.3, seed=2, baseline=baseline)
    looks = sparse.looks(1.0, 1 / 11)  # 0.06 is spent by the baseline: not a look, and not in the critical value
    drawn = [replay(grades[:10], budget, 2, None, baseline, looks=len(looks)) for budget in looks]
    stop = next(d for d in drawn if d.widest() <= 0.3)
    assert len(looks) == 4 and short.budget == stop.budget
    assert [e.value for e in short.estimates] == pytest.approx(list(stop.value), abs=1e-12)
    assert sparse.critical(1) == pytest.approx(1.959963984540054)
    with pytest.raises(stats.UsageError, match="target_width"):
        stats.sparse_replay(grades, target_width=0.0)
    with pytest.raises(stats.UsageError, match="budget, a target_width"):
        stats.sparse_replay(grades)
