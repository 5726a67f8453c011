"""HumanEval checks per second in the sandbox: this tree against an earlier revision, in one run, on the same programs.

The cost of issue 18's hardening (a cgroup per program, values as restricted
pickles instead of tagged JSON, a host-unique user id) is measured, not
guessed: the earlier ``dateeval/sandbox.py`` and ``dateeval/seccomp.py`` (now the package ``dateeval/sandbox/``) are
read from git and loaded beside the current ones, and the two grade the 164
canonical solutions in alternating rounds (so a busy neighbour slows both
alike). The current sandbox is also timed without cgroups (its single-process
fallback). Usage::

    .venv/bin/python bench/sandbox_throughput.py [--before REV] [--rounds N] [--workers N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dateeval import sandbox
from dateeval.sandbox import cgroups
from dateeval.tasks import humaneval

BEFORE = "4bb8fbc"  # the last commit before issue 18's sandbox work


def load_revision(revision: str) -> ModuleType:
    """The sandbox module as it was at ``revision``, with that revision's seccomp filter."""
    modules = {}
    for name in ("seccomp", "sandbox"):
        source = subprocess.run(
            ["git", "show", f"{revision}:dateeval/{name}.py"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        spec = importlib.util.spec_from_loader(f"{name}_at_{revision}", loader=None)
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
        sys.modules[f"dateeval.{name}"] = module  # the revision's own layout: its sandbox imports dateeval.seccomp
        exec(compile(source, f"{revision}:dateeval/{name}.py", "exec"), module.__dict__)  # our own code, from git
        modules[name] = module
    sys.modules["dateeval.sandbox"] = sandbox  # this tree's package again
    modules["sandbox"].seccomp = modules["seccomp"]
    return modules["sandbox"]


def rate(run_many: Callable, checks: list, workers: int) -> tuple[float, int]:
    """Checks per second and how many passed."""
    started = time.perf_counter()
    outcomes = run_many(checks, workers=workers)
    return len(checks) / (time.perf_counter() - started), sum(o.passed for o in outcomes)


def single_process(checks: list, workers: int) -> list:
    """The current sandbox as on a host where no cgroup can be made."""
    found = cgroups.hierarchies
    cgroups.hierarchies = lambda: ()
    try:
        return sandbox.run_many(checks, workers=workers)
    finally:
        cgroups.hierarchies = found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    problems = humaneval.load_problems(args.data_dir)
    before = load_revision(args.before)
    checks = [humaneval.check(p, p.canonical_solution) for p in problems]
    old_checks = [before.Check(c.solution, c.checker, c.entry_point) for c in checks]
    print(
        f"{len(checks)} canonical HumanEval solutions, {args.workers} worker(s), cgroups here: {bool(cgroups.hierarchies())}"
    )
    totals = {"before": [], "after": [], "after, single process": []}
    for round_ in range(args.rounds):
        for name, run, batch in (
            ("before", before.run_many, old_checks),
            ("after", sandbox.run_many, checks),
            ("after, single process", single_process, checks),
        ):
            per_second, passed = rate(run, batch, args.workers)
            totals[name].append(per_second)
            print(f"  round {round_ + 1}: {name:22} {per_second:6.2f} checks/s ({passed} passed)")
    mean = {name: sum(values) / len(values) for name, values in totals.items()}
    print(
        f"mean: before {mean['before']:.2f}, after {mean['after']:.2f} checks/s (after/before {mean['after'] / mean['before']:.2f}); "
        f"single process {mean['after, single process']:.2f} ({mean['after, single process'] / mean['before']:.2f})"
    )


if __name__ == "__main__":
    main()
