"""Benchmark: a real date sweep with the default model on this machine's CPU.

Prints scored item-dates per second, prompt tokens per second, the model FLOP
rate those tokens imply as a fraction of this machine's measured matmul
throughput for the same dtype, and the speed-up over a naive loop (one
prompt at a time, no shared-prefix cache, logits at every position),
all measured in this one run so machine noise cancels in the ratios.

    .venv/bin/python bench/sweep_throughput.py [--items 64] [--dates 4] [--dtype bfloat16]
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

import torch

from bench.machine import matmul_rate
from dateeval.backends import BackendOptions
from dateeval.backends.scheduler.plans import common_prefix_length
from dateeval.backends.transformers import TransformersBackend
from dateeval.cli import quiet_libraries
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.sweep import Sweep, SweepSpec
from dateeval.keeping import keep
from dateeval.models import resolve
from dateeval.store import Store
from dateeval.tasks import build_task


def naive_seconds(backend: TransformersBackend, prompts: list[str]) -> float:
    """Baseline: each prompt alone, full forward pass with logits at every position."""
    start = time.perf_counter()
    with torch.inference_mode():
        for tokens in backend.encode(prompts):
            backend.model(input_ids=torch.tensor([tokens]))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--dates", type=int, default=4)
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    args = parser.parse_args()
    quiet_libraries()

    days = [dt.date(2024, 1, 1) + dt.timedelta(days=30 * i) for i in range(args.dates)]
    spec = SweepSpec(
        models=("smollm2-135m",),
        datasets=("arc_challenge",),
        conditions=tuple(expand(days)),
        data_dir=args.data_dir,
        subset=Subset(limit=args.items),
        dtypes=(args.dtype,),
        options=BackendOptions(device="cpu"),
        batch_size=args.batch_size,
    )
    backend = TransformersBackend(resolve("smollm2-135m"), dtype=args.dtype, device="cpu")
    params = sum(p.numel() for name, p in backend.model.named_parameters() if "embed" not in name)
    peak = matmul_rate(getattr(torch, args.dtype))

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        progress = Sweep(spec, Store(folder), keep=keep).run()  # as `dateeval run` does
        sweep_seconds = time.perf_counter() - start
    task = build_task("arc_challenge", args.data_dir, Subset(limit=args.items))
    prompts = [
        backend.template.render(task.prompt(item, spec.conditions[0]).messages, day=days[0]).text for item in task.items
    ]
    naive = naive_seconds(backend, prompts) * args.dates

    encoded = backend.encode(prompts)
    shared = common_prefix_length(encoded)
    computed = progress.tokens_scored - (len(prompts) - 1) * shared * args.dates  # the shared prefix runs once per date
    tokens_per_second = progress.tokens_scored / progress.seconds
    achieved = 2 * params * computed / progress.seconds
    print(
        f"dtype {args.dtype}, {args.items} ARC-Challenge items x {args.dates} dates, batch {args.batch_size}, {torch.get_num_threads()} threads"
    )
    print(f"item-dates scored per second : {progress.items_scored / progress.seconds:8.1f}")
    print(
        f"prompt tokens per second     : {tokens_per_second:8.0f}  (of which computed: {computed / progress.seconds:.0f}; {shared} shared prefix tokens per date)"
    )
    print(f"matmul throughput (measured) : {peak / 1e9:8.1f} GFLOP/s")
    print(
        f"model FLOP rate / matmul     : {achieved / peak:8.2f}  (2 x {params / 1e6:.0f}M non-embedding params per token)"
    )
    print(
        f"speed-up over naive loop     : {naive / progress.seconds:8.2f}x  (naive {naive:.1f}s vs sweep {progress.seconds:.1f}s scoring)"
    )
    print(f"wall time incl. model load   : {sweep_seconds:8.1f}s")


if __name__ == "__main__":
    main()
