"""A real sparse sweep against the dense sweep of the same questions and dates (issue 46's Done-when).

Both stores are read as a user reads them, through ``dateeval summary --json --per-date`` (``Results.bands.per_date``): for
every entry and dataset of the sparse store, each estimated date's interval is checked against the dense store's value
for that date. Prints per entry: the dates estimated, the share whose interval covers the dense value, the median and
largest half-width (points), and the share of the dense grid the sparse sweep scored. Then per entry the date-robust
score of each store (``dateeval robust --json``) and the questions each store's Flips table sees change
(``Results.flips.flips``): how many the sparse one finds of the dense one's, and how many it names that the dense one does not.

    .venv/bin/python bench/sparse_vs_dense.py DENSE_STORE SPARSE_STORE
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def per_date(store: str) -> pd.DataFrame:
    """``dateeval summary --json --per-date`` of a store, as the CLI prints it."""
    said = subprocess.run(
        [sys.executable, "-m", "dateeval", "summary", "--store", store, "--json", "--per-date"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return pd.DataFrame(json.loads(said.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dense")
    parser.add_argument("sparse")
    args = parser.parse_args()
    dense, sparse = per_date(args.dense), per_date(args.sparse)
    joined = sparse.merge(dense, on=["entry", "dataset", "date"], suffixes=("", "_dense"), how="left")
    print(
        "| entry | dataset | dates estimated | covered | median half-width (pp) | largest (pp) | share of the grid scored |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for (entry, dataset), rows in joined.groupby(["entry", "dataset"]):
        estimated = rows[rows["estimated"]]
        if estimated["value_dense"].isna().any():
            raise SystemExit(f"{entry} {dataset}: the dense store lacks some dates")
        covered = (estimated["low"] <= estimated["value_dense"] + 1e-12) & (
            estimated["value_dense"] <= estimated["high"] + 1e-12
        )
        half = 100 * (estimated["high"] - estimated["low"]) / 2
        share = rows["n_scored"].sum() / rows["n_items"].sum()
        print(
            f"| {entry} | {dataset} | {len(estimated)} | {covered.mean():.3f} ({int(covered.sum())} of {len(estimated)}) | {np.median(half):.2f} "
            f"| {half.max():.2f} | {share:.3f} |"
        )

    robust_and_flips(args.dense, args.sparse)


def robust(store: str) -> dict[tuple[str, str], dict]:
    """``dateeval robust --json`` of a store, per (entry, dataset)."""
    said = subprocess.run(
        [sys.executable, "-m", "dateeval", "robust", "--store", store, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return {(row["entry"], record["dataset"]): row for record in json.loads(said.stdout) for row in record["entries"]}


def movers(store: str) -> dict[tuple[str, str], set]:
    """The questions a store's Flips table sees change, per (entry, dataset), over its whole range."""
    from dateeval.results import Results
    from dateeval.store import Store

    results, _ = Results.open(Store(store))
    found = {}
    for entry, dataset in results.dated_entries():
        days = pd.to_datetime(results.bands.per_date().query("entry == @entry and dataset == @dataset")["date"])
        flips, _ = results.flips.flips(entry, dataset, days.min().date(), days.max().date())
        found[entry, dataset] = set(flips.loc[flips["changes"] > 0, "item_id"])
    return found


def robust_and_flips(dense_store: str, sparse_store: str) -> None:
    dense, sparse = robust(dense_store), robust(sparse_store)
    seen, truth = movers(sparse_store), movers(dense_store)
    print()
    print(
        "| entry | dataset | date-robust score, sparse | dense | date SD (pp), sparse | dense "
        "| questions seen to change: sparse of dense | not in dense |"
    )
    print("|---|---|---|---|---|---|---:|---:|")
    for key, row in sorted(sparse.items()):
        other = dense[key]
        print(
            f"| {key[0]} | {key[1]} | {_shown(row, 'score', 'low', 'high')} | {_shown(other, 'score', 'low', 'high')} "
            f"| {_shown(row, *SD)} | {_shown(other, *SD)} "
            f"| {len(seen[key] & truth[key])} of {len(truth[key])} | {len(seen[key] - truth[key])} |"
        )


SD = ("sd_date", "sd_date_low", "sd_date_high")


def _shown(row: dict, value: str, low: str, high: str) -> str:
    """A share with its interval in points, one decimal (the interval left out where the record has none)."""
    if row[low] is None:
        return f"{100 * row[value]:.1f}"
    return f"{100 * row[value]:.1f} [{100 * row[low]:.1f}, {100 * row[high]:.1f}]"


if __name__ == "__main__":
    main()
