"""Sparse sweeps against dense ones (issue 46): coverage, half-width and cost of the per-date estimates, on real stores.

Each dense entry (every question on every date) is the known truth. Many times over, the sparse design
(``dateeval.sparse``: the no-date baseline dense and the design's pilot, the other cells drawn with probabilities that follow
each question's propensity) is drawn from it with a new seed, exactly as ``dateeval run --budget`` draws, and the
estimator ``dateeval.results.sparse.estimated.difference_estimates`` gives each drawn date's value and interval. Reported per
entry and budget: the share of (date, draw) pairs whose interval covers the dense value, the median and largest
half-width, and the share of the grid scored. Beside it, at the same budget:

* ``uniform cells + estimator``: the same estimator with the drawn cells' probabilities all equal (no propensity);
* ``uniform questions``: each drawn date scores the budget's share of questions at random, its plain mean with the
  Wilson interval corrected for the finite population (what sampling questions blindly gives).

    .venv/bin/python bench/sparse_coverage.py STORE [--budgets 0.12,0.15,0.2,0.3] [--draws 200] [--dataset mmlu]
    .venv/bin/python bench/sparse_coverage.py STORE --paper      # paper scale (14,042 x 366), resampled from each entry's questions
    .venv/bin/python bench/sparse_coverage.py --simulate         # planted flip structures (``simulate``), no store needed
    .venv/bin/python bench/sparse_coverage.py [STORE | --simulate] --robust   # the date-robust score's interval
    .venv/bin/python bench/sparse_coverage.py --simulate --verdict   # the date-effect test's size and power
    .venv/bin/python bench/sparse_coverage.py --simulate --compare   # model against model: the paired difference

``--paper`` builds a paper-scale entry from each dense one's measured flip structure: 14,042 questions drawn with
replacement from its questions, each keeping its own grade, its own share of dates on which the grade differs (drawn
anew, independently per date) and its own top-two margins (a real date's, at random), and prints the smallest budget
at which every drawn date's half-width is at most 1 point, with the coverage there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dateeval import sparse
from dateeval.results.chance import chance, sparse_chance
from dateeval.results.sparse import estimated
from dateeval.results.robust import robust
from dateeval.results import variation
from dateeval.results.sparse.estimated import Z, difference_estimates, sparse_robust
from dateeval.results.sparse.replay import replay
from dateeval.schema import with_factor
from dateeval.store import Store


def dense_entries(root: str, dataset: str | None) -> dict[tuple[str, str], dict]:
    """Every entry of the store with its date grid: keys (sorted by date), items, correct and margin matrices, and
    where it was swept, its no-date baseline's grades and margins (``baseline``, ``baseline_margin``; else None)."""
    store, parts = Store(root), []
    for path in store.files():  # file by file: each entry's rows whole, whatever the others hold
        part, problems = store.read(
            columns=["model", "dtype", "dataset", "condition_key", "date_mode", "date", "item_id", "correct", "probs"],
            paths=[path],
            optional=["factor"],
        )
        if problems.corrupted:
            raise SystemExit(f"damaged units: {problems.corrupted[:2]}")
        parts.append(part)
    frame = with_factor(pd.concat(parts, ignore_index=True))  # units written before the factor column have it derived
    entries = {}
    for (model, dtype, name), rows in frame.groupby(["model", "dtype", "dataset"]):
        if dataset and name != dataset:
            continue
        dated = rows[rows["factor"].eq("date")]
        dates = dated.groupby("condition_key")["date"].first().sort_values()
        items = sorted(dated["item_id"].unique())
        correct, margin = _grid(dated, list(dates.index), items)
        if correct is None or len(dates) <= 2 * sparse.PILOT + 1:
            print(f"skipped {model} {dtype} {name}: not dense", file=sys.stderr)
            continue
        none = rows[rows["factor"].eq("no-date")]
        baseline, baseline_margin = _grid(none, list(none["condition_key"].unique()[:1]), items)
        entries[(f"{model} {dtype}", name)] = {
            "keys": list(dates.index),
            "items": items,
            "correct": correct,
            "margin": margin,
            "baseline": None if baseline is None else baseline[0],
            "baseline_margin": None if baseline_margin is None else baseline_margin[0],
        }
    return entries


def _grid(rows: pd.DataFrame, keys: list, items: list) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The conditions ``keys`` x ``items`` grades and top-two margins of ``rows`` (None where a cell is missing;
    margins None where an answer has no option probabilities)."""
    grid = (
        rows.drop_duplicates(["condition_key", "item_id"])
        .set_index(["condition_key", "item_id"])
        .reindex(pd.MultiIndex.from_product([keys, items]))
    )
    if not keys or grid["correct"].isna().any():
        return None, None
    shape = (len(keys), len(items))
    margin = (
        np.array([sparse.margins(np.asarray(p, dtype=float)) for p in grid["probs"]]).reshape(shape)
        if grid["probs"].notna().all()
        else None
    )
    return grid["correct"].astype(float).to_numpy().reshape(shape), margin


def simulate(
    n_items: int,
    n_dates: int,
    *,
    rate: float = 0.4,
    movers: float = 0.2,
    hidden: float = 0.05,
    date_effect: float = 0.0,
    seed: int = 0,
    flip_seed: int | None = None,
) -> dict:
    """A dense entry with known truth and a planted flip structure like the measured ones (docs/coverage.md): each
    question has a grade at ``rate``; a share ``movers`` of them change it on each date with a probability of their own
    (uniform in 0.05-0.5) and show a near tie (top-two margin exponential, mean 0.03); a share ``hidden`` of the rest
    move rarely (probability 0.02) behind a wide margin (mean 0.3, as every steady question), which the pilot misses;
    ``date_effect`` makes every mover right on a random half of the dates with that extra probability. ``flip_seed``:
    the same questions (grades, kinds, flip rates from ``seed``) with their dates drawn anew, a twin entry (another
    precision of one model, say) whose population score is the same. One more condition, drawn as the dates are (a
    date of its own: what a question does without one), is the no-date ``baseline`` with its ``baseline_margin``."""
    rng = np.random.default_rng(seed)
    base = rng.random(n_items) < rate
    kind = rng.random(n_items)
    flip = np.where(kind < movers, rng.uniform(0.05, 0.5, n_items), np.where(kind < movers + hidden, 0.02, 0.0))
    rng = rng if flip_seed is None else np.random.default_rng(flip_seed)
    n_dates += 1  # the last row: the baseline
    flips = rng.random((n_dates, n_items)) < flip
    correct = np.where(flips, ~base, base)
    lifted = np.zeros(n_dates, dtype=bool)
    if date_effect:
        lifted = rng.random(n_dates) < 0.5
        lifted[-1] = False  # the baseline has no date to lift it
        correct = correct | (
            lifted[:, None] & (kind < movers)[None, :] & (rng.random((n_dates, n_items)) < date_effect)
        )
    margin = np.where(
        kind < movers, rng.exponential(0.03, (n_dates, n_items)), rng.exponential(0.3, (n_dates, n_items))
    )
    moving = rate + (1 - 2 * rate) * 0.275  # a mover's chance to be right on a date (its flip rate's mean is 0.275)
    moving += (1 - moving) * 0.5 * date_effect
    truth = movers * moving + hidden * (rate + (1 - 2 * rate) * 0.02) + (1 - movers - hidden) * rate
    chance = np.where(base, 1 - flip, flip)  # each question's chance to be right on a date, before any lift
    lift = np.mean((kind < movers) * (1 - chance)) * date_effect  # a lifted date's rate above an unlifted one's
    return {
        "keys": [f"day{i:04d}" for i in range(n_dates - 1)],
        "items": [f"q{i}" for i in range(n_items)],
        "correct": correct[:-1].astype(float),
        "margin": np.minimum(margin[:-1], 1.0),
        "baseline": correct[-1].astype(float),
        "baseline_margin": np.minimum(margin[-1], 1.0),
        "truth": truth,  # the date-marginal score over the populations of questions and dates
        "spread": float(np.std(lift * lifted[:-1], ddof=1)),  # the SD of these dates' expected rates on these questions
    }


def plant(entry: dict, share: float, n_dates: int, seed: int) -> dict:
    """The entry with a date effect where the pilot does not look: on ``n_dates`` dates picked at random, ``share`` of
    the questions (picked at random among those wrong that date, steady ones included) made right. Its ``planted``
    holds those dates' indices."""
    rng = np.random.default_rng(seed)
    correct = entry["correct"].copy()
    planted = rng.choice(len(correct), n_dates, replace=False)
    for day in planted:
        wrong = np.flatnonzero(correct[day] == 0)
        correct[day, rng.choice(wrong, int(round(share * correct.shape[1])), replace=False)] = 1.0
    return {**entry, "correct": correct, "planted": planted}


def planted_study(entry: dict, budget: float, draws: int) -> dict:
    """Over ``draws`` draws of the design: how often the per-date intervals of the planted dates cover their dense
    values, and their mean absolute error there."""
    covered, errors = [], []
    for seed in range(draws):
        found = draw(entry, budget, seed)
        rest = list(sampled(entry, budget, seed)["rest"])
        at = [rest.index(day) for day in entry["planted"] if day in rest]
        truth, value = found["truth"][at], found["value"][at]
        covered += list((found["low"][at] <= truth + 1e-12) & (truth - 1e-12 <= found["high"][at]))
        errors += list(np.abs(value - truth))
    return {"coverage": float(np.mean(covered)), "error": float(np.mean(errors)), "n": len(covered)}


def sampled(entry: dict, budget: float, seed: int, uniform: bool = False) -> dict:
    """One sparse draw of an entry as ``dateeval run --budget`` makes it (``replay``: the first date is the pilot, its
    no-date baseline, where it has one, scored in full): the readers' ``sample``, the drawn dates' indices ``rest``,
    the cells scored and the grid's size. ``uniform``: the drawn cells' probabilities all equal (no propensity)."""
    found = replay(
        entry["correct"],
        budget,
        seed,
        entry["margin"],
        entry.get("baseline"),
        entry["keys"],
        entry["items"],
        uniform=uniform,
    )
    return {
        "sample": found.sample,
        "values": found.sample.values,
        "inclusion": found.sample.inclusion,
        "predictor": found.sample.predictor,
        "rest": list(np.flatnonzero(found.estimated)),
        "cells": found.cells,
        "grid": found.grid,
    }


def draw(entry: dict, budget: float, seed: int, uniform: bool = False) -> dict:
    """One sparse draw (:func:`sampled`): per drawn date the estimate, interval, truth; and the cells scored."""
    found = sampled(entry, budget, seed, uniform)
    rest = found["rest"]
    estimates = difference_estimates(found["values"], found["inclusion"], found["predictor"])
    return {
        "value": estimates.value[rest],
        "low": estimates.low[rest],
        "high": estimates.high[rest],
        "truth": entry["correct"][rest].mean(1),
        "cells": found["cells"],
        "grid": found["grid"],
    }


def robust_study(
    n_items: int, n_dates: int, budget: float, reps: int, planted: dict, design_only: bool = False
) -> dict:
    """Coverage of the population's date-marginal score (:func:`simulate`'s ``truth``) by the sparse date-robust
    interval (``estimated.sparse_robust``), a new simulated store and draw per repetition, beside the dense interval of
    the same store (``robust.date_robust``) and their mean half-widths. ``design_only``: the interval of the sample's
    error alone (the dense grid taken as the truth), which the study must fail."""
    covered = dense_covered = 0
    half = dense_half = 0.0
    for seed in range(reps):
        entry = simulate(n_items, n_dates, seed=seed, **planted)
        found = sampled(entry, budget, seed)
        score, low, high, _ = sparse_robust(found["values"], found["inclusion"], found["predictor"])
        if design_only:
            value, variance, _ = estimated._per_date(found["values"], found["inclusion"], found["predictor"])
            spread = Z * np.sqrt(variance.sum()) / n_dates
            low, high = value.mean() - spread, value.mean() + spread
        _, dense_low, dense_high, _ = robust.date_robust(entry["correct"])
        covered += low <= entry["truth"] <= high
        dense_covered += dense_low <= entry["truth"] <= dense_high
        half, dense_half = half + (high - low) / 2 / reps, dense_half + (dense_high - dense_low) / 2 / reps
    return {
        "coverage": covered / reps,
        "se": np.sqrt(0.95 * 0.05 / reps),
        "dense_coverage": dense_covered / reps,
        "half": 100 * half,
        "dense_half": 100 * dense_half,
    }


def spread_study(n_items: int, n_dates: int, budget: float, reps: int, planted: dict) -> dict:
    """Coverage of the SD of the dates' expected rates on the store's questions (:func:`simulate`'s ``spread``) by the
    sparse interval (``estimated.sparse_spread``) and by the dense grid's (``variation.level_sd``) of the same stores,
    with their mean half-widths, a new simulated store and draw per repetition; and the sparse interval's coverage
    with the sample's noise left out (as if the estimates were the dense values), which the study must fail. The dense
    grid has no interval where no question changes (its SD is then 0 for certain): that share is given apart."""
    covered = dense_covered = ignored = no_interval = 0
    half = dense_half = truth = 0.0
    for seed in range(reps):
        entry = simulate(n_items, n_dates, seed=seed, **planted)
        found = sampled(entry, budget, seed)
        values, inclusion, predictor = found["values"], found["inclusion"], found["predictor"]
        squares = estimated.mean_squares(values, inclusion, predictor)
        _, low, high = estimated.sparse_spread(values, inclusion, predictor, squares)
        value = estimated.difference_estimates(values, inclusion, predictor).value
        _, blind_low, blind_high = variation.level_sd(n_items * np.var(value, ddof=1), squares[2], n_dates, n_items)
        dense = variation.mean_squares(entry["correct"])
        _, dense_low, dense_high = variation.level_sd(dense[1], dense[2], n_dates, n_items)
        covered += low <= entry["spread"] <= high
        ignored += blind_low <= entry["spread"] <= blind_high
        if np.isnan(dense_low):
            no_interval += 1
        else:
            dense_covered += dense_low <= entry["spread"] <= dense_high
            dense_half += (dense_high - dense_low) / 2
        half, truth = half + (high - low) / 2 / reps, truth + entry["spread"] / reps
    return {
        "truth": 100 * truth,
        "coverage": covered / reps,
        "se": np.sqrt(0.95 * 0.05 / reps),
        "half": 100 * half,
        "dense_coverage": dense_covered / max(1, reps - no_interval),
        "dense_half": 100 * dense_half / max(1, reps - no_interval),
        "dense_none": no_interval / reps,
        "ignored": ignored / reps,
    }


def robust_real(entry: dict, budget: float, draws: int) -> dict:
    """A real dense entry subsampled ``draws`` times: how often the sparse date-robust interval holds the dense grid's
    score, and its mean half-width against the dense interval's (the sample's price)."""
    score, low, high, _ = robust.date_robust(entry["correct"])
    dense = variation.mean_squares(entry["correct"])
    sd, sd_low, sd_high = variation.level_sd(dense[1], dense[2], *entry["correct"].shape)
    covered = sd_covered = 0
    halves, sd_halves = [], []
    for seed in range(draws):
        found = sampled(entry, budget, seed)
        values, inclusion, predictor = found["values"], found["inclusion"], found["predictor"]
        _, sparse_low, sparse_high, _ = sparse_robust(values, inclusion, predictor)
        squares = estimated.mean_squares(values, inclusion, predictor)
        _, spread_low, spread_high = estimated.sparse_spread(values, inclusion, predictor, squares)
        covered += sparse_low <= score <= sparse_high
        sd_covered += spread_low <= sd <= spread_high
        halves.append((sparse_high - sparse_low) / 2)
        sd_halves.append((spread_high - spread_low) / 2)
    return {
        "covered": covered / draws,
        "half": 100 * np.mean(halves),
        "dense_half": 100 * (high - low) / 2,
        "sd": 100 * sd,
        "sd_covered": sd_covered / draws,
        "sd_half": 100 * np.mean(sd_halves),
        "sd_dense_half": 100 * (sd_high - sd_low) / 2,
    }


def verdict_study(n_items: int, n_dates: int, budget: float, reps: int, planted: dict, n_perm: int = 200) -> dict:
    """How often each date-effect test rejects at 0.05 on simulated stores (a new store and draw per repetition): the
    sparse design's permutation test (``sparse_chance``) on the drawn sample, Cochran's Q by permutation on the dense
    grid (what a dense sweep would test). With
    ``date_effect`` 0 the null holds, so the rates are the tests' sizes; above 0, their power."""
    sparse_hits = dense_hits = 0
    for seed in range(reps):
        entry = simulate(n_items, n_dates, seed=seed, **planted)
        found = sampled(entry, budget, seed)
        sample = as_sample(entry, found, seed)
        sparse_hits += sparse_chance.significance("e", "d", sample, n_perm).cochran_permutation_p < 0.05
        dense_hits += chance.significance("e", "d", entry["correct"], n_perm).cochran_permutation_p < 0.05
    return {"sparse": sparse_hits / reps, "dense": dense_hits / reps, "reps": reps}


def as_sample(entry: dict, found: dict, seed: int | None) -> estimated.Sample:
    """A :func:`sampled` draw as the readers' :class:`estimated.Sample`."""
    return found["sample"]


def compare_study(n_items: int, n_dates: int, budget: float, reps: int, pair: str, planted: dict) -> dict:
    """Coverage of the population difference of two entries' date-robust scores by ``estimated.paired_difference``
    (a new pair of stores and draws per repetition), beside the dense grids' ``robust.paired_difference``. ``pair``:
    ``twins`` (the same questions, dates drawn anew: difference 0) swept with one seed, ``twins, two seeds``,
    ``twins, B dense``, or ``apart`` (independent questions, B at rate 0.25)."""
    covered = dense_covered = 0
    half = dense_half = 0.0
    for rep in range(reps):
        a = simulate(n_items, n_dates, seed=rep, **planted)
        if pair == "apart":
            b = simulate(n_items, n_dates, seed=rep + 1_000_000, **{**planted, "rate": 0.25})
        else:
            b = simulate(n_items, n_dates, seed=rep, flip_seed=rep + 1_000_000, **planted)
        seed_b = rep + 1 if pair == "twins, two seeds" else rep
        sample_a = as_sample(a, sampled(a, budget, rep), rep)
        if pair == "twins, B dense":
            sample_b = estimated.dense_sample(b["keys"], b["items"], b["correct"])
        else:
            sample_b = as_sample(b, sampled(b, budget, seed_b), seed_b)
        _, low, high = estimated.paired_difference(sample_a, sample_b)
        _, dense_low, dense_high = robust.paired_difference(a["correct"], b["correct"])
        truth = a["truth"] - b["truth"]
        covered += low <= truth <= high
        dense_covered += dense_low <= truth <= dense_high
        half, dense_half = half + (high - low) / 2 / reps, dense_half + (dense_high - dense_low) / 2 / reps
    return {
        "coverage": covered / reps,
        "dense_coverage": dense_covered / reps,
        "half": 100 * half,
        "dense_half": 100 * dense_half,
    }


def uniform_questions(entry: dict, budget: float, seed: int) -> dict:
    """Each drawn date scores the same number of cells at random questions: plain mean, finite-population Wilson."""
    correct = entry["correct"]
    n_dates, n = correct.shape
    rest = list(range(n_dates))  # the baseline, scored in full, is the only dense condition
    k = max(1, round((budget * n * (1 + len(rest)) - n) / len(rest)))
    rng = np.random.default_rng(seed)
    values, lows, highs = [], [], []
    for i in rest:
        picked = correct[i, rng.choice(n, size=min(k, n), replace=False)]
        p, fpc = picked.mean(), np.sqrt(max(0.0, (n - len(picked)) / max(n - 1, 1)))
        centre = (p + Z**2 / (2 * len(picked))) / (1 + Z**2 / len(picked))
        half = Z * np.sqrt(p * (1 - p) / len(picked) + Z**2 / (4 * len(picked) ** 2)) / (1 + Z**2 / len(picked)) * fpc
        values.append(p), lows.append(centre - half), highs.append(centre + half)
    return {
        "value": np.array(values),
        "low": np.array(lows),
        "high": np.array(highs),
        "truth": correct[rest].mean(1),
        "cells": 0,
        "grid": 1,
    }


def study(entry: dict, budget: float, draws: int, method: str) -> dict:
    covered, halves, shares = [], [], []
    for seed in range(draws):
        found = (
            uniform_questions(entry, budget, seed)
            if method == "uniform questions"
            else draw(entry, budget, seed, method == "uniform cells + estimator")
        )
        covered.append((found["low"] <= found["truth"] + 1e-12) & (found["truth"] <= found["high"] + 1e-12))
        halves.append((found["high"] - found["low"]) / 2)
        shares.append(found["cells"] / found["grid"])
    covered, halves = np.concatenate(covered), np.concatenate(halves)
    return {
        "coverage": covered.mean(),
        "se": np.sqrt(covered.mean() * (1 - covered.mean()) / len(covered)),
        "median_half": 100 * np.median(halves),
        "max_half": 100 * halves.max(),
        "share": float(np.mean(shares)) if method != "uniform questions" else budget,
    }


def paper_scale(entry: dict, n_items: int = 14_042, n_dates: int = 366, seed: int = 0) -> dict:
    """A paper-scale entry resampled from a dense one's questions (see the module's docstring), with one more
    condition drawn as the dates are for its no-date baseline."""
    rng = np.random.default_rng(seed)
    correct, margin = entry["correct"], entry["margin"]
    modal = (correct.mean(0) >= 0.5).astype(float)
    moves = (correct != modal).mean(0)
    picked = rng.integers(0, correct.shape[1], n_items)
    flips = rng.random((n_dates + 1, n_items)) < moves[picked]
    grades = np.where(flips, 1 - modal[picked], modal[picked])
    days = rng.integers(0, correct.shape[0], (n_dates + 1, n_items))
    margins = None if margin is None else margin[days, picked[None, :]]
    return {
        "keys": [f"day{i:04d}" for i in range(n_dates)],
        "items": [f"q{i}" for i in range(n_items)],
        "correct": grades[:-1],
        "margin": None if margins is None else margins[:-1],
        "baseline": grades[-1],
        "baseline_margin": None if margins is None else margins[-1],
    }


def paper_budget(
    entry: dict, draws: int, budgets: tuple[float, ...] = (0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.1, 0.15, 0.2)
) -> dict | None:
    """The smallest budget at which every drawn date's half-width is at most 1 point in every draw."""
    for budget in budgets:
        found = study(entry, budget, draws, "sparse")
        if found["max_half"] <= 1.0:
            return {"budget": budget, **found}
    return None


SIMULATED = (  # (questions, dates, budget, planted structure): few questions, rates near 0 and 1, many movers, a date effect
    (10, 12, 0.5, {}),
    (50, 40, 0.2, {}),
    (300, 40, 0.2, {}),
    (300, 40, 0.2, {"rate": 0.03}),
    (300, 40, 0.2, {"rate": 0.97}),
    (300, 40, 0.2, {"movers": 0.5}),
    (300, 40, 0.2, {"movers": 0.02, "hidden": 0.2}),
    (300, 40, 0.2, {"date_effect": 0.3}),
    (1000, 40, 0.15, {"movers": 0.05}),
    (1000, 120, 0.1, {"movers": 0.05}),
)


ROBUST_SIMULATED = (  # (questions, dates, budget, planted): few questions, rates near 0 and 1, many movers, an effect
    (10, 12, 0.5, {}),
    (20, 12, 0.5, {"rate": 0.05}),
    (50, 40, 0.2, {}),
    (50, 40, 0.2, {"date_effect": 0.3}),
    (300, 40, 0.2, {}),
    (300, 40, 0.2, {"rate": 0.03}),
    (300, 40, 0.2, {"rate": 0.97}),
    (300, 40, 0.2, {"movers": 0.5}),
    (300, 40, 0.2, {"movers": 0.02, "hidden": 0.2}),
    (1000, 120, 0.1, {"movers": 0.05}),
)


def robust_simulated(reps: int) -> None:
    """The sparse date-robust interval's coverage of the population score in every :data:`ROBUST_SIMULATED` cell."""
    print(
        "| questions | dates | budget | planted | coverage (± SE at 0.95) | half-width (pp) | dense coverage | dense half-width (pp) | design's part alone: coverage |"
    )
    print("|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for n_items, n_dates, budget, planted in ROBUST_SIMULATED:
        found = robust_study(n_items, n_dates, budget, reps, planted)
        alone = robust_study(n_items, n_dates, budget, reps, planted, design_only=True)
        print(
            f"| {n_items} | {n_dates} | {budget:g} | {planted or 'default'} | {found['coverage']:.3f} ± {found['se']:.3f} "
            f"| {found['half']:.2f} | {found['dense_coverage']:.3f} | {found['dense_half']:.2f} | {alone['coverage']:.3f} |",
            flush=True,
        )


SPREAD_SIMULATED = (  # (questions, dates, budget, planted): no date effect (the SD is 0) in half, a planted one after
    (10, 12, 0.5, {}),
    (20, 12, 0.5, {"date_effect": 0.3}),
    (50, 40, 0.2, {}),
    (50, 40, 0.2, {"date_effect": 0.3}),
    (300, 40, 0.2, {"rate": 0.03}),
    (300, 40, 0.2, {"rate": 0.03, "date_effect": 0.3}),
    (300, 40, 0.2, {"rate": 0.97, "date_effect": 0.3}),
    (300, 40, 0.2, {"movers": 0.02, "hidden": 0.2}),
    (300, 40, 0.2, {"movers": 0.5, "date_effect": 0.1}),
    (1000, 120, 0.1, {"movers": 0.05, "date_effect": 0.1}),
)


def spread_simulated(reps: int) -> None:
    """The sparse interval of the date effect's SD: its coverage of the true SD in every :data:`SPREAD_SIMULATED` cell."""
    print(
        "| questions | dates | budget | planted | true SD, mean (pp) | coverage (± SE at 0.95) | half-width (pp) | dense coverage | dense half-width (pp) | dense: no interval | sample's noise left out: coverage |"
    )
    print("|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|")
    for n_items, n_dates, budget, planted in SPREAD_SIMULATED:
        found = spread_study(n_items, n_dates, budget, reps, planted)
        print(
            f"| {n_items} | {n_dates} | {budget:g} | {planted or 'default'} | {found['truth']:.2f} | {found['coverage']:.3f} ± {found['se']:.3f} "
            f"| {found['half']:.2f} | {found['dense_coverage']:.3f} | {found['dense_half']:.2f} | {found['dense_none']:.2f} | {found['ignored']:.3f} |",
            flush=True,
        )


def robust_and_spread_simulated(reps: int) -> None:
    """``--simulate --robust``: the date-robust score's table, then the date effect's SD's."""
    robust_simulated(reps)
    print()
    spread_simulated(reps)


VERDICT_SIMULATED = (  # (questions, dates, budget, planted): the null in the first six, a planted effect after
    (10, 12, 0.5, {}),
    (50, 40, 0.2, {}),
    (300, 40, 0.2, {"rate": 0.03}),
    (300, 40, 0.2, {"rate": 0.97}),
    (300, 40, 0.2, {"movers": 0.5}),
    (1000, 120, 0.1, {"movers": 0.05}),
    (300, 40, 0.2, {"date_effect": 0.1}),
    (300, 40, 0.2, {"date_effect": 0.3}),
    (300, 40, 0.4, {"date_effect": 0.3}),
    (1000, 40, 0.2, {"date_effect": 0.3}),
)


def verdict_simulated(reps: int) -> None:
    """The sparse verdict's rejection rate at 0.05 in every :data:`VERDICT_SIMULATED` cell, beside the dense grid's
    Cochran's Q by permutation (200 shuffles each)."""
    print("| questions | dates | budget | planted | sparse (± SE at 0.05) | dense grid |")
    print("|---:|---:|---:|---|---|---:|")
    for n_items, n_dates, budget, planted in VERDICT_SIMULATED:
        found = verdict_study(n_items, n_dates, budget, reps, planted)
        print(
            f"| {n_items} | {n_dates} | {budget:g} | {planted or 'default'} | {found['sparse']:.3f} ± {np.sqrt(0.0475 / reps):.3f} "
            f"| {found['dense']:.3f} |",
            flush=True,
        )


def verdict_and_family_simulated(reps: int) -> None:
    """``--simulate --verdict``: one sparse entry's test, then the store's verdict over sparse and dense entries."""
    verdict_simulated(reps)
    print()
    family_simulated(reps)


def family_study(
    n_items: int,
    n_dates: int,
    budget: float,
    reps: int,
    planted: dict,
    n_perm: int = 200,
    entries: tuple[int, int] = (2, 2),
) -> float:
    """How often the store's verdict (``Results.chance.verdict``: the dense entries' joint test and each sparse entry's design
    test, joined by ``chance.bonferroni``) rejects at 0.05 on simulated stores of twins (one model's questions, their
    dates drawn anew: precisions, say), ``entries`` = (swept sparsely with one seed, dense)."""
    n_sparse, n_dense = entries
    hits = 0
    for seed in range(reps):
        twins = [
            simulate(n_items, n_dates, seed=seed, flip_seed=1000 * seed + k, **planted)
            for k in range(n_sparse + n_dense)
        ]
        parts = [
            sparse_chance.significance("e", "d", as_sample(entry, sampled(entry, budget, seed), seed), n_perm)
            for entry in twins[:n_sparse]
        ]
        dense = (
            [chance.date_effect_family([[entry["correct"] for entry in twins[n_sparse:]]], n_perm, seed)]
            if n_dense
            else []
        )
        hits += chance.bonferroni(dense + [part.cochran_permutation_p for part in parts]) < 0.05
    return hits / reps


FAMILY_SIMULATED = (  # (questions, dates, budget, (sparse, dense) entries, planted): the null first, then an effect
    (10, 12, 0.5, (2, 2), {}),
    (300, 40, 0.2, (2, 2), {}),
    (300, 40, 0.2, (2, 2), {"rate": 0.03}),
    (300, 40, 0.2, (2, 2), {"movers": 0.5}),
    (10, 12, 0.5, (20, 4), {}),
    (300, 40, 0.2, (20, 4), {}),
    (300, 40, 0.2, (20, 4), {"rate": 0.97}),
    (300, 40, 0.2, (2, 2), {"date_effect": 0.3}),
    (300, 40, 0.2, (20, 4), {"date_effect": 0.3}),
)


def family_simulated(reps: int) -> None:
    """The store's verdict with sparse and dense entries: its rejection rate at 0.05 per :data:`FAMILY_SIMULATED` cell."""
    print(
        "| questions | dates | budget | entries (sparse + dense) | planted | store's verdict rejects (± SE at 0.05) |"
    )
    print("|---:|---:|---:|---|---|---|")
    for n_items, n_dates, budget, entries, planted in FAMILY_SIMULATED:
        found = family_study(n_items, n_dates, budget, reps, planted, entries=entries)
        print(
            f"| {n_items} | {n_dates} | {budget:g} | {entries[0]} + {entries[1]} | {planted or 'default'} "
            f"| {found:.3f} ± {np.sqrt(0.0475 / reps):.3f} |",
            flush=True,
        )


COMPARE_SIMULATED = (  # (questions, dates, budget, pair, planted)
    (300, 40, 0.2, "twins", {}),
    (300, 40, 0.2, "twins, two seeds", {}),
    (300, 40, 0.2, "twins, B dense", {}),
    (300, 40, 0.2, "apart", {}),
    (10, 12, 0.5, "twins", {}),
    (20, 12, 0.5, "apart", {}),
    (300, 40, 0.2, "twins", {"rate": 0.03}),
    (300, 40, 0.2, "twins", {"rate": 0.97}),
    (300, 40, 0.2, "twins", {"movers": 0.5}),
    (300, 40, 0.2, "twins", {"date_effect": 0.3}),
)


def compare_simulated(reps: int) -> None:
    """The sparse paired difference's coverage in every :data:`COMPARE_SIMULATED` cell, beside the dense grids'."""
    print(
        "| questions | dates | budget | pair | planted | coverage (± SE at 0.95) | half-width (pp) | dense coverage | dense half-width (pp) |"
    )
    print("|---:|---:|---:|---|---|---|---:|---:|---:|")
    for n_items, n_dates, budget, pair, planted in COMPARE_SIMULATED:
        found = compare_study(n_items, n_dates, budget, reps, pair, planted)
        print(
            f"| {n_items} | {n_dates} | {budget:g} | {pair} | {planted or 'default'} | {found['coverage']:.3f} ± {np.sqrt(0.0475 / reps):.3f} "
            f"| {found['half']:.2f} | {found['dense_coverage']:.3f} | {found['dense_half']:.2f} |",
            flush=True,
        )


def simulated(draws: int) -> None:
    """Coverage and half-width in every :data:`SIMULATED` cell (a new store per 10 draws), sparse against uniform."""
    print(
        "| questions | dates | budget | planted | method | share scored | coverage (± MC SE) | median half-width (pp) | max half-width (pp) |"
    )
    print("|---:|---:|---:|---|---|---:|---|---:|---:|")
    for n_items, n_dates, budget, planted in SIMULATED:
        for method in ("sparse", "uniform cells + estimator", "uniform questions"):
            parts = [
                study(simulate(n_items, n_dates, seed=seed, **planted), budget, max(1, draws // 10), method)
                for seed in range(10)
            ]
            covered = float(np.mean([part["coverage"] for part in parts]))
            total = 10 * max(1, draws // 10) * n_dates
            print(
                f"| {n_items} | {n_dates} | {budget:g} | {planted or 'default'} | {method} | {np.mean([part['share'] for part in parts]):.3f} "
                f"| {covered:.3f} ± {np.sqrt(covered * (1 - covered) / total):.3f} | {np.median([part['median_half'] for part in parts]):.2f} "
                f"| {max(part['max_half'] for part in parts):.2f} |",
                flush=True,
            )


def describe(entry: dict) -> str:
    correct = entry["correct"]
    moved = (correct != correct[0]).any(0)
    return f"{correct.shape[1]} questions x {correct.shape[0]} dates; {moved.sum()} questions ever change; {(correct != correct[0]).mean():.1%} of cells differ from the first date"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?")
    parser.add_argument("--dataset")
    parser.add_argument("--budgets", default="0.1,0.2")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--paper", action="store_true", help="paper scale, resampled from each entry's flip structure")
    parser.add_argument("--simulate", action="store_true", help="planted flip structures instead of a store")
    parser.add_argument("--robust", action="store_true", help="the date-robust score's interval instead of per date")
    parser.add_argument("--verdict", action="store_true", help="with --simulate: the date-effect test's size and power")
    parser.add_argument("--compare", action="store_true", help="with --simulate: model against model's coverage")
    args = parser.parse_args()
    if args.simulate:
        chosen = (
            verdict_and_family_simulated
            if args.verdict
            else compare_simulated
            if args.compare
            else robust_and_spread_simulated
            if args.robust
            else simulated
        )
        chosen(args.draws)
        return
    if args.robust:
        print(
            "| entry | dataset | budget | dense score's share covered | half-width (pp) | dense half-width (pp) "
            "| dense date SD (pp) | its share covered | SD's half-width (pp) | dense SD's half-width (pp) |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (name, dataset), entry in dense_entries(args.store, args.dataset).items():
            for budget in (float(value) for value in args.budgets.split(",")):
                found = robust_real(entry, budget, args.draws)
                print(
                    f"| {name} | {dataset} | {budget:g} | {found['covered']:.3f} | {found['half']:.2f} | {found['dense_half']:.2f} "
                    f"| {found['sd']:.2f} | {found['sd_covered']:.3f} | {found['sd_half']:.2f} | {found['sd_dense_half']:.2f} |",
                    flush=True,
                )
        return
    entries = dense_entries(args.store, args.dataset)
    if args.paper:
        print(
            "| resampled from | grid | budget for every half-width <= 1 pp | share scored | coverage | median half-width (pp) | largest (pp) |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        for (name, dataset), entry in entries.items():
            big = paper_scale(entry)
            found = paper_budget(big, args.draws)
            cells = (
                "none of the budgets tried |  |  |  | "
                if found is None
                else (
                    f"{found['budget']:g} | {found['share']:.3f} | {found['coverage']:.3f} ± {found['se']:.3f} | {found['median_half']:.2f} | {found['max_half']:.2f} |"
                )
            )
            print(f"| {name} {dataset} | {describe(big)} | {cells}", flush=True)
        return
    print(
        "| entry | dataset | grid | budget | method | share scored | coverage (± MC SE) | median half-width (pp) | max half-width (pp) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, dataset), entry in entries.items():
        for budget in (float(value) for value in args.budgets.split(",")):
            for method in ("sparse", "uniform cells + estimator", "uniform questions"):
                found = study(entry, budget, args.draws, method)
                print(
                    f"| {name} | {dataset} | {describe(entry)} | {budget:g} | {method} | {found['share']:.3f} | {found['coverage']:.3f} ± {found['se']:.3f} "
                    f"| {found['median_half']:.2f} | {found['max_half']:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
