"""Benchmark: the Ray executor against the local one, on the same sweep in one run.

Prints steady-state units/s and item-dates/s (from the first stored unit to
the last, so model loads are left out) for the local executor, Ray with one
worker and Ray with two, then the ratios: 2 workers / 1 worker, and Ray's
overhead per unit against the local executor ((1/rate_ray1 - 1/rate_local)).
Ray needs a loopback-only network namespace on these machines (root):

    unshare --net --pid --fork --kill-child sh -c 'ip link set lo up; .venv/bin/python bench/ray_executor.py [--items 16] [--dates 12]'
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

from dateeval.backends import BackendOptions
from dateeval.cli import quiet_libraries
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.sweep import Executor, LocalExecutor, Progress, Sweep, SweepSpec
from dateeval.keeping import keep
from dateeval.store import Store


def steady_rate(spec: SweepSpec, executor: Executor) -> tuple[float, float, float]:
    """(units/s, item-dates/s) between the first and the last stored unit, and the whole wall time."""
    marks: list[tuple[float, int, int]] = []

    def mark(progress: Progress) -> None:
        marks.append((time.perf_counter(), progress.units_done, progress.items_scored))

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        Sweep(spec, Store(folder), executor=executor, on_progress=mark, keep=keep).run()  # as `dateeval run` does
    (t0, u0, i0), (t1, u1, i1) = marks[0], marks[-1]
    return (u1 - u0) / (t1 - t0), (i1 - i0) / (t1 - t0), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--dates", type=int, default=12)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    args = parser.parse_args()
    quiet_libraries()
    from dateeval.engine.ray_executor import RayExecutor

    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(args.dates)]
    spec = SweepSpec(
        models=("smollm2-135m",),
        datasets=("arc_challenge",),
        conditions=tuple(expand(days)),
        data_dir=args.data_dir,
        subset=Subset(limit=args.items),
        dtypes=(args.dtype,),
        batch_size=8,
        options=BackendOptions(device="cpu"),
    )
    # One thread per worker, so that two workers on two cores are compared fairly with one.
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    local = steady_rate(spec, LocalExecutor())
    one = steady_rate(spec, RayExecutor(workers=1))
    two = steady_rate(spec, RayExecutor(workers=2))
    print(
        f"{args.items} ARC-Challenge items x {args.dates} dates ({args.dates} units), {args.dtype}, one thread per worker, {os.cpu_count()} cores"
    )
    for name, (units, items, wall) in (("local executor", local), ("ray, 1 worker", one), ("ray, 2 workers", two)):
        print(f"  {name:16s} {units:6.2f} units/s  {items:7.1f} item-dates/s  (wall {wall:5.1f} s incl. loads)")
    print(f"  ray 2 workers / 1 worker      {two[0] / one[0]:6.2f}x")
    print(
        f"  ray overhead per unit vs local {1 / one[0] - 1 / local[0]:+7.3f} s ({local[0] / one[0]:.2f}x the local time per unit)"
    )


if __name__ == "__main__":
    main()
