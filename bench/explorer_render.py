"""Benchmark: explorer page render times on a large synthetic store.

Builds (once, under cache/bench-store) a store of 366 dates x 10,000 items x 5
models with the real schema, then renders every page through Streamlit's
AppTest repeatedly and prints cold and warm p50/p95 render times. The
synthetic numbers are random (each model has its own accuracy level); only
their size matters here.

    .venv/bin/python bench/explorer_render.py [--items 10000] [--models 5] [--repeats 10]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGES = ["pages/overview.py", "pages/curves.py", "pages/leaderboard.py", "pages/flips.py"]


def build(root: Path, n_items: int, n_models: int, n_dates: int = 366) -> None:
    """One compacted file per model, as `dateeval compact` would leave it."""
    rng = np.random.default_rng(0)
    days = [(dt.date(2024, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(n_dates)]
    items = np.array([f"synthetic/{i:06d}" for i in range(n_items)], dtype=object)
    answers = rng.integers(0, 4, n_items)
    for m in range(n_models):
        folder = root / f"synthetic-{m}" / "mmlu"
        folder.mkdir(parents=True, exist_ok=True)
        skill = 0.4 + 0.05 * m
        logits = rng.normal(0, 1, (n_items, 4))
        logits[np.arange(n_items), answers] += 4 * skill
        n = n_items * n_dates
        noisy = np.repeat(logits[None], n_dates, axis=0).reshape(n, 4) + rng.normal(0, 0.3, (n, 4))
        probs = np.exp(noisy) / np.exp(noisy).sum(1, keepdims=True)
        pred = probs.argmax(1)
        answer = np.tile(answers, n_dates)
        table = pa.table({
            "model": pa.array([f"synthetic-{m}"] * n), "model_key": pa.array([f"key{m}"] * n), "dtype": pa.array(["bfloat16"] * n),
            "device": pa.array(["cpu"] * n), "dataset": pa.array(["mmlu"] * n), "task_key": pa.array(["task"] * n),
            "condition": pa.array(np.repeat(days, n_items)), "condition_key": pa.array(np.repeat(days, n_items)),
            "date_mode": pa.array(["date"] * n), "date": pa.array(np.repeat(days, n_items)), "system_prompt": pa.array(["s"] * n),
            "item_id": pa.array(np.tile(items, n_dates)), "correct": pa.array(pred == answer), "confidence": pa.array(probs.max(1)),
            "pred": pa.array(pred), "answer": pa.array(answer), "prompt_hash": pa.array(np.tile(items, n_dates)),
            "created_at": pa.array(["2026-11-29T00:00:00+00:00"] * n), "n_options": pa.array(np.full(n, 4)),
            "subject": pa.array(["synthetic"] * n), "date_text": pa.array(np.repeat(days, n_items)),
            "probs": pa.FixedSizeListArray.from_arrays(pa.array(probs.reshape(-1)), 4).cast(pa.list_(pa.float64())),
        })  # fmt: skip
        pq.write_table(table, folder / "compacted-synthetic.parquet", compression="zstd")


def render_times(page: str, repeats: int) -> list[float]:
    from streamlit.testing.v1 import AppTest

    times = []
    for _ in range(repeats):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.run()
        start = time.perf_counter()
        at.switch_page(page).run()
        at.selectbox(key="store_widget").set_value("My results").run()
        times.append(time.perf_counter() - start)
        assert not at.exception, [e.message for e in at.exception]
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    root = ROOT / "cache" / f"bench-store-{args.items}x{args.models}"
    if not root.exists():
        start = time.perf_counter()
        build(root, args.items, args.models)
        print(f"built {root} in {time.perf_counter() - start:.0f}s")
    os.environ["DATEEVAL_STORE"] = str(root)
    print(f"store: 366 dates x {args.items} items x {args.models} models = {366 * args.items * args.models:,} rows")
    for page in PAGES:
        times = render_times(page, args.repeats + 1)
        cold, warm = times[0], np.array(times[1:])
        print(f"{page:22s} cold {cold:6.2f}s   warm p50 {np.percentile(warm, 50):5.2f}s  p95 {np.percentile(warm, 95):5.2f}s")


if __name__ == "__main__":
    main()
