"""Benchmark: what verifying checksums on every read costs.

Writes a synthetic store through ``Store.write`` (page checksums and column
digests), then times ``Store.read`` against the same reader without any
verification, and against reads as they were before checksums
(``pq.read_table`` per file): the summary columns as the CLI and explorer
read them, the row keys with every column verified as a sweep reads them,
all columns, and the summary columns of one compacted file. Prints median
seconds and the ratios verified / unverified and verified / before.

    .venv/bin/python bench/store_verification.py [--files 200] [--rows 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from dateeval.schema import ROW_KEY, SUMMARY_COLUMNS
from dateeval.store import Store


def unit_rows(unit: int, n_rows: int, rng: np.random.Generator) -> list[dict]:
    """One unit's rows with the real schema's bulk: strings, option probabilities, a system prompt."""
    probs = rng.dirichlet(np.ones(4), n_rows)
    return [
        {
            "model": "synthetic",
            "model_key": "k" * 16,
            "dtype": "float32",
            "device": "cpu",
            "hardware": "cpu",
            "dataset": "mmlu",
            "task_key": "t" * 16,
            "condition": f"date {unit}",
            "condition_key": f"c{unit:05d}",
            "date_mode": "date",
            "date": f"2024-01-{unit % 28 + 1:02d}",
            "system_prompt": "You are a helpful assistant. Today is {date}.",
            "item_id": f"mmlu/{i:06d}",
            "correct": bool(probs[i].argmax() == 0),
            "confidence": float(probs[i].max()),
            "pred": "ABCD"[int(probs[i].argmax())],
            "answer": "A",
            "prompt_hash": f"{unit:08d}{i:012d}",
            "created_at": "2024-01-01T00:00:00+00:00",
            "date_text": f"January {unit % 28 + 1}, 2024",
            "factor": "date",
            "probs": probs[i].tolist(),
        }
        for i in range(n_rows)
    ]


def unverified(paths: list[Path], columns: list[str] | None) -> pd.DataFrame:
    """``Store.read``'s reader without verification: no page checksums, no column digests."""
    frames = []
    for path in paths:
        with pq.ParquetFile(path) as file:
            frames.append(
                file.read(
                    columns=None if columns is None else [c for c in columns if c in file.schema_arrow.names]
                ).to_pandas()
            )
    return _merged(frames)


def before_checksums(paths: list[Path], columns: list[str] | None) -> pd.DataFrame:
    """The read as it was before checksums: ``pq.read_table`` per file."""
    frames = []
    for path in paths:
        wanted = None if columns is None else [c for c in columns if c in pq.read_schema(path).names]
        frames.append(pq.read_table(path, columns=wanted).to_pandas())
    return _merged(frames)


def _merged(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True).drop_duplicates(subset=ROW_KEY, keep="first", ignore_index=True)


def median_seconds(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        store = Store(folder)
        for unit in range(args.files):
            store.write(
                store.unit_path("synthetic", "mmlu", f"date-{unit}", f"{unit:016x}"), unit_rows(unit, args.rows, rng)
            )
        compacted = Store(Path(folder) / "compacted")
        frame, _ = store.read()
        compacted.write(compacted.unit_path("synthetic", "mmlu", "compacted", "all"), frame)
        cases = [
            ("summary columns, unit files", store, dict(columns=SUMMARY_COLUMNS), SUMMARY_COLUMNS),
            ("row keys + full check, unit files", store, dict(columns=ROW_KEY, full_check=True), ROW_KEY),
            ("all columns, unit files", store, dict(), None),
            ("summary columns, one compacted file", compacted, dict(columns=SUMMARY_COLUMNS), SUMMARY_COLUMNS),
        ]
        print(f"{args.files} files x {args.rows} rows; median of {args.repeats}")
        for name, where, read, columns in cases:
            verified = median_seconds(lambda: where.read(**read), args.repeats)
            plain = median_seconds(lambda: unverified(where.files(), columns), args.repeats)
            old = median_seconds(lambda: before_checksums(where.files(), columns), args.repeats)
            print(
                f"{name:36s} verified {verified:6.3f}s  unverified {plain:6.3f}s (ratio {verified / plain:4.2f})  "
                f"before checksums {old:6.3f}s (ratio {verified / old:4.2f})"
            )


if __name__ == "__main__":
    main()
