import numpy as np
import pandas as pd
import pytest

from dateeval.analysis import condition_metrics, ece, summarize


def test_ece_hand_computed():
    # Bin (0.5,0.6]: confidences .55,.6 with 1 correct -> |0.5-0.575|; bin (0.9,1]: .95,1.0 both correct -> |1-0.975|
    confidence = np.array([0.55, 0.6, 0.95, 1.0])
    correct = np.array([1, 0, 1, 1])
    assert ece(confidence, correct) == pytest.approx(0.5 * 0.075 + 0.5 * 0.025)


def test_ece_perfectly_calibrated_and_empty():
    assert ece(np.array([1.0, 1.0]), np.array([1, 1])) == 0.0
    assert np.isnan(ece(np.array([]), np.array([])))


def test_ece_bin_edges_are_right_closed():
    # 0.1 belongs to the first bin (0, 0.1], 0.0 too.
    assert ece(np.array([0.0, 0.1]), np.array([0, 0])) == pytest.approx(0.05)


def _frame(results: dict[str, list[int]], mode="date") -> pd.DataFrame:
    rows = []
    for condition, correct in results.items():
        date_mode = "none" if condition == "no-date" else "date"
        for i, c in enumerate(correct):
            rows.append(
                dict(model="m", dtype="float32", device="cpu", model_key="k", dataset="d", task_key="t", system_prompt="s",
                     condition=condition, condition_key=condition, date_mode=date_mode, date=None if date_mode == "none" else condition,
                     item_id=f"i{i}", correct=bool(c), confidence=0.8)
            )
    return pd.DataFrame(rows)


def test_summary_delta_worst_best_and_baseline():
    frame = _frame({"2024-01-01": [1, 1, 0, 0], "2024-01-02": [1, 1, 1, 0], "2024-01-03": [0, 1, 0, 0], "no-date": [1, 0, 0, 0]})
    table = summarize(condition_metrics(frame))
    row = table.iloc[0]
    assert row["n_dates"] == 3 and row["n_items"] == 4
    assert row["accuracy_delta"] == pytest.approx(0.5)
    assert row["accuracy_best_date"] == "2024-01-02" and row["accuracy_worst_date"] == "2024-01-03"
    assert row["no_date_accuracy"] == pytest.approx(0.25)
    assert row["template_default_accuracy"] is None


def test_conditions_compare_only_common_items():
    frame = _frame({"2024-01-01": [1, 1, 0, 0], "2024-01-02": [1, 1]})
    metrics = condition_metrics(frame)
    assert set(metrics["n_items"]) == {2}
    assert set(metrics["accuracy"]) == {1.0}
