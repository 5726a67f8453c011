"""Benchmark: open-ended generation and HumanEval execution on this machine.

Prints, measured in this one run so machine noise cancels in the ratios:

* generated tokens per second for the default model on real GSM8K prompts,
  one prompt at a time (unbatched) against batched generation with the KV
  cache, and the speed-up;
* HumanEval checks (the 164 canonical solutions with their tests) per second
  in the sandbox (two bubblewrap containers per check) with one worker and
  with one worker per core, against the same programs run bare (one plain
  ``python -I`` subprocess each, no isolation): the ratio is the sandbox's cost.

    .venv/bin/python bench/generation_throughput.py [--prompts 16] [--tokens 64] [--batch-size 16] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dateeval.backends.base import GenerationSettings
from dateeval.backends.transformers import TransformersBackend
from dateeval.cli import quiet_libraries
from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.models import resolve
from dateeval.sandbox import Check, run_many
from dateeval.tasks import build_task, humaneval


def generated_tokens_per_second(
    backend: TransformersBackend, prompts: list[str], settings: GenerationSettings, batch_size: int
) -> tuple[float, int]:
    started = time.perf_counter()
    replies = backend.generate_texts(prompts, settings, batch_size)
    tokens = sum(reply.n_tokens for reply in replies)
    return tokens / (time.perf_counter() - started), tokens


def checks_per_second(checks: list[Check], workers: int) -> tuple[float, int]:
    started = time.perf_counter()
    outcomes = run_many(checks, workers=workers)
    return len(checks) / (time.perf_counter() - started), sum(outcome.passed for outcome in outcomes)


def bare_per_second(problems: list, workers: int) -> tuple[float, int]:
    """The baseline: each whole program (prompt, solution, tests) in a bare interpreter, in the harness's old form."""
    programs = [f"{p.prompt}{p.canonical_solution}\n\n{p.test}\n\ncheck({p.entry_point})\n" for p in problems]

    def run(program: str) -> bool:
        return subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, timeout=60).returncode == 0

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed = sum(pool.map(run, programs))
    return len(programs) / (time.perf_counter() - started), passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per prompt")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    quiet_libraries()

    backend = TransformersBackend(resolve("smollm2-135m"), dtype=args.dtype, device="cpu")
    task = build_task("gsm8k", args.data_dir, Subset(limit=args.prompts))
    condition = Condition(date=dt.date(2024, 3, 1))
    prompts = [
        backend.template.render(task.prompt(item, condition).messages, day=condition.date).text for item in task.items
    ]
    # Tokens are counted up to each reply's end-of-sequence, so both runs are credited with the same useful work.
    settings = GenerationSettings(max_new_tokens=args.tokens)
    backend.generate_texts(prompts[:2], GenerationSettings(max_new_tokens=4), 2)  # warm-up
    single, single_tokens = generated_tokens_per_second(backend, prompts, settings, 1)
    batched, batched_tokens = generated_tokens_per_second(backend, prompts, settings, args.batch_size)
    print(
        f"generation ({args.dtype}, {len(prompts)} GSM8K prompts, <= {args.tokens} new tokens, {os.cpu_count()} cores):"
    )
    print(f"  unbatched            {single:8.1f} generated tokens/s ({single_tokens} tokens)")
    print(f"  batched (batch {args.batch_size:3d}) {batched:8.1f} generated tokens/s ({batched_tokens} tokens)")
    print(f"  speed-up             {batched / single:8.2f}x")

    problems = humaneval.load_problems(Path(args.data_dir))
    checks = [humaneval.check(p, p.canonical_solution) for p in problems]
    cores = os.cpu_count() or 1
    print(f"HumanEval execution ({len(checks)} canonical solutions):")
    for workers in (1, cores):
        bare, passed_bare = bare_per_second(problems, workers)
        sandboxed, passed = checks_per_second(checks, workers)
        print(
            f"  {workers} worker(s): bare {bare:7.1f} programs/s ({passed_bare} passed), "
            f"sandbox {sandboxed:7.1f} checks/s ({passed} passed), sandbox/bare {sandboxed / bare:5.2f}"
        )


if __name__ == "__main__":
    main()
