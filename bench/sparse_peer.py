"""dateeval's sparse design against its published peer at the same cost (issue 63 §1): PromptEval's extended Rasch model
(``bench/prompteval.py``) given as many scored cells as the design scores, on the same dense stores, many seeds.

For each dense entry (every question on every date, the no-date baseline beside them) and budget, each seed replays the
design (``dateeval.stats.sparse_replay``: what ``dateeval run --budget`` would draw and the readers would estimate) and
gives the Rasch model the same number of cells, drawn by PromptEval's balanced sampler with the baseline row scored in
full as the sweep scores it (``rasch, balanced``). Printed per budget, against each date's dense value: the per-date mean absolute error over every date (points), the
largest per-date error over dates and seeds, the worst-to-best delta's absolute error (mean over seeds), and for
dateeval the coverage of its 95% intervals pooled over the dates it estimated and seeds, and their median half-width.

    .venv/bin/python bench/sparse_peer.py STORE [--budgets 0.12,0.2,0.3] [--seeds 50] [--dataset mmlu]
    .venv/bin/python bench/sparse_peer.py --simulate [--seeds 50] [--planted 0.03]   # sparse_coverage.simulate's flips;
                                    # --planted: that share of each of 4 dates' wrong answers made right, at random
    .venv/bin/python bench/sparse_peer.py [STORE | --simulate] --widths 0.03,0.05 [--cap 1]   # --target-width replayed
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

PLANTED_DATES = 4


def one_seed(entry: dict, budget: float, seed: int) -> dict[str, dict]:
    """Each method's per-date estimates on one seed, with dateeval's intervals and which dates it estimated."""
    grades, baseline = entry["correct"], entry.get("baseline")
    found = stats.sparse_replay(
        grades,
        budget=budget,
        seed=seed,
        margins=entry["margin"],
        baseline=baseline,
    )
    value = np.array([estimate.value for estimate in found.estimates])
    low = np.array([estimate.low for estimate in found.estimates])
    high = np.array([estimate.high for estimate in found.estimates])
    rows = grades if baseline is None else np.vstack([grades, baseline])
    always = np.zeros(rows.shape, dtype=bool)
    if baseline is not None:
        always[-1] = True
    balanced = prompteval.balanced_cells(*rows.shape, found.cells, seed, always)
    return {
        "dateeval": {"value": value, "low": low, "high": high, "estimated": np.array(found.estimated)},
        "rasch, balanced": {"value": prompteval.rasch_estimates(rows, balanced)[: len(grades)]},
        "share": {"value": found.cells / found.grid},
    }


def study(entry: dict, budget: float, seeds: int) -> list[dict]:
    """The table's rows for one entry and budget, over ``seeds`` seeds."""
    truth = entry["correct"].mean(1)
    spread = truth.max() - truth.min()
    per_method: dict[str, list[dict]] = {}
    shares = []
    for seed in range(seeds):
        found = one_seed(entry, budget, seed)
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


def to_width(entry: dict, width: float, cap: float, seeds: int) -> dict:
    """``--target-width`` replayed over ``seeds`` draws: where it stopped (the share of the grid scored, median and
    largest), how often it reached the width before the cap, the widest date at the stop and its intervals' coverage
    of the dense values there (pooled over estimated dates and seeds)."""
    truth = entry["correct"].mean(1)
    shares, reached, widest, covered = [], [], [], []
    for seed in range(seeds):
        found = stats.sparse_replay(
            entry["correct"],
            budget=cap,
            target_width=width,
            seed=seed,
            margins=entry["margin"],
            baseline=entry.get("baseline"),
        )
        drawn = np.array(found.estimated)
        value, low, high = (np.array([getattr(e, end) for e in found.estimates]) for end in ("value", "low", "high"))
        shares.append(found.cells / found.grid)
        reached.append(found.reached)
        widest.append(float(np.max(np.maximum(value - low, high - value)[drawn], initial=0.0)))
        covered += list(((low <= truth + 1e-12) & (truth - 1e-12 <= high))[drawn])
    return {
        "target width (pp)": 100 * width,
        "cap": cap,
        "share scored, median": float(np.median(shares)),
        "largest": float(np.max(shares)),
        "reached": float(np.mean(reached)),
        "widest at the stop (pp)": 100 * float(np.max(widest)),
        "coverage at the stop": float(np.mean(covered)) if covered else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?")
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--budgets", default="0.12,0.2,0.3")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--planted", type=float, default=0.0, help="with --simulate: this share lifted on 4 dates")
    parser.add_argument("--widths", help="--target-width replayed instead, e.g. 0.03,0.05 (cap: --cap, default 1)")
    parser.add_argument("--cap", type=float, default=1.0)
    args = parser.parse_args()
    if args.simulate:  # 41 simulated dates and the no-date baseline
        sim = sparse_coverage.simulate(300, 41, seed=1)
        if args.planted:  # a few points on a few dates, on questions picked at random (steady ones included)
            sim = sparse_coverage.plant(sim, args.planted, PLANTED_DATES, seed=2)
        entries = {("simulated", "planted flips"): sim}
    elif args.store:
        entries = sparse_coverage.dense_entries(args.store, args.dataset)
    else:
        parser.error("give a dense STORE or --simulate")
    for key, entry in entries.items():
        if args.widths:
            rows = [to_width(entry, float(width), args.cap, args.seeds) for width in args.widths.split(",")]
        else:
            rows = [row for budget in map(float, args.budgets.split(",")) for row in study(entry, budget, args.seeds)]
        print(
            f"\n{key[0]} on {key[1]}: {entry['correct'].shape[1]} questions x {len(entry['keys'])} dates"
            f"{' + no-date' if entry.get('baseline') is not None else ''}, {args.seeds} seeds"
        )
        print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
