"""Benchmark: a scoring and a generation sweep through the CLI, quiet and with CPU-bound jobs on half the cores.

Each setting runs each sweep into a fresh store, as a user's ``dateeval run`` does (process start and model load
included), first on a quiet machine and then beside ``cores // 2`` busy loops (``python3 -c 'while True: pass'``).
Settings, interleaved so the machine's own drift touches all alike:

* ``fixed``: 4fbecf1's settings: MKL_CBWR=AUTO, torch's default threads (all cores), i.e. ``DATEEVAL_THREADS=<cores>``,
  and libgomp's default wait (spinning 300,000 times, about 3 ms, before sleeping: ``GOMP_SPINCOUNT=300000``, which
  libgomp takes over any ``OMP_WAIT_POLICY``);
* ``now``: dateeval's defaults (``dateeval.numerics``: MKL_CBWR=AUTO,STRICT, the thread governor, GOMP_SPINCOUNT=10000);
* ``passive``: 4fbecf1's settings with ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep at once instead of spinning);
* ``spin``: dateeval's defaults with libgomp's default wait (what they were before the shorter spin).

Prints each time (best of ``--runs``), busy/quiet per setting, and each setting's quiet speed against ``fixed``.

    .venv/bin/python bench/busy_machine.py [--runs 2] [--settings fixed,now,passive,spin] [--only scoring|generation]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORES = len(os.sched_getaffinity(0))
SWEEPS = {
    "scoring": [
        "--dataset",
        "arc_challenge",
        "--limit",
        "40",
        "--dates",
        "2024-01-01..2024-01-03",
        "--batch-size",
        "8",
    ],
    "generation": [
        "--dataset",
        "gsm8k",
        "--limit",
        "4",
        "--dates",
        "2024-03-14",
        "--batch-size",
        "4",
        "--max-new-tokens",
        "64",
    ],
}
SETTINGS = {
    "fixed": {"MKL_CBWR": "AUTO", "DATEEVAL_THREADS": str(CORES), "GOMP_SPINCOUNT": "300000"},
    "now": {},
    "passive": {"MKL_CBWR": "AUTO", "DATEEVAL_THREADS": str(CORES), "OMP_WAIT_POLICY": "PASSIVE"},
    "spin": {"GOMP_SPINCOUNT": "300000"},
}


def run_once(sweep: list[str], extra_env: dict[str, str], data_dir: str) -> float:
    store = Path(tempfile.mkdtemp(prefix="busy-bench-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MKL_CBWR", "DATEEVAL_THREADS", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")
    }
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **extra_env})
    try:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "dateeval", "run", *sweep, "--data-dir", data_dir, "--store", str(store)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(f"the sweep failed: {done.stderr.strip().splitlines()[-1:]}")
        return elapsed
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--settings", default="fixed,now,passive")
    parser.add_argument("--only", choices=sorted(SWEEPS))
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args()
    settings = args.settings.split(",")
    sweeps = [args.only] if args.only else list(SWEEPS)
    with open("/proc/loadavg") as f:
        print(f"{CORES} cores, load before: {f.read().split()[:3]}; best of {args.runs} runs each", flush=True)
    times: dict[tuple[str, str, str], float] = {}
    for load in ("quiet", "busy"):
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(CORES // 2 if load == "busy" else 0)
        ]
        try:
            for _ in range(args.runs):
                for sweep in sweeps:
                    for setting in settings:
                        t = run_once(SWEEPS[sweep], SETTINGS[setting], args.data_dir)
                        key = (sweep, setting, load)
                        times[key] = min(times.get(key, t), t)
                        print(f"  {sweep:10} {setting:8} {load:5} {t:6.1f} s", flush=True)
        finally:
            for burner in burners:
                burner.kill()
    print(
        f"\n| sweep | setting | quiet s | busy s ({CORES // 2} of {CORES} cores taken) | busy/quiet | quiet speed vs fixed |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for sweep in sweeps:
        for setting in settings:
            quiet, busy = times[(sweep, setting, "quiet")], times[(sweep, setting, "busy")]
            speed = times[(sweep, "fixed", "quiet")] / quiet if "fixed" in settings else float("nan")
            print(f"| {sweep} | {setting} | {quiet:.1f} | {busy:.1f} | {busy / quiet:.2f}x | {speed:.2f}x |")


if __name__ == "__main__":
    main()
