"""Metrics and comparisons computed from stored per-item rows, never from anything else.

Everything here takes a pandas frame read from the store and is vectorised,
so the CLI summary, the explorer and exported tables all agree by
construction.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from dateeval.metrics import METRICS as REGISTRY
from dateeval.metrics import dataset_metrics
from dateeval.schema import group_codes as _codes
from dateeval.schema import ENTRY, ENTRY_KEY


def entry_label(frame: pd.DataFrame) -> pd.Series:
    """How a leaderboard entry is named: the model with its precision and device (and the GPU's name on GPUs).

    One model run on one dataset under two task settings (e.g. ``--label-style auto`` and ``label``) is two
    entries, so those labels also name the settings; otherwise they would be averaged into one. Built once per
    distinct combination and mapped back, so naming 18 million rows stays cheap.
    """
    model = ["model", "dtype", "device"] + (["hardware"] if "hardware" in frame else [])
    settings = ["dataset", "task_key"] if {"dataset", "task_key"} <= set(frame) else []
    codes = _codes(frame, model + settings)
    unique = frame.iloc[np.unique(codes, return_index=True)[1]]
    unique = unique.astype(
        {c: object for c in unique.columns if isinstance(unique[c].dtype, pd.CategoricalDtype)}
    )  # text, to join
    hardware = unique["hardware"].astype(str) if "hardware" in unique else unique["device"]
    device = unique["device"].where(unique["device"] == "cpu", unique["device"] + ": " + hardware)
    labels = unique["model"] + " (" + unique["dtype"] + ", " + device + ")"
    if settings:
        ambiguous = unique.groupby(model + ["dataset"], dropna=False)["task_key"].transform("nunique") > 1
        named = (
            unique["label_variant"].fillna(unique["task_key"])
            if "label_variant" in unique
            else unique["task_key"].str.slice(0, 8)
        )
        labels = labels.where(~ambiguous, labels + " [task " + named.astype(str) + "]")
    return pd.Series(labels.to_numpy()[codes], index=frame.index, dtype=object)


def common_items(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep only items scored under every condition of their entry, so conditions compare like with like."""
    if frame.empty:
        return frame
    entry, condition = _codes(frame, ENTRY_KEY), _codes(frame, ENTRY_KEY + ["condition_key"])
    item = pd.factorize(frame["item_id"])[0].astype(np.int64)
    n_items = item.max() + 1
    pairs = np.unique(condition * n_items + item)  # distinct (condition, item)
    entry_of_condition = np.zeros(condition.max() + 1, dtype=np.int64)
    entry_of_condition[condition] = entry
    pair_entry, pair_item = entry_of_condition[pairs // n_items], pairs % n_items
    coverage = np.unique(pair_entry * n_items + pair_item, return_counts=True)
    conditions_per_entry = np.bincount(entry_of_condition, minlength=entry.max() + 1)
    full = coverage[0][coverage[1] == conditions_per_entry[coverage[0] // n_items]]
    if len(full) == len(coverage[0]):
        return frame  # every condition holds every item (the common, fast case)
    return frame[np.isin(entry * n_items + item, full)]


def template_default_dates(frame: pd.DataFrame) -> dict[str, pd.Timestamp]:
    """The date each entry's template uses when left alone (e.g. Llama 3.1's 26 Jul 2024), where it has one."""
    rows = frame[(frame["date_mode"] == "default") & frame["date_text"].notna()]
    if rows.empty:
        return {}
    first = rows.assign(entry=entry_label(rows)).groupby("entry")["date_text"].first()
    parsed = {entry: pd.to_datetime(text, errors="coerce") for entry, text in first.items()}
    return {entry: day for entry, day in parsed.items() if not pd.isna(day)}


def extremes(dated: pd.DataFrame, metric: str, higher_is_better: bool = True) -> dict[str, object]:
    """Min, mean, max, worst-to-best delta and the worst and best dates of ``metric`` over ``dated``'s rows."""
    dated = dated[dated[metric].notna()]
    values = dated[metric].to_numpy()
    best = int(np.argmax(values) if higher_is_better else np.argmin(values))
    worst = int(np.argmin(values) if higher_is_better else np.argmax(values))
    return {
        f"{metric}_min": float(values.min()),
        f"{metric}_mean": float(values.mean()),
        f"{metric}_max": float(values.max()),
        f"{metric}_delta": float(values.max() - values.min()),
        # A flat line has no worst or best date: naming one would point at noise that is not there.
        f"{metric}_worst_date": dated["date"].iloc[worst] if np.ptp(values) > 0 else None,
        f"{metric}_best_date": dated["date"].iloc[best] if np.ptp(values) > 0 else None,
    }


def summarize(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per entry x dataset: min/mean/max and worst-to-best delta over dates (Tables 1, 2 and 8), plus baselines (Table 9).

    Every metric the dataset has gets its columns (``accuracy_delta``,
    ``bleu_delta``...); a metric it lacks (ECE of a translation) gets none.
    """
    rows = []
    for keys, group in metrics.groupby(ENTRY + ["entry"], dropna=False, sort=True):
        row = dict(zip(ENTRY + ["entry"], keys))
        dated = group[group["factor"] == "date"].sort_values("date")
        row["n_dates"] = len(dated)
        row["n_items"] = int(group["n_items"].iloc[0])
        for metric in dataset_metrics(group):
            if dated[metric].notna().any():
                row.update(extremes(dated, metric, REGISTRY[metric].higher_is_better))
            for factor, name in (("no-date", "no_date"), ("template-default", "template_default")):
                baseline = group[group["factor"] == factor]  # by factor: server-clock rows are dated, not a baseline
                row[f"{name}_{metric}"] = float(baseline[metric].iloc[0]) if len(baseline) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def dated(metrics: pd.DataFrame) -> pd.DataFrame:
    """Only the date sweep's conditions, with ``date`` as a real date for plotting and sorting."""
    out = metrics[metrics["factor"] == "date"].copy()
    out["date"] = pd.to_datetime(out["date"])
    return out.sort_values(["entry", "dataset", "date"], ignore_index=True)


def date_range(metrics: pd.DataFrame, dataset: str) -> tuple[dt.date, dt.date] | None:
    """The first and last stored date of a dataset's date sweeps (every entry): the explorer's default range."""
    days = pd.to_datetime(metrics.loc[(metrics["dataset"] == dataset) & (metrics["factor"] == "date"), "date"])
    return (days.min().date(), days.max().date()) if len(days) else None


def ranks(metrics: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Rank of each entry on each date and dataset (1 = best; ties share the best rank), Figure 1b."""
    frame = dated(metrics)
    frame["rank"] = frame.groupby(["dataset", "date"])[metric].rank(ascending=False, method="min").astype(int)
    return frame


TAU_COLUMNS = ["date_a", "date_b", "tau", "defined", "same_order"]


def _pair_signs(metrics: pd.DataFrame, dataset: str, metric: str) -> tuple[pd.Index, np.ndarray]:
    """Each date's ranking of the entries as the signs (-1, 0, 1) of its entry pairs' differences (dates x pairs).

    A sign is exact: two scores tie only when they are equal floats, and the same counts over the same items give
    equal floats (IEEE division is correctly rounded). So every comparison below is on integers.
    """
    table = (
        dated(metrics[metrics["dataset"] == dataset])
        .pivot_table(index="date", columns="entry", values=metric)
        .dropna(axis=0)
    )
    first, second = np.triu_indices(table.shape[1], k=1)
    values = table.to_numpy()
    return table.index, np.sign(values[:, first] - values[:, second]).astype(np.int64)


def kendall_taus(metrics: pd.DataFrame, dataset: str, metric: str = "accuracy") -> pd.DataFrame:
    """Kendall tau-b between the entry rankings of every pair of dates (needs at least two entries).

    Vectorised over all pairs: each date's ranking becomes the signs of its pairwise differences; tau-b is their
    dot product over the square root of the product of their non-zero counts, all integers, so 366 dates (66,795
    pairs) take milliseconds. ``same_order`` is exact: the two dates' sign vectors are identical (the same weak order,
    ties included), never a float compared with 1; there ``tau`` is exactly 1. A date on which every entry ties has
    no defined tau with any date: ``defined`` is False, ``tau`` NaN, and the pair is neither same nor reordered.
    """
    return _taus(*_pair_signs(metrics, dataset, metric))


def reorder_share(values: np.ndarray) -> float:
    """:func:`reordering`'s share of a dates x entries array of scores (or right answers: integers compare exactly)."""
    values = np.asarray(values)
    first, second = np.triu_indices(values.shape[1], k=1)
    return reordering(
        _taus(pd.RangeIndex(len(values)), np.sign(values[:, first] - values[:, second]).astype(np.int64))
    )["share"]


def _taus(index: pd.Index, signs: np.ndarray) -> pd.DataFrame:
    """:func:`kendall_taus` of dates' rankings given as the signs of their entry pairs' differences (dates x pairs)."""
    if signs.shape[1] == 0:
        return pd.DataFrame(columns=TAU_COLUMNS)
    dot = signs @ signs.T
    nonzero = np.count_nonzero(signs, axis=1)
    a, b = np.triu_indices(len(signs), k=1)
    dot, n_a, n_b = dot[a, b], nonzero[a], nonzero[b]
    defined = (n_a > 0) & (n_b > 0)
    same = (
        defined & (dot == n_a) & (n_a == n_b)
    )  # dot <= agreeing non-zero places <= min(n_a, n_b): equality iff identical
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(same, 1.0, np.where(defined, dot / np.sqrt(n_a * n_b), np.nan))
    return pd.DataFrame({"date_a": index[a], "date_b": index[b], "tau": tau, "defined": defined, "same_order": same})


def reordering(taus: pd.DataFrame) -> dict[str, float | int]:
    """How often two dates rank the entries differently, from :func:`kendall_taus`: counts and the share.

    The share is over the pairs whose tau is defined (neither date ties every entry); a tie on one date that is
    broken on the other is a different order. Pairs with a date that ties every entry are counted apart
    (``n_undefined``), never as "same order".
    """
    defined = int(taus["defined"].sum()) if len(taus) else 0
    reordered = int((taus["defined"] & ~taus["same_order"]).sum()) if len(taus) else 0
    return {
        "n_pairs": len(taus),
        "n_defined": defined,
        "n_undefined": len(taus) - defined,
        "n_reordered": reordered,
        "share": reordered / defined if defined else float("nan"),
        "mean_tau": float(taus.loc[taus["defined"], "tau"].mean()) if defined else float("nan"),
    }


def reordering_words(found: dict) -> str:
    """:func:`reordering` in one sentence with its counts (what the Leaderboard and Overview state under the share)."""
    if not found["n_defined"]:
        return f"No date pair has a defined order: every model ties on at least one date of each of the {found['n_pairs']:,} pairs."
    undefined = (
        f"; {found['n_undefined']:,} pairs undefined (every model tied on a date of the pair), left out"
        if found["n_undefined"]
        else ""
    )
    return (
        f"{found['n_reordered']:,} of {found['n_defined']:,} date pairs rank the models differently (a tie broken counts as a "
        f"change; Kendall tau-b < 1){undefined}."
    )


def top_k_reorders(metrics: pd.DataFrame, dataset: str, k: int, metric: str = "accuracy") -> float:
    """Share of consecutive date pairs whose top k differ, ties kept as ties.

    A date's top k is every entry ranked k or better (rank = 1 + the entries strictly ahead, so tied entries share
    a rank and all of them enter) with its rank; two dates have the same top k when those are identical. No name
    breaks a tie: three entries tied first are a different top 1 from one entry alone in front.
    """
    frame = ranks(metrics[metrics["dataset"] == dataset], metric)
    frame = frame[frame["rank"] <= k]
    tops = frame.assign(placed=list(zip(frame["entry"], frame["rank"]))).groupby("date")["placed"].agg(frozenset)
    if len(tops) < 2:
        return float("nan")
    return float(np.mean([a != b for a, b in zip(tops.iloc[:-1], tops.iloc[1:])]))


def first_divergence(first: str, second: str) -> int | None:
    """Where two outputs stop agreeing (character offset), None when identical: the start of the paper's cascade (§5.3)."""
    if first == second:
        return None
    return next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
