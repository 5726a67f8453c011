"""A real sparse sweep against the dense sweep of the same questions and dates (issue 46's Done-when).

Both stores are read as a user reads them, through ``dateeval summary --json --per-date`` (``Results.per_date``): for
every entry and dataset of the sparse store, each estimated date's interval is checked against the dense store's value
for that date. Prints per entry: the dates estimated, the share whose interval covers the dense value, the median and
largest half-width (points), and the share of the dense grid the sparse sweep scored.

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


if __name__ == "__main__":
    main()
