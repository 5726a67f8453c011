"""Ray scenarios for tests/engine/test_ray.py, run in a private network namespace (Ray there binds to loopback).

    python tests/scripts/ray_sweep.py STORE_ROOT DATA_DIR SCENARIO

Scenarios: ``two-nodes`` (a two-node cluster, one actor on each, the whole
sweep: ARC-Challenge scored, GSM8K generated in pools of units) and
``kill-worker`` (the same, with one actor's process killed with SIGKILL while
it computes). Prints one JSON line: what happened.
"""

import datetime as dt
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ray.cluster_utils import Cluster

from dateeval.backends import BackendOptions
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.ray_executor import RayExecutor
from dateeval.engine.sweep import Progress, Sweep, SweepSpec
from dateeval.store import Store
from dateeval.tasks import GenerationOptions


def spec(data_dir: str) -> SweepSpec:
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=30 * i) for i in range(6)]
    return SweepSpec(
        models=("smollm2-135m",),
        datasets=("arc_challenge", "gsm8k"),
        conditions=tuple(expand(days, no_date=True)),
        data_dir=data_dir,
        subset=Subset(limit=6),
        dtypes=("float32",),
        batch_size=4,
        options=BackendOptions(device="cpu"),
        generation=GenerationOptions(max_new_tokens=8),
    )


def main() -> None:
    root, data_dir, scenario = sys.argv[1:4]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    killed: list[str] = []
    seen: set[str] = set()  # what the actors were computing: a unit's label, or a pool of a generation dataset's units

    def kill_one(progress: Progress) -> None:
        seen.update(progress.workers.values())
        if scenario == "kill-worker" and not killed and progress.units_done >= 2 and progress.workers:
            name = next(iter(progress.workers))
            os.kill(int(name.rsplit(":", 1)[1]), signal.SIGKILL)
            killed.append(name)

    executor = RayExecutor(address=cluster.address, workers=2)
    try:
        progress = Sweep(spec(data_dir), Store(root), executor=executor, on_progress=kill_one).run()
    finally:
        cluster.shutdown()
    print(
        json.dumps(
            {
                "units_done": progress.units_done,
                "units_total": progress.units_total,
                "killed": killed,
                "messages": progress.messages,
                "computing": sorted(seen),
            }
        )
    )


if __name__ == "__main__":
    main()
