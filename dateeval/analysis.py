"""Metrics and comparisons computed from stored per-item rows, never from anything else.

Everything here takes a pandas frame read from the store and is vectorised,
so the CLI summary, the explorer and exported tables all agree by
construction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ECE_BINS = 10
# Rows that share these columns were produced the same way except for the condition.
ENTRY = ["model", "dtype", "device", "model_key", "dataset", "task_key", "system_prompt"]


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> float:
    """Expected calibration error with equal-width bins (paper App. C.1).

    Bin m holds confidences in ((m-1)/M, m/M]; a confidence of exactly 0
    falls in the first bin.
    """
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if confidence.size == 0:
        return float("nan")
    index = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for m in range(bins):
        in_bin = index == m
        if in_bin.any():
            total += in_bin.sum() / confidence.size * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return float(total)


def entry_label(frame: pd.DataFrame) -> pd.Series:
    """How a leaderboard entry is named: the model, with its precision and device."""
    return frame["model"] + " (" + frame["dtype"] + ", " + frame["device"] + ")"


def common_items(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep only items scored under every condition of their entry, so conditions compare like with like."""
    if frame.empty:
        return frame
    per_condition = frame.groupby(ENTRY + ["item_id"], dropna=False)["condition_key"].nunique().rename("n_conditions").reset_index()
    conditions = frame.groupby(ENTRY, dropna=False)["condition_key"].nunique().rename("n_total").reset_index()
    keep = per_condition.merge(conditions, on=ENTRY)
    keep = keep[keep["n_conditions"] == keep["n_total"]][ENTRY + ["item_id"]]
    return frame.merge(keep, on=ENTRY + ["item_id"])


def condition_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """Accuracy, ECE and mean confidence per entry x condition, on the items common to all conditions."""
    columns = ENTRY + ["entry", "condition", "date_mode", "date", "n_items", "accuracy", "ece", "mean_confidence"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = common_items(frame)
    group = ENTRY + ["condition", "date_mode", "date"]
    metrics = (
        frame.groupby(group, dropna=False)
        .apply(
            lambda g: pd.Series(
                {
                    "n_items": len(g),
                    "accuracy": g["correct"].mean(),
                    "ece": ece(g["confidence"].to_numpy(), g["correct"].to_numpy()),
                    "mean_confidence": g["confidence"].mean(),
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    metrics["n_items"] = metrics["n_items"].astype(int)
    metrics["entry"] = entry_label(metrics)
    return metrics[columns].sort_values(ENTRY + ["date_mode", "date"], ignore_index=True)


def _extremes(dated: pd.DataFrame, metric: str, higher_is_better: bool) -> dict[str, object]:
    values = dated[metric].to_numpy()
    best = int(np.argmax(values) if higher_is_better else np.argmin(values))
    worst = int(np.argmin(values) if higher_is_better else np.argmax(values))
    return {
        f"{metric}_min": float(values.min()),
        f"{metric}_mean": float(values.mean()),
        f"{metric}_max": float(values.max()),
        f"{metric}_delta": float(values.max() - values.min()),
        f"{metric}_worst_date": dated["date"].iloc[worst],
        f"{metric}_best_date": dated["date"].iloc[best],
    }


def summarize(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per entry x dataset: min/mean/max and worst-to-best delta over dates (Tables 1 and 8), plus baselines (Table 9)."""
    rows = []
    for keys, group in metrics.groupby(ENTRY + ["entry"], dropna=False, sort=True):
        row = dict(zip(ENTRY + ["entry"], keys))
        dated = group[group["date_mode"] == "date"].sort_values("date")
        row["n_dates"] = len(dated)
        row["n_items"] = int(group["n_items"].iloc[0])
        if len(dated):
            row.update(_extremes(dated, "accuracy", higher_is_better=True))
            row.update(_extremes(dated, "ece", higher_is_better=False))
        for mode, name in (("none", "no_date"), ("default", "template_default")):
            baseline = group[group["date_mode"] == mode]
            row[f"{name}_accuracy"] = float(baseline["accuracy"].iloc[0]) if len(baseline) else None
            row[f"{name}_ece"] = float(baseline["ece"].iloc[0]) if len(baseline) else None
        rows.append(row)
    return pd.DataFrame(rows)
