"""The paper's headline figures, with where each is stated, to show beside a user's own numbers.

Only figures the paper states in its text are here (the per-cell tables are
not in the text we implement from). Each says which datasets and metric it
is about, so a page can put "the paper: up to 6% on MCQA (Table 1, §4)" next
to the same statistic computed from the user's store. Values are in the
metric's display unit: percentage points for accuracy, pass@1, ECE and CV;
points for BLEU and chrF.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dateeval import names
from dateeval.metrics import METRICS, cv_text, percent, points
from dateeval.results import descriptive
from dateeval.results.chance.chance import largest_of
from dateeval.results.variation import cv, cv_meaningful
from dateeval.schema import GENERATION_KINDS


@dataclass(frozen=True)
class PaperFigure:
    """One number from the paper: what it measures, on which kind of dataset, and where it is stated."""

    statistic: str  # "max_delta", "mean_delta", "cv", "week_delta", "inconsistent_confidence"
    kind: str  # "mcqa", "fewshot", "cot", "gsm8k", "humaneval", "translation"
    metric: str
    value: float
    where: str
    says: str


FIGURES = (
    PaperFigure(
        "max_delta",
        "mcqa",
        "accuracy",
        6.0,
        "Table 1, §4",
        "worst-to-best accuracy delta up to 6% (9 models on MMLU, ARC-C, GPQA)",
    ),
    PaperFigure(
        "mean_delta",
        "mcqa",
        "accuracy",
        2.52,
        "Table 1, §4",
        "mean worst-to-best accuracy delta 2.52% over models and datasets",
    ),
    PaperFigure("max_delta", "mcqa", "ece", 6.15, "Table 8, App. E", "worst-to-best ECE delta up to 6.15%"),
    PaperFigure(
        "mean_delta", "gsm8k", "accuracy", 7.75, "Table 2, §4", "mean GSM8K accuracy delta 7.75% (vs 2.52% on MCQA)"
    ),
    PaperFigure("max_delta", "gsm8k", "accuracy", 14.0, "Abstract, Table 2", "GSM8K accuracy delta up to 14%"),
    PaperFigure("mean_delta", "humaneval", "accuracy", 4.81, "Table 2, §4", "mean HumanEval pass@1 delta 4.81%"),
    PaperFigure("max_delta", "humaneval", "accuracy", 7.32, "Table 2, §4", "HumanEval pass@1 delta up to 7.32%"),
    PaperFigure(
        "mean_delta",
        "translation",
        "bleu",
        1.88,
        "Table 2, §4",
        "mean BLEU delta up to 1.88 (per language pair, WMT16 en-de/fi/cs)",
    ),
    PaperFigure("max_delta", "translation", "bleu", 2.84, "Abstract, Table 2", "BLEU delta up to 2.84"),
    PaperFigure(
        "mean_delta", "translation", "chrf", 1.33, "Table 2, §4", "mean chrF delta up to 1.33 (per language pair)"
    ),
    PaperFigure(
        "mean_delta",
        "fewshot",
        "accuracy",
        2.27,
        "Table 4, §5.4",
        "mean 5-shot accuracy delta 2.27% (vs 2.52% zero-shot)",
    ),
    PaperFigure(
        "cv",
        "mcqa",
        "accuracy",
        0.78,
        "Table 5, §5.5-5.6",
        "CV of accuracy over dates 0.78% (Llama 3.1 8B, MMLU): larger than batch size, "
        "precision and hardware, equal to rewording the system prompt",
    ),
    PaperFigure(
        "week_delta",
        "mcqa",
        "accuracy",
        4.0,
        "§5.2, Figure 3",
        "GPT-5.1 over one week (3-9 Dec 2025, date injected by the provider): "
        "accuracy varies by up to 4% (GPQA); 42 repeated runs were identical",
    ),
    PaperFigure(
        "inconsistent_confidence",
        "mcqa",
        "accuracy",
        88.86,
        "Table 7, App. E",
        "answers that change with the date have lower confidence, yet Gemma 3 4B still gives them 88.86%",
    ),
)


def kind(dataset: str, task: str | None = None) -> str:
    """Which of the paper's groups a dataset belongs to (chain of thought is compared with MCQA, Figure 4): by its rows'
    task kind (``gsm8k``, ``humaneval``, ``translation``; a user's own ``generation``, which has no paper figure),
    else by whether its name says exemplars (``dateeval.names``)."""
    if task in GENERATION_KINDS and task != "cot":
        return task
    return "fewshot" if names.shots(dataset) else "mcqa"


def beside(dataset: str, metric: str | None = None, task: str | None = None) -> list[PaperFigure]:
    """The paper's figures about the same kind of dataset (and metric, when given)."""
    return [f for f in FIGURES if f.kind == kind(dataset, task) and (metric is None or f.metric == metric)]


STATISTICS = {
    "max_delta": "Largest worst-to-best delta",
    "mean_delta": "Mean worst-to-best delta over models",
    "cv": "CV over dates (mean over models)",
    "week_delta": "Largest delta within 7 consecutive days",
    "inconsistent_confidence": "Confidence of answers that change with the date",
}


def _per_entry(dated: pd.DataFrame, statistic: str, metric: str) -> pd.Series:
    """One value per entry of a statistic over its dates, in the stored unit (fractions for rates)."""
    series = {entry: group.set_index("date")[metric].dropna().sort_index() for entry, group in dated.groupby("entry")}
    series = {entry: values for entry, values in series.items() if len(values) >= 2}
    if statistic in ("max_delta", "mean_delta"):
        return pd.Series({entry: np.ptp(values.to_numpy()) for entry, values in series.items()}, dtype=float)
    if statistic == "cv":
        return pd.Series({entry: float(cv(values.to_numpy())) for entry, values in series.items()}, dtype=float)
    if statistic == "week_delta":
        week = {
            entry: (values.rolling("7D").max() - values.rolling("7D").min()).max() for entry, values in series.items()
        }
        return pd.Series(week, dtype=float)
    return pd.Series(dtype=float)


def _chance(figure: PaperFigure, significance: pd.DataFrame, n_items: int) -> str:
    """What chance alone gives for the store's value of a delta statistic (accuracy only: its null is by permutation)."""
    if figure.metric != "accuracy" or significance.empty or figure.statistic not in ("max_delta", "mean_delta"):
        return "-"
    if figure.statistic == "max_delta":
        band = largest_of(significance["delta"].tolist(), significance["null_draws"].tolist())
        return f"up to {points(band['null_upper'], n_items)} in 95% of draws (largest of {len(significance)}; p = {band['p_value']:.3f})"
    return f"median {points(float(significance['null_median'].mean()), n_items)} (mean over {len(significance)} of each one's null median)"


def _ece_delta_interval(summary: pd.DataFrame | None, dataset: str, n_items: int) -> str:
    """The 95% interval of the largest worst-to-best ECE delta (Table 8's, ``bands.ece_difference_interval`` via the
    summary), or why there is none: an ECE delta read without it looks exact."""
    rows = (
        summary[(summary["dataset"] == dataset) & summary["ece_delta"].notna()]
        if summary is not None and "ece_delta_low" in summary
        else None
    )
    if rows is None or rows.empty:
        return ""
    largest = rows.loc[rows["ece_delta"].idxmax()]
    if pd.isna(largest["ece_delta_low"]):
        return " (no interval below 50 questions)"
    spec = METRICS["ece"]
    return (
        f" (95%: {spec.delta(largest['ece_delta_low'], n_items)} to {spec.delta(largest['ece_delta_high'], n_items)})"
    )


def yours(
    metrics: pd.DataFrame,
    dataset: str,
    table7: pd.DataFrame | None = None,
    significance: pd.DataFrame | None = None,
    task: str | None = None,
    summary: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The paper's figures about a dataset's kind beside the same statistic from the user's store.

    Beside each of yours: what chance alone gives for it (the permutation null of the same statistic, so a class
    does not read noise on 20 questions as "2.5x the paper's effect") and what it is measured on; the paper's
    context is in ``the_paper_says``. The largest ECE delta carries its 95% interval from ``summary`` (Table 8's). A statistic the store cannot give (e.g. a single date) shows ``-``.
    """
    dated = descriptive.dated(metrics[metrics["dataset"] == dataset])
    significance = (
        significance
        if significance is not None
        else pd.DataFrame(columns=["delta", "null_draws", "null_median", "n_items"])
    )
    n_items = int(dated["n_items"].max()) if "n_items" in dated and len(dated) else 0
    context = (
        f"{dated['entry'].nunique()} entries, {n_items} questions x {dated['date'].nunique()} dates"
        if len(dated)
        else "-"
    )
    rows = []
    for figure in beside(dataset, task=task):
        spec = METRICS[figure.metric]
        if figure.statistic == "inconsistent_confidence":
            values = (
                table7["inconsistent_confidence"].dropna()
                if table7 is not None and len(table7)
                else pd.Series(dtype=float)
            )
            mine, theirs = (percent(values.max()) if len(values) else "-"), f"{figure.value:.2f}%"
        else:
            values = (
                _per_entry(dated, figure.statistic, figure.metric) if figure.metric in dated else pd.Series(dtype=float)
            )
            value = values.mean() if figure.statistic in ("mean_delta", "cv") else values.max() if len(values) else None
            near_zero = (
                figure.statistic == "cv"
                and len(dated)
                and not cv_meaningful(float(dated[figure.metric].mean()), n_items)
            )
            mine = cv_text(value, None, None, not near_zero) if figure.statistic == "cv" else spec.delta(value, n_items)
            if figure.metric == "ece" and figure.statistic == "max_delta" and value is not None:
                mine += _ece_delta_interval(summary, dataset, n_items)
            theirs = f"{figure.value:.2f}" + (
                " pp" if spec.percent and figure.statistic != "cv" else "%" if figure.statistic == "cv" else ""
            )
        rows.append(
            {
                "statistic": f"{STATISTICS[figure.statistic]} ({spec.name_on(dataset)})",
                "yours": mine,
                "chance_alone": _chance(figure, significance, n_items),
                "yours_on": context,
                "the_paper": theirs,
                "where": figure.where,
                "the_paper_says": figure.says,
            }
        )
    return pd.DataFrame(
        rows, columns=["statistic", "yours", "chance_alone", "yours_on", "the_paper", "where", "the_paper_says"]
    )
