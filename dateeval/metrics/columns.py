"""How every table column is shown: its heading, its unit and its digits, for the pages, the CLI and the report
(stored values keep their natural unit; what a person reads is decided here once)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dateeval.metrics import METRICS, missing

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
