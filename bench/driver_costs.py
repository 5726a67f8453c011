"""Benchmark: what one sweep driver costs per unit, the limits of spreading a sweep over many workers.

The driver plans (renders and hashes every prompt once per model, reads the
keys already stored), leases each unit, and writes every unit's rows
(checksummed, with its aggregates). Workers only compute. Printed, for an
MMLU-sized unit (one date, 14,042 questions; rows like a real next-token unit):

* prompts rendered and hashed per second (planning, once per model and date);
* seconds to write one unit (``sidecars.write_unit``: Parquet, checksums, aggregates);
* seconds to read the stored keys of a store with many units (re-planning);
* lease acquire + release per second;

and from them the largest number of workers one driver keeps busy at a
given per-worker unit time. Use: ``.venv/bin/python bench/driver_costs.py [--rows 14042] [--units 50]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.engine.worker import _prompt_hash
from dateeval.prompting import ChatTemplate
from dateeval.schema import ROW_KEY
from dateeval.store import Store, sidecars
from dateeval.store.leases import Leases
from dateeval.tasks import build_task


def renders_per_second(data_dir: str, template: ChatTemplate, n: int) -> float:
    task = build_task("mmlu", data_dir, Subset(limit=n))
    condition = Condition(date=dt.date(2024, 3, 1))
    template.render(
        task.prompt(task.items[0], condition).messages, day=condition.date
    )  # imports and compiles: not per prompt
    started = time.perf_counter()
    for item in task.items:
        _prompt_hash(template.render(task.prompt(item, condition).messages, day=condition.date).text)
    return len(task.items) / (time.perf_counter() - started)


def unit_rows(rows: int, condition: int) -> list[dict]:
    """Rows shaped like a stored next-token MCQA unit."""
    rng = np.random.default_rng(condition)
    probs = rng.dirichlet(np.ones(4), size=rows)
    shared = {
        "model": "m",
        "model_key": "k" * 16,
        "hardware": "cpu",
        "dtype": "float32",
        "dataset": "mmlu",
        "task_key": "t" * 16,
        "condition": f"c{condition}",
        "condition_key": f"c{condition:015d}",
        "date": f"2024-01-{condition % 28 + 1:02d}",
        "date_mode": "date",
        "factor": "date",
        "system_prompt": "You are a helpful assistant.",
    }
    return [
        {
            **shared,
            "item_id": f"mmlu/{i}",
            "prompt_hash": f"{i:020d}",
            "probs": probs[i].tolist(),
            "pred": int(probs[i].argmax()),
            "answer": i % 4,
            "correct": bool(probs[i].argmax() == i % 4),
            "confidence": float(probs[i].max()),
            "label_mass": 0.9,
            "prompt_tokens": 150,
        }
        for i in range(rows)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=14_042)
    parser.add_argument("--units", type=int, default=20)
    parser.add_argument("--renders", type=int, default=2000)
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    parser.add_argument(
        "--template",
        default=str(
            Path(__file__).resolve().parent.parent.parent
            / "shared"
            / "templates"
            / "meta-llama__Llama-3.1-8B-Instruct.jinja"
        ),
    )
    args = parser.parse_args()

    template = (
        ChatTemplate.from_file(args.template)
        if Path(args.template).is_file()
        else ChatTemplate("{{ messages[0]['content'] }}")
    )
    rendered = renders_per_second(args.data_dir, template, args.renders)
    with tempfile.TemporaryDirectory() as folder:
        store = Store(folder)
        started = time.perf_counter()
        for unit in range(args.units):
            sidecars.write_unit(
                store, store.unit_path("m-float32-k", "mmlu", f"c{unit}", f"{unit:016d}"), unit_rows(args.rows, unit)
            )
        write = (time.perf_counter() - started) / args.units
        started = time.perf_counter()
        store.read(
            columns=ROW_KEY, paths=sorted((store.root / "m-float32-k" / "mmlu").glob("*.parquet")), full_check=True
        )
        read = time.perf_counter() - started
        leases = Leases()
        paths = [store.root / "m-float32-k" / "mmlu" / f"lease-{i}.parquet" for i in range(200)]
        started = time.perf_counter()
        for path in paths:
            leases.acquire(path)
            leases.release(path)
        lease_rate = len(paths) / (time.perf_counter() - started)
        leases.close()
    driver = write + 2 / lease_rate  # what the driver spends on each unit once planned
    print(f"driver costs ({os.cpu_count()} cores), units of {args.rows:,} MMLU rows:")
    print(
        f"  planning: prompts rendered+hashed     {rendered:10.0f} /s  ({args.rows / rendered:.2f} s per unit, once per model)"
    )
    print(f"  write one unit (checksums, aggregates) {write:10.3f} s")
    print(
        f"  read stored keys of {args.units} units (re-plan) {read:8.3f} s  ({read / args.units * 1000:.1f} ms per unit)"
    )
    print(f"  lease acquire+release                 {lease_rate:10.0f} /s")
    for unit_seconds in (60.0, 600.0):
        print(f"  workers one driver keeps busy at {unit_seconds:4.0f} s per unit: {unit_seconds / driver:8.0f}")


if __name__ == "__main__":
    main()
