"""Property test (issue 23): every statistic the results layer computes, read through ``results.open`` on many small
random stores, against a brute-force oracle written here from the generated outcomes, never from the layer's rows.

The stores are real (units written by ``sidecars.write_unit``, read back through the sidecars) and small: 2-3
models, 2-5 dates, 1-4 questions, so ties, all-equal outcomes, rates of 0 and 1, two dates and one item are the rule.
Confidences sit on the ECE bin edges (k / 10) on purpose. Each oracle is the definition as loops."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dateeval import results
from dateeval.metrics.calibration import ECE_BINS
from dateeval.results import descriptive
from dateeval.store import Store, sidecars
from tests.oracles import debiased_ece_by_loops
from tests.pure.test_edges import _cochran_by_loops, _same_order, _tau_b

N_STORES = 20


@dataclass
class Generated:
    """What a random store was made of: per model, dates x items of right/wrong, predictions and confidences."""

    root: Path
    dates: list[str]
    correct: dict[str, np.ndarray]  # model -> dates x items (0/1)
    pred: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray]


def _outcomes(rng: np.random.Generator, n_dates: int, n_items: int, style: int) -> np.ndarray:
    """A dates x items 0/1 matrix: all right, all wrong, one outcome per item on every date, or random."""
    if style == 0:
        return np.ones((n_dates, n_items))
    if style == 1:
        return np.zeros((n_dates, n_items))
    if style == 2:
        return np.tile(rng.integers(0, 2, n_items), (n_dates, 1)).astype(float)
    return (rng.random((n_dates, n_items)) < rng.choice([0.2, 0.5, 0.8])).astype(float)


def _store(folder: Path, seed: int) -> Generated:
    rng = np.random.default_rng(seed)
    n_models, n_dates, n_items = int(rng.integers(2, 4)), int(rng.integers(2, 6)), int(rng.integers(1, 5))
    dates = [f"2024-01-{day + 1:02d}" for day in range(n_dates)]
    store, made = Store(folder), Generated(folder, dates, {}, {}, {})
    for model in (f"m{k}" for k in range(n_models)):
        correct = _outcomes(rng, n_dates, n_items, int(rng.integers(0, 6)) if seed % 4 else 0)
        answer = 1
        pred = np.where(correct == 1, answer, rng.choice([0, 2, 3], correct.shape))
        confidence = rng.integers(1, ECE_BINS + 1, correct.shape) / ECE_BINS  # on the bin edges
        made.correct[model], made.pred[model], made.confidence[model] = correct, pred, confidence
        for d, day in enumerate(dates):
            rows = [
                {
                    "model": model,
                    "model_key": f"k{model}",
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
                    "pred": int(pred[d, i]),
                    "answer": answer,
                }
                for i in range(n_items)
            ]
            sidecars.write_unit(store, store.unit_path(model, "d", day, day), rows)
    return made


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> list[tuple[Generated, results.Results]]:
    made = [_store(tmp_path_factory.mktemp(f"store{seed}"), seed) for seed in range(N_STORES)]
    return [(generated, results.open(generated.root)[0]) for generated in made]


def _entry(view: results.Results, model: str) -> str:
    return view.sums.loc[view.sums["model"] == model, "entry"].iloc[0]


def test_accuracy_and_ece_per_date_equal_their_definitions(stores):
    for generated, view in stores:
        for model, correct in generated.correct.items():
            shown = view.metrics[view.metrics["entry"] == _entry(view, model)].set_index("date")
            for d, day in enumerate(generated.dates):
                assert shown.at[day, "accuracy"] == pytest.approx(correct[d].mean(), abs=1e-12)
                assert shown.at[day, "ece"] == pytest.approx(
                    debiased_ece_by_loops(generated.confidence[model][d].tolist(), correct[d].tolist()), abs=1e-9
                )


def _accuracy_table(generated: Generated) -> list[list[float]]:
    """dates x models accuracies, models in entry order."""
    return [
        [float(generated.correct[model][d].mean()) for model in sorted(generated.correct)]
        for d in range(len(generated.dates))
    ]


def test_kendall_tau_the_reorder_share_and_top_k_equal_their_definitions(stores):
    for generated, view in stores:
        table = _accuracy_table(generated)
        taus = descriptive.kendall_taus(view.metrics, "d")
        assert len(taus) == math.comb(len(table), 2)
        reordered = defined = 0
        for row in taus.itertuples():
            a, b = generated.dates.index(str(row.date_a)[:10]), generated.dates.index(str(row.date_b)[:10])
            expected = _tau_b(table[a], table[b])
            assert row.defined == (not math.isnan(expected))
            assert row.same_order == (
                row.defined and _same_order(table[a], table[b])
            )  # undefined: neither same nor reordered
            if row.defined:
                assert row.tau == pytest.approx(expected, abs=1e-12)
                defined += 1
                reordered += not _same_order(table[a], table[b])
        found = descriptive.reordering(taus)
        assert (found["n_reordered"], found["n_defined"]) == (reordered, defined)
        for k in (1, 2):
            ranked = [[1 + sum(other > value for other in day) for value in day] for day in table]
            tops = [{(e, rank) for e, rank in enumerate(day) if rank <= k} for day in ranked]  # who, at which rank
            expected = sum(tops[d] != tops[d + 1] for d in range(len(tops) - 1)) / (len(tops) - 1)
            assert descriptive.top_k_reorders(view.metrics, "d", k) == pytest.approx(expected, abs=1e-12)


def test_flips_equal_a_recount_of_each_questions_answers(stores):
    first, last = dt.date(2024, 1, 1), dt.date(2024, 1, 31)
    for generated, view in stores:
        for model, correct in generated.correct.items():
            flips, _ = view.flips.flips(_entry(view, model), "d", first, last)
            flips = flips.set_index("item_id")
            pred, confidence = generated.pred[model], generated.confidence[model]
            assert len(flips) == correct.shape[1]
            for i in range(correct.shape[1]):
                row = flips.loc[f"i{i}"]
                answers = pred[:, i].tolist()
                assert row["n_dates"] == len(answers)
                assert row["n_correct"] == int(correct[:, i].sum()) and row["n_wrong"] == len(answers) - int(
                    correct[:, i].sum()
                )
                assert row["changes"] == sum(answers[d] != answers[d + 1] for d in range(len(answers) - 1))
                assert row["n_predictions"] == len(set(answers)) and row["consistent"] == (len(set(answers)) == 1)
                assert row["mean_confidence"] == pytest.approx(statistics.fmean(confidence[:, i]), abs=1e-12)
                assert row["min_confidence"] == pytest.approx(min(confidence[:, i]), abs=1e-12)


def test_cochran_q_equals_its_definition_on_every_entry(stores):
    for generated, view in stores:
        for model, correct in generated.correct.items():
            found = view.chance.significance(_entry(view, model), "d")
            assert found.cochran_q == pytest.approx(_cochran_by_loops(correct), abs=1e-9)
            assert found.delta == pytest.approx(max(correct.mean(1)) - min(correct.mean(1)), abs=1e-12)
            assert 0 < found.p_value <= 1 and 0 < found.cochran_permutation_p <= 1
            if np.ptp(correct.mean(1)) == 0:  # no date differs: nothing can be more extreme than what was seen
                assert found.p_value == 1 and found.cochran_permutation_p == 1


def _components_by_loops(matrix: list[list[float]]) -> tuple[float, float, float]:
    """Two-way random-effects ANOVA without replication by loops (dates x items), negative components set to 0."""
    dates, items = len(matrix), len(matrix[0])
    grand = sum(map(sum, matrix)) / (dates * items)
    date_means = [sum(row) / items for row in matrix]
    item_means = [sum(matrix[d][i] for d in range(dates)) / dates for i in range(items)]
    ss_date = items * sum((m - grand) ** 2 for m in date_means)
    ss_item = dates * sum((m - grand) ** 2 for m in item_means)
    ss_res = sum(
        (matrix[d][i] - date_means[d] - item_means[i] + grand) ** 2 for d in range(dates) for i in range(items)
    )
    ms_date, ms_item, ms_res = ss_date / (dates - 1), ss_item / (items - 1), ss_res / ((dates - 1) * (items - 1))
    return max(0.0, (ms_item - ms_res) / dates), max(0.0, (ms_date - ms_res) / items), ms_res


def test_the_robust_number_and_its_decomposition_equal_their_definitions(stores):
    seen = 0
    for generated, view in stores:
        for model, correct in generated.correct.items():
            row = view.robust.robust_entry(_entry(view, model), "d")
            if min(correct.shape) < 2:
                assert row is None  # no two-way decomposition from one item
                continue
            seen += 1
            item, date, residual = _components_by_loops(correct.tolist())
            assert (row.statistics.var_item, row.statistics.var_date, row.statistics.var_residual) == pytest.approx(
                (item, date, residual), abs=1e-12
            )
            assert row.statistics.score == pytest.approx(correct.mean(), abs=1e-12)
            assert 0 <= row.statistics.low <= row.statistics.score <= row.statistics.high <= 1
            assert row.statistics.high > row.statistics.low  # an interval, even when every cell is 0 or every cell is 1
            total = item + date + residual
            if total > 0:
                assert (
                    row.statistics.share_item + row.statistics.share_date + row.statistics.share_residual
                    == pytest.approx(1, abs=1e-12)
                )
                assert row.statistics.share_date == pytest.approx(date / total, abs=1e-12)
    assert seen >= 20


def test_rank_intervals_equal_a_recount_of_each_dates_ranks(stores):
    for generated, view in stores:
        board = view.robust.robust("d")
        if board.empty:
            continue
        table = _accuracy_table(generated)
        models = sorted(generated.correct)
        for e, model in enumerate(models):
            ranks = sorted(1 + sum(other > day[e] for other in day) for day in table)
            row = board[board["entry"] == _entry(view, model)].iloc[0]
            n = len(ranks)
            assert (row["rank_best"], row["rank_worst"]) == (ranks[0], ranks[-1])
            assert (row["rank_low"], row["rank_high"]) == (
                ranks[max(0, math.ceil(0.025 * n) - 1)],
                ranks[max(0, math.ceil(0.975 * n) - 1)],
            )
            assert row["first_share"] == pytest.approx(sum(rank == 1 for rank in ranks) / n, abs=1e-12)
            overall = [float(generated.correct[m].mean()) for m in models]
            assert row["rank"] == 1 + sum(other > overall[e] for other in overall)


def test_the_date_cv_equals_its_definition_and_is_never_a_zero_width_interval(stores):
    for generated, view in stores:
        summary = view.summary().set_index("entry")
        table5 = view.statistics()["factors"]
        table5 = table5[table5["factor"] == "date"].set_index("entry")
        for model, correct in generated.correct.items():
            entry, accuracy = _entry(view, model), correct.mean(1).tolist()
            row = summary.loc[entry]
            assert row["accuracy_delta"] == pytest.approx(max(accuracy) - min(accuracy), abs=1e-12)
            assert (row["accuracy_min"], row["accuracy_max"]) == pytest.approx(
                (min(accuracy), max(accuracy)), abs=1e-12
            )
            cv = table5.loc[entry]
            mean = statistics.fmean(accuracy)
            if mean == 0:
                assert math.isnan(cv["accuracy_cv"])
            else:
                assert cv["accuracy_cv"] == pytest.approx(statistics.stdev(accuracy) / mean, abs=1e-12)
            assert cv["accuracy_cv_meaningful"] == (
                correct.sum() / len(accuracy) >= 5
            )  # 5 right answers on the mean level
            low, high = cv["accuracy_cv_low"], cv["accuracy_cv_high"]
            assert (math.isnan(low) and math.isnan(high)) or low < high


def test_a_pair_of_dates_with_every_model_tied_is_undefined_not_same_order(stores):
    """At least one generated store has such a pair, so the undefined branch above is exercised."""
    undefined = 0
    for generated, _ in stores:
        table = _accuracy_table(generated)
        undefined += sum(
            math.isnan(_tau_b(table[a], table[b])) for a, b in itertools.combinations(range(len(table)), 2)
        )
    assert undefined > 0
