import numpy as np
import pandas as pd
import pytest
from oracles import condition_metrics

from dateeval.metrics.calibration import ece
from dateeval.results.descriptive import summarize


def test_ece_hand_computed():
    # Bin (0.5,0.6]: confidences .55,.6 with 1 correct -> |0.5-0.575|; bin (0.9,1]: .95,1.0 both correct -> |1-0.975|
    confidence = np.array([0.55, 0.6, 0.95, 1.0])
    correct = np.array([1, 0, 1, 1])
    assert ece(confidence, correct, debiased=False) == pytest.approx(0.5 * 0.075 + 0.5 * 0.025)


def test_ece_perfectly_calibrated_and_empty():
    assert ece(np.array([1.0, 1.0]), np.array([1, 1])) == 0.0
    assert np.isnan(ece(np.array([]), np.array([])))


def test_ece_bin_edges_are_right_closed():
    # 0.1 belongs to the first bin (0, 0.1], 0.0 too.
    assert ece(np.array([0.0, 0.1]), np.array([0, 0])) == pytest.approx(0.05)  # all wrong: no counting noise to remove


def _frame(results: dict[str, list[int]], mode="date") -> pd.DataFrame:
    rows = []
    for condition, correct in results.items():
        date_mode = "none" if condition == "no-date" else "date"
        for i, c in enumerate(correct):
            rows.append(
                dict(
                    model="m",
                    dtype="float32",
                    device="cpu",
                    hardware="x86",
                    model_key="k",
                    dataset="d",
                    task_key="t",
                    system_prompt="s",
                    condition=condition,
                    condition_key=condition,
                    date_mode=date_mode,
                    date=None if date_mode == "none" else condition,
                    item_id=f"i{i}",
                    correct=bool(c),
                    confidence=0.8,
                )
            )
    return pd.DataFrame(rows)


def test_summary_delta_worst_best_and_baseline():
    frame = _frame(
        {"2024-01-01": [1, 1, 0, 0], "2024-01-02": [1, 1, 1, 0], "2024-01-03": [0, 1, 0, 0], "no-date": [1, 0, 0, 0]}
    )
    table = summarize(condition_metrics(frame))
    row = table.iloc[0]
    assert row["n_dates"] == 3 and row["n_items"] == 4
    assert row["accuracy_delta"] == pytest.approx(0.5)
    assert row["accuracy_best_date"] == "2024-01-02" and row["accuracy_worst_date"] == "2024-01-03"
    assert row["no_date_accuracy"] == pytest.approx(0.25)
    assert np.isnan(row["template_default_accuracy"])  # NaN, not None: a number column stays numeric


def test_conditions_compare_only_common_items():
    frame = _frame({"2024-01-01": [1, 1, 0, 0], "2024-01-02": [1, 1]})
    metrics = condition_metrics(frame)
    assert set(metrics["n_items"]) == {2}
    assert set(metrics["accuracy"]) == {1.0}


def _pred_frame(preds_by_date: dict[str, list[int]], answers: list[int], confidence: float = 0.6) -> pd.DataFrame:
    rows = []
    for date, preds in preds_by_date.items():
        for i, (pred, answer) in enumerate(zip(preds, answers)):
            rows.append(
                dict(
                    model="m",
                    dtype="float32",
                    device="cpu",
                    hardware="x86",
                    model_key="k",
                    dataset="d",
                    task_key="t",
                    system_prompt="s",
                    condition=date,
                    condition_key=date,
                    date_mode="date",
                    date=date,
                    item_id=f"i{i}",
                    pred=pred,
                    answer=answer,
                    correct=pred == answer,
                    confidence=confidence if i else 0.9,
                )
            )
    return pd.DataFrame(rows)


def test_item_flips_and_table7():
    from oracles import confidence_by_consistency, item_flips

    frame = _pred_frame({"2024-01-01": [0, 1, 2], "2024-01-02": [0, 2, 2], "2024-01-03": [0, 1, 2]}, answers=[0, 1, 3])
    flips = item_flips(frame).set_index("item_id")
    assert flips.loc["i1", "changes"] == 2 and flips.loc["i1", "n_correct"] == 2 and not flips.loc["i1", "consistent"]
    assert flips.loc["i0", "changes"] == 0 and flips.loc["i0", "consistent"] and flips.loc["i2", "n_wrong"] == 3
    table = confidence_by_consistency(frame).iloc[0]
    assert table["n_inconsistent"] == 1 and table["n_items"] == 3
    assert table["inconsistent_confidence"] == pytest.approx(0.6)
    assert table["consistent_confidence"] == pytest.approx((0.9 * 3 + 0.6 * 3) / 6)


def test_ranks_and_kendall_tau_against_scipy():
    from scipy.stats import kendalltau

    from dateeval.results.descriptive import kendall_taus, ranks, top_k_reorders

    accuracy = {"a": [0.5, 0.6, 0.7], "b": [0.6, 0.5, 0.8], "c": [0.7, 0.7, 0.6]}
    rows = [
        dict(entry=e, dataset="d", factor="date", date_mode="date", date=f"2024-01-0{j + 1}", accuracy=v)
        for e, vs in accuracy.items()
        for j, v in enumerate(vs)
    ]
    metrics = pd.DataFrame(rows)
    ranked = ranks(metrics)
    assert ranked[(ranked["entry"] == "c") & (ranked["date"] == "2024-01-01")]["rank"].item() == 1
    taus = kendall_taus(metrics, "d")
    assert len(taus) == 3
    values = np.array([accuracy[e] for e in ("a", "b", "c")]).T  # dates x entries
    for row in taus.itertuples():
        i, j = [list(sorted(set(ranked["date"]))).index(d) for d in (row.date_a, row.date_b)]
        assert row.tau == pytest.approx(kendalltau(values[i], values[j]).statistic)
    ties = pd.DataFrame(
        [
            dict(entry=e, dataset="d", factor="date", date_mode="date", date=f"2024-02-0{j + 1}", accuracy=v)
            for e, vs in {"a": [0.5, 0.5, 0.6], "b": [0.5, 0.6, 0.5], "c": [0.7, 0.6, 0.6]}.items()
            for j, v in enumerate(vs)
        ]
    )
    tied = kendall_taus(ties, "d")
    tied_values = np.array([[0.5, 0.5, 0.7], [0.5, 0.6, 0.6], [0.6, 0.5, 0.6]])
    for row, (i, j) in zip(tied.itertuples(), [(0, 1), (0, 2), (1, 2)]):
        assert row.tau == pytest.approx(kendalltau(tied_values[i], tied_values[j]).statistic)  # tau-b with ties
    assert top_k_reorders(metrics, "d", 1) == pytest.approx(0.5)  # c, c, b


def test_vectorised_ece_matches_the_reference():
    from dateeval.metrics.calibration import ece_by_code

    rng = np.random.default_rng(1)
    codes, confidence, correct = (
        rng.integers(0, 5, 2000),
        rng.uniform(0.25, 1, 2000),
        (rng.uniform(0, 1, 2000) < 0.6).astype(float),
    )
    fast = ece_by_code(codes, confidence, correct)
    for group in range(5):
        assert fast[group] == pytest.approx(ece(confidence[codes == group], correct[codes == group]))


def test_template_default_dates():
    from dateeval.results.descriptive import template_default_dates

    frame = pd.DataFrame(
        {
            "model": ["llama", "smol"],
            "dtype": ["bfloat16"] * 2,
            "device": ["cpu"] * 2,
            "date_mode": ["default"] * 2,
            "date_text": ["26 Jul 2024", None],
        }
    )
    assert template_default_dates(frame) == {"llama (bfloat16, cpu)": pd.Timestamp("2024-07-26")}


def test_a_flat_line_names_no_worst_or_best_date():
    row = summarize(condition_metrics(_frame({"2024-01-01": [1, 0], "2024-01-02": [0, 1]}))).iloc[0]
    assert row["accuracy_delta"] == 0 and row["accuracy_worst_date"] is None and row["accuracy_best_date"] is None


def test_task_settings_separate_leaderboard_entries():
    from dateeval.results.descriptive import kendall_taus

    auto = _frame({"2024-01-01": [1, 1, 0], "2024-01-02": [1, 0, 0]})
    label = _frame({"2024-01-01": [1, 0, 0], "2024-01-02": [1, 1, 1]}).assign(task_key="u")
    metrics = condition_metrics(pd.concat([auto, label], ignore_index=True))
    assert metrics["entry"].nunique() == 2 and all("[task " in entry for entry in metrics["entry"])
    assert kendall_taus(metrics, "d")["tau"].tolist() == [-1.0]  # two entries whose order swaps, not one averaged entry
