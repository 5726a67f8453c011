"""One registry of metrics and of how every number is shown: the CLI, the report and every explorer page read it.

Stored values keep their natural unit (rates in [0, 1], BLEU and chrF on
0-100); what a person reads is decided here once: rates as percentages with
two decimals, corpus scores as points, p-values with three decimals,
columns under human names. ECE has one implementation (bin sums per group),
used for a single list, for many groups at once and for bootstrap matrices.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

ECE_BINS = 10


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
        from dateeval.corpus import score_from_stats

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
    (``inference.noise_free_cv``; the interval is that one's, never the measured CV's); no interval where there is
    none (zero width or missing); said to be not meaningful where its mean is near 0 (``inference.cv_meaningful``)."""
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


# --- ECE: one implementation ------------------------------------------------------------------------------------


def _bin_index(confidence: np.ndarray, bins: int) -> np.ndarray:
    """Bin m holds confidences in ((m-1)/M, m/M]; a confidence of exactly 0 falls in the first bin (paper App. C.1)."""
    return np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)


def ece_bin_sums(
    codes: np.ndarray, confidence: np.ndarray, correct: np.ndarray, groups: int, bins: int = ECE_BINS
) -> tuple[np.ndarray, ...]:
    """Per group and bin: sum of correct, sum of confidence, count (each groups x bins).

    These sums are all ECE needs, so they can be stored and added up instead of the rows.
    """
    index = codes * bins + _bin_index(confidence, bins)
    shape = (groups, bins)
    return (
        np.bincount(index, weights=correct, minlength=groups * bins).reshape(shape),
        np.bincount(index, weights=confidence, minlength=groups * bins).reshape(shape),
        np.bincount(index, minlength=groups * bins).reshape(shape),
    )


def ece_from_sums(
    sum_correct: np.ndarray, sum_confidence: np.ndarray, count: np.ndarray, debiased: bool = True
) -> np.ndarray:
    """ECE from bin sums (last axis = bins); NaN without rows.

    ``debiased`` (what every page prints): Kumar, Liang & Ma (2019)'s debiased estimator in closed form. Each bin's
    plug-in gap |acc - conf| is biased upward by the counting noise of its accuracy (a bin of 3 answers at 50% shows a
    gap near 0.3 even when calibrated), so each bin's term is 2|gap| - E|N(gap, acc (1 - acc) / n_bin)|: the plug-in
    less its own bias at the measured gap. The sum is floored at 0. ``debiased=False``: the paper's App. C.1 plug-in,
    sum over bins of |correct - confidence| / n (what the bias shrinks with thousands of questions).
    """
    gap_sum = sum_correct - sum_confidence
    total = count.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if not debiased:
            return np.abs(gap_sum).sum(-1) / total
        filled = count > 0
        size = np.where(filled, count, 1)
        accuracy, gap = sum_correct / size, gap_sum / size
        spread = np.sqrt(np.clip(accuracy * (1 - accuracy), 0, None) / size)
        ratio = np.where(spread > 0, gap / np.where(spread > 0, spread, 1), 0.0)
        expected = np.where(
            spread > 0,
            spread * math.sqrt(2 / math.pi) * np.exp(-(ratio**2) / 2) + gap * special.erf(ratio / math.sqrt(2)),
            np.abs(gap),
        )
        terms = np.where(filled, count * (2 * np.abs(gap) - expected), 0.0)
        return np.maximum(terms.sum(-1), 0.0) / total


def ece_by_code(
    codes: np.ndarray,
    confidence: np.ndarray,
    correct: np.ndarray,
    bins: int = ECE_BINS,
    groups: int | None = None,
    debiased: bool = True,
) -> np.ndarray:
    """ECE of every group (``codes`` = dense group numbers) in one vectorised pass.

    Rows without a confidence or a grade (generated answers, translations)
    are left out; a group with none left has no ECE (NaN).
    """
    groups = groups or int(codes.max()) + 1
    keep = np.isfinite(confidence) & np.isfinite(correct)
    return ece_from_sums(*ece_bin_sums(codes[keep], confidence[keep], correct[keep], groups, bins), debiased=debiased)


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS, debiased: bool = True) -> float:
    """Expected calibration error of one list of predictions (:func:`ece_from_sums`: debiased, or the paper's App. C.1
    plug-in); NaN when empty."""
    confidence, correct = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    if confidence.size == 0:
        return float("nan")
    return float(
        ece_by_code(np.zeros(confidence.size, dtype=np.int64), confidence, correct, bins, groups=1, debiased=debiased)[
            0
        ]
    )


def ece_rows(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS, debiased: bool = True) -> np.ndarray:
    """ECE of every row of (... x items) matrices at once (levels, or bootstrap resamples x levels)."""
    shape = confidence.shape[:-1]
    rows = int(np.prod(shape))
    codes = np.repeat(np.arange(rows, dtype=np.int64), confidence.shape[-1])
    flat = ece_by_code(
        codes,
        confidence.reshape(-1).astype(float),
        correct.reshape(-1).astype(float),
        bins,
        groups=rows,
        debiased=debiased,
    )
    return flat.reshape(shape)


def resampled_bin_sums(
    confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray, bins: int = ECE_BINS
) -> np.ndarray:
    """ECE's bin sums (sum of correct, of confidence, count) of every row of (levels x items) matrices under every
    bootstrap resample at once: 3 x levels x resamples x bins.

    ``weights`` (resamples x items) says how often each item was drawn; the
    bin sums of all resamples are then one matrix product per bin, so nothing
    loops over the resamples.
    """
    index, kind = _bin_index(confidence, bins), weights.dtype  # float32 weights halve the work of the products
    correct, confidence = correct.astype(kind), confidence.astype(kind)
    sums = np.zeros((3, *confidence.shape[:-1], weights.shape[0], bins), dtype=kind)
    for m in range(bins):
        mask = (index == m).astype(kind)
        for which, values in enumerate((mask * correct, mask * confidence, mask)):
            sums[which, ..., m] = values @ weights.T
    return sums


def ece_resampled(
    confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray, bins: int = ECE_BINS, debiased: bool = True
) -> np.ndarray:
    """ECE of every row of (levels x items) matrices under every bootstrap resample (:func:`resampled_bin_sums`): levels x resamples."""
    return ece_from_sums(*resampled_bin_sums(confidence, correct, weights, bins), debiased=debiased)


# --- Table columns: names and units -------------------------------------------------------------------------------

PART = {
    "min": "min",
    "mean": "mean",
    "max": "max",
    "delta": "delta (worst to best)",
    "worst_date": "worst date",
    "best_date": "best date",
}
# Columns that are not metrics: their label, and whether they hold a share/rate (shown as %) or a p-value.
PLAIN = {
    "entry": "Model",
    "dataset": "Dataset",
    "n_items": "Items",
    "n_dates": "Dates",
    "task_key": "Task settings",
    "n_correct": "Dates right",
    "n_wrong": "Dates wrong",
    "changes": "Answer changes",
    "n_predictions": "Distinct answers",
    "consistent": "Same answer every date",
    "answer": "Correct answer",
    "item_id": "Question",
    "mean_score": "Mean sentence chrF",
    "levels": "Levels",
    "factor": "Factor",
    "format": "Few-shot format",
    "spearman": "Spearman ρ",
    "pearson": "Pearson r",
    "cochran_q": "Cochran's Q",
    "runs": "Runs",
    "prediction_changes": "Answer changes",
    "exceeds_chance": "Date effect beyond chance (Q, permutation)",
    "accuracy_cv_meaningful": "CV meaningful (mean not near 0)",
    "n_inconsistent": "Inconsistent items",
    "comparison": "Comparison",
    "a": "A",
    "b": "B",
    "statistic": "Statistic",
    "yours": "Yours",
    "the_paper": "The paper's",
    "where": "Where in the paper",
    "the_paper_says": "The paper says",
    "dates": "Dates sampled",
    "delta_ratio": "Delta ratio",
    "cv_ratio": "CV ratio",
}
PERCENT = {
    "delta": "Accuracy delta (pp)",
    "null_median": "Chance delta, median (pp)",
    "null_upper": "Chance delta, 95% (pp)",
    "delta_null_median": "Chance delta, median (pp)",
    "delta_null_upper": "Chance delta, 95% (pp)",
    "mean_confidence": "Mean confidence (%)",
    "min_confidence": "Lowest confidence (%)",
    "consistent_confidence": "Confidence, consistent (%)",
    "inconsistent_confidence": "Confidence, inconsistent (%)",
    "max_confidence_difference": "Largest confidence difference (%)",
    "same_direction": "Same direction (%)",
    "delta_within": "Delta within tolerance (%)",
    "cv_within": "CV within tolerance (%)",
    "accuracy_cv": "CV of accuracy (%)",
    "accuracy_cv_noise_free": "CV without counting noise (%)",
    "accuracy_cv_low": "CV without counting noise, 95% low (%)",
    "accuracy_cv_high": "CV without counting noise, 95% high (%)",
    "ece_cv": "CV of plug-in ECE (%)",
    "ece_delta_low": "ECE delta, 95% low (pp)",
    "ece_delta_high": "ECE delta, 95% high (pp)",
}
P_VALUES = {
    "p_value": "p-value",
    "delta_p_value": "p-value (delta vs chance)",
    "cochran_p": "Cochran's Q p-value (chi-square)",
    "cochran_permutation_p": "Cochran's Q p-value (permutation)",
}


@dataclass(frozen=True)
class Column:
    """How one table column is shown: its heading and its kind (percent, points, p, number, text)."""

    label: str
    kind: str
    scale: float = 1.0

    def format(self, value: object) -> str:
        if missing(value):
            return "-"
        if self.kind == "p":
            return f"{float(value):.3f}"
        if self.kind in ("percent", "points", "number"):
            text = f"{self.scale * float(value):.2f}"
            return (
                text.removeprefix("-") if float(text) == 0 else text
            )  # a value that rounds to 0 is "0.00", never "-0.00"
        return str(value)


def column(name: str, dataset: str = "") -> Column:
    """The heading and unit of a column of any table dateeval makes (metrics, summaries, statistics)."""
    for prefix, label in (("no_date_", "no date"), ("template_default_", "template's own date")):
        if name.startswith(prefix) and name[len(prefix) :] in METRICS:
            spec = METRICS[name[len(prefix) :]]
            return Column(
                f"{spec.title(dataset)}, {label}" + (" (%)" if spec.percent else ""),
                "percent" if spec.percent else "points",
                spec.scale,
            )
    if name in METRICS:
        spec = METRICS[name]
        return Column(spec.axis_label(dataset), "percent" if spec.percent else "points", spec.scale)
    for key, spec in METRICS.items():
        part = name.removeprefix(f"{key}_")
        if part != name and part in PART:
            heading = f"{spec.title(dataset)} {PART[part]}"
            if part.endswith("date"):
                return Column(heading, "text")
            unit = (
                (" (pp)" if part == "delta" else " (%)") if spec.percent else ""
            )  # a difference of rates is in percentage points
            return Column(heading + unit, "percent" if spec.percent else "points", spec.scale)
    if name in PERCENT:
        return Column(PERCENT[name], "percent", 100.0)
    if name in P_VALUES:
        return Column(P_VALUES[name], "p")
    if name in PLAIN:
        return Column(PLAIN[name], "text")
    return Column(name.replace("_", " ").capitalize(), "number")


def for_display(table: pd.DataFrame, dataset: str = "") -> pd.DataFrame:
    """A copy with rates scaled to percent and columns under their human names (numbers stay numbers)."""
    out = table.copy()
    for name in table.columns:
        spec = column(name, dataset)
        if spec.scale != 1.0 and out[name].dtype.kind in "fiu":
            out[name] = out[name].astype(float) * spec.scale
        if out[name].dtype.kind == "f":  # what rounds to 0 at the digits shown is 0, never "-0.00"
            out[name] = out[name].mask(out[name].round(3 if spec.kind == "p" else 2) == 0, 0.0)
    return out.rename(columns={name: column(name, dataset).label for name in table.columns})


def on_screen(table: pd.DataFrame, dataset: str = "") -> pd.DataFrame:
    """What a page shows of a table (:func:`for_display`), where a column with gaps becomes display text so a gap
    reads ``-``, not "None": the one transformation between the results layer and the screen."""
    shown = for_display(table, dataset)
    for name in table.columns:
        spec = column(name, dataset)
        if shown[spec.label].dtype.kind == "f" and shown[spec.label].isna().any():
            shown[spec.label] = table[name].map(spec.format)
        elif shown[spec.label].dtype == object and shown[spec.label].map(missing).any():
            shown[spec.label] = shown[spec.label].map(lambda value: "-" if missing(value) else value)
    return shown


def formatted(table: pd.DataFrame, dataset: str = "") -> pd.DataFrame:
    """Every value as display text (reports, CLI): percentages, points, p-values, ``-`` for missing."""
    out = pd.DataFrame(index=table.index)
    for name in table.columns:
        spec = column(name, dataset)
        out[spec.label] = (
            table[name].map(spec.format)
            if spec.kind != "text"
            else table[name].map(lambda v: "-" if missing(v) else str(v))
        )
    return out
