"""dateeval's sparse design against its published peer at the same cost (issue 63 §1): PromptEval's extended Rasch model
(``bench/prompteval.py``) given as many scored cells as the design scores, on the same dense stores, many seeds.

For each dense entry (every question on every date, the no-date baseline beside them) and budget, each seed replays the
design (``dateeval.stats.sparse_replay``: what ``dateeval run --budget`` would draw and the readers would estimate) and
gives the Rasch model the same number of cells, drawn by PromptEval's balanced sampler with the baseline row scored in
full as the sweep scores it (``rasch, balanced``), and, beside it, the design's own cells (``rasch, design's cells``).
Printed per budget, against each date's dense value: the per-date mean absolute error over every date (points), the
largest per-date error over dates and seeds, the worst-to-best delta's absolute error (mean over seeds), and for
dateeval the coverage of its 95% intervals pooled over the dates it estimated and seeds, and their median half-width.

    .venv/bin/python bench/sparse_peer.py STORE [--budgets 0.12,0.2,0.3] [--seeds 50] [--dataset mmlu]
    .venv/bin/python bench/sparse_peer.py --simulate [--seeds 50]   # planted flip structures (sparse_coverage.simulate)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompteval
import sparse_coverage

from dateeval import stats
from dateeval.store import Store


def baselines(root: str, dataset: str | None) -> dict[tuple[str, str], dict[str, float]]:
    """Each entry's no-date grades by question id (the dense baseline the sweep scores beside its dates)."""
    frame, _ = Store(root).read(
        columns=["model", "dtype", "dataset", "date_mode", "item_id", "correct"], optional=["factor"]
    )
    frame = frame[frame["date_mode"].eq("none")]
    return {
        (f"{model} {dtype}", name): dict(zip(rows["item_id"].astype(str), rows["correct"].astype(float)))
        for (model, dtype, name), rows in frame.groupby(["model", "dtype", "dataset"])
        if not dataset or name == dataset
    }


def _noncoverage(b: np.ndarray, chi: float) -> np.ndarray:
    """P(|Z - b| > chi) for Z standard normal: an interval's miss rate at normalised bias ``b``."""
    from scipy.stats import norm

    return norm.sf(chi - b) + norm.cdf(-chi - b)


def robust_critical(m2: float, alpha: float = 0.05) -> float:
    """Armstrong, Kolesar and Plagborg-Moller's robust EBCI critical value when only the normalised bias's second
    moment ``m2`` is known: the chi at which the largest average miss rate over every such bias distribution is alpha
    (the least concave majorant of r(sqrt(u), chi) at u = m2)."""
    from scipy.optimize import brentq

    def worst(chi: float) -> float:
        grid = np.concatenate(
            [np.linspace(1e-9, 4 * m2 + 1, 2000), np.linspace(4 * m2 + 1, (chi + 8) ** 2 + 4 * m2, 4000)]
        )
        g = _noncoverage(np.sqrt(grid), chi)
        g0 = float(_noncoverage(np.zeros(1), chi)[0])
        t0 = grid[int(np.argmax((g - g0) / grid))]
        return (
            float(_noncoverage(np.sqrt([m2]), chi)[0])
            if m2 >= t0
            else g0 + m2 * (float(np.interp(t0, grid, g)) - g0) / t0
        )

    return float(brentq(lambda chi: worst(chi) - alpha, 1e-6, np.sqrt(m2 / alpha) + 10))


def shrunk(sample, value: np.ndarray) -> dict:
    """An experiment (not what dateeval reports): each estimated date's difference estimate shrunk toward the dates'
    precision-weighted mean (Fay-Herriot, the between-date variance A by moments, floored at the smallest positive
    variance a date's estimate has / number of dates) with the robust EBCI of Armstrong, Kolesar and Plagborg-Moller
    (average coverage over the dates, not each date's)."""
    from dateeval.results import estimated

    drawn_cells, residual, pi = estimated._residuals(sample.values, sample.inclusion, sample.predictor)
    own = estimated.own_variance(drawn_cells, residual, pi) / sample.values.shape[1] ** 2
    drawn = ~sample.exact
    # Every drawn date has the same design (one probability per question), so its sampling variance is the dates'
    # mean Horvitz-Thompson estimate (unbiased, and stable once averaged), not its own (often 0 from few cells).
    variance = np.where(drawn, own[drawn].mean(), 0.0)
    v = variance[drawn]
    spread = float(np.var(value[drawn], ddof=1) - v.mean()) if drawn.sum() > 1 else 0.0
    a = max(spread, v.mean() / len(v), 1e-8)
    weights = 1 / (a + variance)
    mu = float(np.sum(weights * value) / np.sum(weights))
    mu_variance = 1 / float(np.sum(weights))  # the mean's own error, which the shrunk dates inherit by (1 - w)
    w = a / (a + variance)
    out = np.where(drawn, mu + w * (value - mu), value)
    half = np.array(
        [
            robust_critical(float(vd / a)) * wd * np.sqrt(vd) + 1.96 * (1 - wd) * np.sqrt(mu_variance)
            if vd > 0
            else 0.0
            for vd, wd in zip(variance, w)
        ]
    )
    return {"value": out, "low": np.clip(out - half, 0, 1), "high": np.clip(out + half, 0, 1), "estimated": drawn}


def cheaper_pilot(
    grades: np.ndarray, margins: np.ndarray | None, baseline: np.ndarray, budget: float, seed: int
) -> dict:
    """An experiment (not what dateeval draws): one pilot date (the first) instead of three, with the no-date baseline,
    scored in full anyway, joining it in each question's propensity and predictor (its margins unknown here: 1). The
    budget the two pilot dates left goes to the drawn cells; the estimator and its interval are the readers'."""
    from dateeval import sparse
    from dateeval.results import estimated

    n_dates, n_items = grades.shape
    rest = list(range(1, n_dates))
    pilot = np.vstack([grades[:1], baseline[None]])
    margin = None if margins is None else np.vstack([margins[:1], np.ones((1, n_items))])
    w = sparse.propensity(pilot, margin)
    design = sparse.design_for(w, len(rest), 2, seed=seed, budget=budget, pilot=("date0",))
    drawn = np.ones(grades.shape, dtype=bool)
    drawn[rest] = sparse.chosen(design, w, [f"q{i}" for i in range(n_items)], [f"date{i}" for i in rest])
    exact = drawn.all(1)
    inclusion = np.where(exact[:, None], 1.0, np.broadcast_to(design.inclusion(w), grades.shape))
    found = estimated.difference_estimates(np.where(drawn, grades, np.nan), inclusion, pilot.mean(0))
    value = np.where(exact, grades.mean(1), np.clip(found.value, 0, 1))
    return {
        "value": value,
        "low": np.where(exact, value, found.low),
        "high": np.where(exact, value, found.high),
        "estimated": ~exact,
    }


def one_seed(entry: dict, baseline: np.ndarray | None, budget: float, seed: int) -> dict[str, dict]:
    """Each method's per-date estimates on one seed, with dateeval's intervals and which dates it estimated."""
    grades, margins = entry["correct"], entry["margin"]
    found = stats.sparse_replay(grades, budget=budget, seed=seed, margins=margins, baseline=baseline)
    value = np.array([estimate.value for estimate in found.estimates])
    low = np.array([estimate.low for estimate in found.estimates])
    high = np.array([estimate.high for estimate in found.estimates])
    rows = grades if baseline is None else np.vstack([grades, baseline])
    always = np.zeros(rows.shape, dtype=bool)
    if baseline is not None:
        always[-1] = True
    balanced = prompteval.balanced_cells(*rows.shape, found.cells, seed, always)
    from dateeval.results.replay import replay

    replayed = replay(grades, budget, seed, margins, baseline is not None)
    design = np.isfinite(replayed.sample.values)
    design_rows = design if baseline is None else np.vstack([design, always[-1:]])
    return {
        "dateeval": {"value": value, "low": low, "high": high, "estimated": np.array(found.estimated)},
        "dateeval shrunk (experiment)": shrunk(replayed.sample, replayed.value),
        **(
            {"one pilot date + baseline (experiment)": cheaper_pilot(grades, margins, baseline, budget, seed)}
            if baseline is not None
            else {}
        ),
        "rasch, balanced": {"value": prompteval.rasch_estimates(rows, balanced)[: len(grades)]},
        "rasch, design's cells": {"value": prompteval.rasch_estimates(rows, design_rows)[: len(grades)]},
        "share": {"value": found.cells / found.grid},
    }


def study(entry: dict, baseline: np.ndarray | None, budget: float, seeds: int) -> list[dict]:
    """The table's rows for one entry and budget, over ``seeds`` seeds."""
    truth = entry["correct"].mean(1)
    spread = truth.max() - truth.min()
    per_method: dict[str, list[dict]] = {}
    shares = []
    for seed in range(seeds):
        found = one_seed(entry, baseline, budget, seed)
        shares.append(found.pop("share")["value"])
        for method, part in found.items():
            per_method.setdefault(method, []).append(part)
    rows = []
    for method, parts in per_method.items():
        errors = np.array([np.abs(part["value"] - truth) for part in parts])
        deltas = np.array([abs(np.ptp(part["value"]) - spread) for part in parts])
        row = {
            "budget": budget,
            "method": method,
            "share scored": float(np.mean(shares)),
            "mean abs. error (pp)": 100 * errors.mean(),
            "largest error (pp)": 100 * errors.max(),
            "delta error (pp)": 100 * deltas.mean(),
        }
        if "low" in parts[0]:
            drawn = np.array([part["estimated"] for part in parts])
            low, high = (np.array([part[end] for part in parts]) for end in ("low", "high"))
            covered = (low <= truth + 1e-12) & (truth - 1e-12 <= high)
            row["coverage"] = float(covered[drawn].mean())
            if "planted" in entry:
                row["coverage, planted dates"] = float(covered[:, entry["planted"]].mean())
                row["error, planted dates (pp)"] = 100 * float(errors[:, entry["planted"]].mean())
            row["median half-width (pp)"] = 100 * float(np.median((high - low)[drawn] / 2))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?")
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--budgets", default="0.12,0.2,0.3")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--planted", type=float, default=0.0, help="with --simulate: this share lifted on 4 dates")
    args = parser.parse_args()
    if args.simulate:  # 42 simulated dates: the last stands for the no-date baseline
        sim = sparse_coverage.simulate(300, 42, seed=1)
        if args.planted:  # a few points on a few dates, on questions picked at random (steady ones included)
            rng = np.random.default_rng(2)
            sim["planted"] = rng.choice(np.setdiff1d(np.arange(41), [0, 20, 40]), 4, replace=False)
            for day in sim["planted"]:
                wrong = np.flatnonzero(sim["correct"][day] == 0)
                sim["correct"][day, rng.choice(wrong, int(args.planted * 300), replace=False)] = 1.0
        key = ("simulated", "planted flips")
        entries = {
            key: {
                **sim,
                "correct": sim["correct"][:-1],
                "margin": np.minimum(sim["margin"][:-1], 1.0),
                "keys": sim["keys"][:-1],
            }
        }
        found_baselines: dict = {key: dict(zip(sim["items"], sim["correct"][-1]))}
    elif args.store:
        entries = sparse_coverage.dense_entries(args.store, args.dataset)
        found_baselines = baselines(args.store, args.dataset)
    else:
        parser.error("give a dense STORE or --simulate")
    for key, entry in entries.items():
        held = found_baselines.get(key)
        baseline = None if held is None else np.array([held[str(item)] for item in entry["items"]])
        rows = [
            row for budget in map(float, args.budgets.split(",")) for row in study(entry, baseline, budget, args.seeds)
        ]
        print(
            f"\n{key[0]} on {key[1]}: {entry['correct'].shape[1]} questions x {len(entry['keys'])} dates, {args.seeds} seeds"
        )
        print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
