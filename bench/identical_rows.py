"""Check: a small mixed sweep stores exactly the rows a given commit stores (issue 37: every result identical).

Runs one sweep (MCQA packed and at ``--batch-sizes`` levels, MCQA chain of
thought, GSM8K, HumanEval, WMT16; a few dates and the no-date baseline; a
few items each) twice, with the code at ``--baseline`` (checked out with
``git worktree add`` into a temporary folder, run with this tree's .venv)
and with the working tree, each into its own empty store, then compares
every stored per-item row column by column: floats bit for bit (NaN equal
to NaN), everything else by equality. The run's id, the row's time and the
sandbox's wall time for a generated program are left out; they differ
between any two runs.

    HF_HUB_OFFLINE=1 nice -n 19 .venv/bin/python bench/identical_rows.py [--baseline b6c610e] [--limit 2] [--max-new-tokens 32] [--baseline-store DIR]

Prints the rows compared per dataset and every difference; exits 1 on any.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("mmlu", "mmlu_cot", "gsm8k", "humaneval", "wmt16_en_de")
VARYING = (
    "run_id",
    "created_at",
    "run_seconds",
)  # which run wrote a row, when, and how long the sandbox ran its program


def sweep(tree: Path, store: Path, args: argparse.Namespace) -> None:
    """One ``dateeval run`` of the mixed sweep with the code in ``tree``."""
    command = [
        str(ROOT / ".venv" / "bin" / "python"),
        "-m",
        "dateeval",
        "run",
        "--model",
        "smollm2-135m",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--data-dir",
        args.data_dir,
        "--limit",
        str(args.limit),
        "--dates",
        args.dates,
        "--no-date",
        "--batch-sizes",
        args.batch_sizes,
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--store",
        str(store),
    ]
    for dataset in DATASETS:
        command += ["--dataset", dataset]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree)}
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)


def rows(store: Path) -> dict[tuple[str, str], dict[tuple, dict]]:
    """Per (dataset folder, unit file name), each stored row by (item, prompt hash)."""
    units: dict[tuple[str, str], dict[tuple, dict]] = {}
    for path in sorted(store.rglob("*.parquet")):
        if any(part.startswith(".") for part in path.relative_to(store).parts):
            continue
        table = pq.read_table(path).to_pylist()
        units[(path.parent.name, path.name)] = {(row.get("item_id"), row.get("prompt_hash")): row for row in table}
    return units


def same(a: object, b: object) -> bool:
    """Bit-for-bit equality of floats (and of arrays of them), plain equality otherwise."""
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def compare(before: dict, after: dict) -> list[str]:
    """Every difference between two stores' rows, as lines."""
    problems = [f"unit {unit} only in the baseline" for unit in before.keys() - after.keys()]
    problems += [f"unit {unit} only in the working tree" for unit in after.keys() - before.keys()]
    for unit in sorted(before.keys() & after.keys()):
        old, new = before[unit], after[unit]
        if old.keys() != new.keys():
            problems.append(f"{unit}: rows differ ({len(old)} against {len(new)})")
            continue
        for key, row in old.items():
            for column in sorted(row.keys() | new[key].keys()):
                if column in VARYING:
                    continue
                if not same(row.get(column), new[key].get(column)):
                    problems.append(f"{unit} item {key[0]}: {column} {row.get(column)!r} != {new[key].get(column)!r}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="b6c610e")
    parser.add_argument("--limit", type=int, default=2)
    parser.add_argument("--dates", default="2024-01-01,2024-07-01")
    parser.add_argument("--batch-sizes", default="1,3")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument(
        "--baseline-store", type=Path, help="keep the baseline's store here, and reuse it where it exists"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="identical-rows-") as scratch:
        baseline_store = args.baseline_store or Path(scratch) / "store-baseline"
        if not baseline_store.exists():
            base = Path(scratch) / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(base), args.baseline],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            try:
                sweep(base, baseline_store, args)
            finally:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False, capture_output=True
                )
        sweep(ROOT, Path(scratch) / "store-now", args)
        before, after = rows(baseline_store), rows(Path(scratch) / "store-now")
    counts: dict[str, int] = {}
    for (dataset, _), unit in before.items():
        counts[dataset] = counts.get(dataset, 0) + len(unit)
    print(f"baseline {args.baseline} against the working tree: {len(before)} units, {sum(counts.values())} rows")
    for dataset, count in sorted(counts.items()):
        print(f"  {dataset:20s} {count:4d} rows")
    problems = compare(before, after)
    print("\n".join(problems) if problems else "every stored row identical (floats bit for bit)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
