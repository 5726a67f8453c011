"""One registry of metrics and of how a number is written: the CLI, the report and every explorer page read it.

Stored values keep their natural unit (rates in [0, 1], BLEU and chrF on
0-100); what a person reads is decided here once: rates as percentages with
two decimals, corpus scores as points, differences at the digits their
question count supports. ECE's arithmetic is :mod:`dateeval.metrics.calibration`'s;
table columns' headings and units are :mod:`dateeval.metrics.columns`'.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dateeval.metrics.calibration import ece_bin_sums, ece_from_sums


@dataclass(frozen=True)
class Grouped:
    """One unit's rows grouped per entry x condition (``codes``: dense group numbers): what a metric sums."""

    frame: pd.DataFrame
    codes: np.ndarray
    groups: int

    def values(self, column: str) -> np.ndarray:
        """A numeric column as floats, NaN where missing (or everywhere, where the unit lacks it)."""
        return self.frame[column].astype(float).to_numpy() if column in self.frame else np.full(len(self.frame), np.nan)

    def count(self, keep: np.ndarray) -> np.ndarray:
        return np.bincount(self.codes[keep], minlength=self.groups)

    def total(self, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.codes[keep], weights=values[keep], minlength=self.groups)


@dataclass(frozen=True)
class Metric:
    """A per-condition score: how it is summed and finished, how it is called, its display scale and which way is better.

    ``sums`` turns a unit's grouped rows into additive columns (kept in the unit's sidecar, so a condition's value
    never needs its rows again); ``finish`` turns those columns, one row per group, into the metric's value(s).
    Adding a metric is one entry in :data:`METRICS` plus the benchmarks that declare it (``Benchmark.metrics``, as an
    Inspect scorer declares its metrics): the sidecars, every page, the CLI and the report read it from here.
    """

    key: str
    label: str
    scale: float  # stored value x scale = shown value (100 for rates stored in [0, 1])
    higher_is_better: bool
    sums: Callable[[Grouped], dict[str, object]]
    finish: Callable[[pd.DataFrame], dict[str, object]]
    per_item: bool = True  # a mean over per-item grades, so resampling the questions gives its interval (not BLEU/chrF: corpus scores)
    counted: bool = False  # a share of questions (k of n): its differences move in steps of 100/n points

    @property
    def percent(self) -> bool:
        return self.scale == 100.0

    def name_on(self, dataset: str = "") -> str:
        """How the metric is called on a dataset (accuracy on HumanEval is pass@1)."""
        return "pass@1" if self.key == "accuracy" and dataset.startswith("humaneval") else self.label

    def title(self, dataset: str = "") -> str:
        """The name at the start of a heading: "Accuracy", but "pass@1", "ECE", "chrF" as they are written."""
        name = self.name_on(dataset)
        return name.capitalize() if name == "accuracy" else name

    def axis_label(self, dataset: str = "") -> str:
        return self.title(dataset) + (" (%)" if self.percent else "")

    def shown(self, value: float) -> float:
        return value * self.scale

    def format(self, value: object, signed: bool = False) -> str:
        """``61.23%`` for rates, ``21.40`` for BLEU/chrF points; ``-`` when missing."""
        if missing(value):
            return "-"
        number = self.shown(float(value))
        return (f"{number:+.2f}" if signed else f"{number:.2f}") + ("%" if self.percent else "")

    def delta(self, value: object, n_items: int) -> str:
        """A difference of this metric as shown everywhere, at its own resolution: a share of questions in percentage
        points to the digits its question count supports (:func:`points`); ECE, a mean of continuous confidences, in
        points with two decimals (0.04 pp is not "0 pp"); BLEU and chrF in their points."""
        if self.counted:
            return points(value, n_items)
        if missing(value):
            return "-"
        return f"{self.shown(float(value)):.2f}" + (" pp" if self.percent else "")


def _accuracy_sums(rows: Grouped) -> dict[str, object]:
    correct = rows.values("correct")
    graded = np.isfinite(correct)
    return {"n_graded": rows.count(graded), "sum_correct": rows.total(graded, correct)}


def _accuracy(sums: pd.DataFrame) -> dict[str, object]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"accuracy": sums["sum_correct"].to_numpy() / sums["n_graded"].to_numpy()}


def _ece_sums(rows: Grouped) -> dict[str, object]:
    """The confidence's sum and count, and ECE's bin sums over rows with both a grade and a confidence."""
    correct, confidence = rows.values("correct"), rows.values("confidence")
    confident = np.isfinite(confidence)
    keep = confident & np.isfinite(correct)
    bins = ece_bin_sums(rows.codes[keep], confidence[keep], correct[keep], rows.groups)
    return {
        "n_confidence": rows.count(confident),
        "sum_confidence": rows.total(confident, confidence),
        "bin_correct": list(bins[0]),
        "bin_confidence": list(bins[1]),
        "bin_count": list(bins[2]),
    }


def _ece(sums: pd.DataFrame) -> dict[str, object]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "ece": ece_from_sums(
                *(np.vstack(sums[part].to_numpy()) for part in ("bin_correct", "bin_confidence", "bin_count"))
            ),
            "mean_confidence": sums["sum_confidence"].to_numpy() / sums["n_confidence"].to_numpy(),
        }


def _corpus_sums(name: str) -> Callable[[Grouped], dict[str, object]]:
    """A corpus score's segments' sufficient statistics, summed per group (None where a group has none)."""

    def sums(rows: Grouped) -> dict[str, object]:
        column = f"{name}_stats"
        if column not in rows.frame or not rows.frame[column].notna().any():
            return {f"n_{column}": np.zeros(rows.groups, dtype=np.int64), column: [None] * rows.groups}
        has = rows.frame[column].notna().to_numpy()
        values = np.vstack(rows.frame[column].to_numpy()[has]).astype(float)
        totals = np.zeros((rows.groups, values.shape[1]))
        np.add.at(totals, rows.codes[has], values)
        counts = rows.count(has)
        return {f"n_{column}": counts, column: [row if n else None for row, n in zip(totals, counts)]}

    return sums


def _corpus(name: str) -> Callable[[pd.DataFrame], dict[str, object]]:
    """The corpus score (sacrebleu's own) of each group's summed statistics."""

    def finish(sums: pd.DataFrame) -> dict[str, object]:
        from dateeval.metrics.corpus import score_from_stats

        column = sums[f"{name}_stats"] if f"{name}_stats" in sums else pd.Series([None] * len(sums))
        return {
            name: np.array(
                [np.nan if stats is None else score_from_stats(name, [stats]) for stats in column], dtype=float
            )
        }

    return finish


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("accuracy", "accuracy", 100.0, True, _accuracy_sums, _accuracy, counted=True),
        Metric("ece", "ECE", 100.0, False, _ece_sums, _ece),
        Metric("bleu", "BLEU", 1.0, True, _corpus_sums("bleu"), _corpus("bleu"), per_item=False),
        Metric("chrf", "chrF", 1.0, True, _corpus_sums("chrf"), _corpus("chrf"), per_item=False),
    )
}

ACCURACY = ("accuracy",)  # every graded task's (pass@1 on HumanEval)
CALIBRATED = ("accuracy", "ece")  # answers with a confidence: ECE's
# The metrics a task's rows support, by the task kind every row records (its ``task`` column; as Inspect's
# @scorer(metrics=...)): each task module declares its benchmarks' metrics from here, and every reader asks
# :func:`dataset_metrics`, so the statistics know a dataset's metrics from its rows, without the task that wrote them.
KIND_METRICS: dict[str, tuple[str, ...]] = {
    "mcqa": CALIBRATED,
    "cot": CALIBRATED,
    "generation": ACCURACY,
    "gsm8k": CALIBRATED,
    "humaneval": ACCURACY,
    "translation": ("bleu", "chrf"),
}


def metric(key: str) -> Metric:
    return METRICS[key]


def missing(value: object) -> bool:
    """None, NaN and pandas' NA alike."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def counted(n: int, noun: str) -> str:
    """``1 question``, ``2 questions``: a count with its noun in the right number."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def percent(value: object) -> str:
    """A rate or share in [0, 1] as a percentage with two decimals (``-`` when missing)."""
    return "-" if missing(value) else f"{100 * float(value):.2f}%"


def cv_text(value: object, low: object, high: object, meaningful: object = True, noise_free: object = None) -> str:
    """A CV as people read it: the measured CV, then (accuracy) the CV without counting noise with its 95% interval
    (``variation.noise_free_cv``; the interval is that one's, never the measured CV's); no interval where there is
    none (zero width or missing); said to be not meaningful where its mean is near 0 (``variation.cv_meaningful``)."""
    shown = percent(value)
    interval = "" if missing(low) or missing(high) else f" [{percent(low)}, {percent(high)}]"
    if noise_free is not None and not missing(noise_free):
        shown += f" (without counting noise {percent(noise_free)}{interval})"
    else:
        shown += interval
    return shown if meaningful is not False or missing(value) else f"{shown} (not meaningful: mean near 0)"


# What a reader needs to know of each statistic, in one place: the pages' tooltips read these.
EXPLAIN = {
    "ece": "ECE (expected calibration error): answers grouped into 10 bins by confidence; the gap between each bin's mean "
    "confidence and its accuracy, weighted by its size. 0 = confidence means what it says. Debiased (Kumar, Liang & Ma "
    "2019): each bin's gap less the part its counting noise adds, which on few questions makes even a calibrated "
    "model look miscalibrated (the paper's plug-in ECE, on 50 questions, is 0.07-0.14 above a true 0). Its 95% "
    "interval (Curves) and the worst-to-best ECE delta's (Table 8) are given from 50 questions, where they covered "
    "the truth in at least 0.93 of simulated dates (docs/coverage.md); none below.",
    "cv": "CV (coefficient of variation): standard deviation / mean of the score across a factor's levels (e.g. the dates); "
    "a unit-free size of the variation, comparable across factors. Not meaningful where the mean is near 0 (fewer than "
    "5 right answers per level): there it measures counting noise. Counting noise inflates every measured CV on few "
    "questions, so accuracy also gets its CV without counting noise (the levels' variance from a two-way ANOVA of "
    "levels x questions) with a 95% interval for the CV of the levels' true rates (noncentral F; its coverage, 10-200 "
    "questions and 2-12 levels, is in docs/coverage.md). ECE's interval resamples the questions: how much its measured "
    "CV would move on other questions. No interval is shown where there is none.",
    "null": "Chance alone: shuffle each question's right/wrong answers across the dates (as if the date did nothing) and "
    "recompute the statistic, 200 times; 95% of shuffles stay below the band's edge. Worst-to-best over N dates grows "
    "with N even with no effect, so the delta is compared with the same statistic over the same dates.",
    "cochran": "Cochran's Q: a test that accuracy is the same on every date, on the same questions (paired); a small p says "
    "some dates differ.",
    "tau": "Kendall tau-b compares two rankings: 1 = the same order (ties included), -1 = reversed; ties count fairly. "
    "Two dates rank the models differently when any pair of models is ordered differently, a tie broken included. "
    "A date on which every model ties has no defined tau: its pairs are counted apart, not as the same order.",
    "top_k": "A date's top k is every model ranked k or better, ties sharing a rank (three models tied first are all in the "
    "top 1); consecutive dates differ when those models or their ranks differ. No name breaks a tie.",
}


def point_decimals(n_items: int) -> int:
    """Decimals a difference of rates over ``n_items`` questions deserves: one question is 100/n points, so 20
    questions get none (5 pp steps), up to 1,000 one, beyond that two."""
    return 0 if n_items <= 100 else 1 if n_items <= 1000 else 2


def points(value: object, n_items: int) -> str:
    """A difference of rates (fractions) in percentage points at the precision its number of questions supports."""
    return "-" if missing(value) else f"{100 * float(value):.{point_decimals(n_items)}f} pp"


def dataset_metrics(metrics: pd.DataFrame) -> list[str]:
    """The metrics a reader shows of a dataset's per-condition ``metrics``: those its rows' task kind declares
    (:data:`KIND_METRICS`; every one where the rows name no kind: rows stored before kinds were recorded) of which
    the rows hold a value, so an ECE the backend could not measure is no empty column."""
    declared: set[str] = set()
    for kind in metrics["task"].drop_duplicates() if "task" in metrics else [None]:
        declared.update(KIND_METRICS.get(None if missing(kind) else kind) or METRICS)
    return [m for m in METRICS if m in declared and m in metrics and metrics[m].notna().any()]
