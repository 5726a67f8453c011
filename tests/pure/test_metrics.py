"""The metric registry: one ECE (checked against the paper's formula written as a loop), one way to show numbers."""

import numpy as np
import pandas as pd
import pytest

from dateeval.metrics.calibration import ece, ece_by_code, ece_resampled, ece_rows
from dateeval.metrics.columns import column, for_display, formatted
from dateeval.errors import DateEvalError
from dateeval.metrics import METRICS, dataset_metrics, percent
from dateeval.tasks.registry import MULTIPLE_CHOICE, Benchmark, register


def reference_ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Paper App. C.1 as written: sum over bins of |B_m|/N * |acc(B_m) - conf(B_m)|, bins ((m-1)/M, m/M]."""
    total = 0.0
    for m in range(1, bins + 1):
        in_bin = (confidence > (m - 1) / bins) & (confidence <= m / bins) if m > 1 else confidence <= 1 / bins
        if in_bin.any():
            total += in_bin.sum() / confidence.size * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return total


def test_every_ece_entry_point_is_the_papers_formula():
    """With ``debiased=False`` every entry point is App. C.1's plug-in; the debiased ECE the pages print (its own oracle:
    tests/pure/test_stats.py) is the same number from every entry point too."""
    rng = np.random.default_rng(3)
    confidence, correct = rng.uniform(0, 1, (4, 500)), (rng.uniform(0, 1, (4, 500)) < 0.6).astype(float)
    expected = [reference_ece(c, y) for c, y in zip(confidence, correct)]
    assert [ece(c, y, debiased=False) for c, y in zip(confidence, correct)] == pytest.approx(expected)
    assert ece_rows(confidence, correct, debiased=False) == pytest.approx(expected)
    codes = np.repeat(np.arange(4), 500)
    assert ece_by_code(codes, confidence.ravel(), correct.ravel(), debiased=False) == pytest.approx(expected)
    draws = rng.integers(0, 500, (3, 500))
    weights = np.stack([np.bincount(d, minlength=500) for d in draws]).astype(float)
    resampled = ece_resampled(confidence, correct, weights, debiased=False)
    assert resampled == pytest.approx(
        np.array([[reference_ece(c[d], y[d]) for d in draws] for c, y in zip(confidence, correct)])
    )
    debiased = [ece(c, y) for c, y in zip(confidence, correct)]
    assert ece_rows(confidence, correct) == pytest.approx(debiased) and ece_by_code(
        codes, confidence.ravel(), correct.ravel()
    ) == pytest.approx(debiased)
    assert ece_resampled(confidence, correct, weights) == pytest.approx(
        np.array([[ece(c[d], y[d]) for d in draws] for c, y in zip(confidence, correct)]), abs=1e-5
    )
    assert all(d < e for d, e in zip(debiased, expected))  # the bias removed is upward


def test_metrics_know_their_scale_direction_and_name():
    assert METRICS["accuracy"].format(0.61234) == "61.23%" and METRICS["bleu"].format(21.4) == "21.40"
    assert METRICS["ece"].higher_is_better is False and METRICS["accuracy"].name_on("humaneval") == "pass@1"
    assert METRICS["accuracy"].axis_label("mmlu") == "Accuracy (%)" and METRICS["chrf"].axis_label() == "chrF"
    assert percent(None) == "-" and percent(float("nan")) == "-" and percent(1e-16) == "0.00%"


def test_columns_get_human_names_and_units():
    assert column("accuracy_worst_date").label == "Accuracy worst date"
    assert column("accuracy_delta", "humaneval").label == "pass@1 delta (worst to best) (pp)"
    assert (
        column("bleu_delta").kind == "points" and column("ece_cv").kind == "percent" and column("cochran_p").kind == "p"
    )
    table = pd.DataFrame(
        {"entry": ["m"], "accuracy_delta": [0.0525], "bleu_delta": [1.5], "no_date_ece": [np.nan], "p_value": [0.01234]}
    )
    shown = for_display(table)
    assert (
        shown["Accuracy delta (worst to best) (pp)"].iloc[0] == pytest.approx(5.25)
        and shown["BLEU delta (worst to best)"].iloc[0] == 1.5
    )
    text = formatted(table).iloc[0].tolist()
    assert text == ["m", "5.25", "1.50", "-", "0.012"]


def test_a_datasets_metrics_are_what_its_benchmark_declares():
    """Every reader asks ``dataset_metrics``: what its rows' task kind declares (``KIND_METRICS``, from which every
    benchmark declares its own, so no task needs to be registered in the reading process); of those, the ones its rows
    measured."""

    def rows(dataset: str, kind: str | None, **values: float) -> pd.DataFrame:
        return pd.DataFrame(
            {"dataset": [dataset], "task": [kind], **{key: [values.get(key, np.nan)] for key in METRICS}}
        )

    every = {"accuracy": 0.5, "ece": 0.1, "bleu": 20.0, "chrf": 40.0}
    assert dataset_metrics(rows("mmlu_cot_5shot", "cot", **every)) == ["accuracy", "ece"]
    assert dataset_metrics(rows("wmt16_en_de", "translation", **every)) == ["bleu", "chrf"]
    assert dataset_metrics(rows("humaneval", "humaneval", **every)) == ["accuracy"]
    assert dataset_metrics(rows("my_quiz", "generation", **every)) == ["accuracy"]  # a user's file, not registered here
    assert dataset_metrics(rows("my_quiz", None, accuracy=0.5, bleu=3.0)) == [
        "accuracy",
        "bleu",
    ]  # nothing declares: the measured
    assert dataset_metrics(rows("mmlu", "mcqa", accuracy=0.5)) == [
        "accuracy"
    ]  # an API reply without a confidence has no ECE
    with pytest.raises(DateEvalError, match="unknown metrics"):
        register(Benchmark("typo", MULTIPLE_CHOICE, lambda request: pytest.fail("not built"), metrics=("acuracy",)))
