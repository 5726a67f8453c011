"""Benchmark: continuous batching of pooled units against the static batches it replaced, and scoring batches' padding.

Generation: a GSM8K + mmlu_cot sweep at the tasks' default ``max_new_tokens``,
in this one process, both ways, task by task in alternating order (the
machine's load moves): today's path before this work (each task x date unit
one ``generate`` call in static batches, as a ``FixedBatch`` runs them: a batch runs
until its longest reply ends) against the sweep's path now (a task's units
pooled into one continuous batch, ``generate_units``, as the local executor
pools them). Prints wall time, generated tokens/s, forward passes, decode
steps and the decode positions computed for rows whose reply had already
ended, and how many replies differ (greedy, float32).

Scoring: the share of computed positions that are padding on real MMLU
(and bench/vs_lmeval.py's 100 ARC-Challenge) prompts, in fixed chunks of the batch size sorted by length (before) against
``scoring_batches`` (by length, for models that cannot pack) and packed
forwards (the default: filler only where a forward holds under
``packing.MIN_ROWS`` positions), and the share of prompts scored in a batch of
the full batch size (the paper's factor, Table 5); tokenizer only. Then how
far option probabilities move between today's fixed chunks at three batch
sizes and packed scoring (float32 forwards on 32 MMLU prompts).

    .venv/bin/python bench/continuous_batching.py [--prompts 32] [--dates 2] [--batch-size 8] [--max-new-tokens N] [--skip-scoring] [--skip-generation] [--scoring-dtype bfloat16]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dateeval.backends import packing
from dateeval.backends.base import FixedBatch, Generation, GenerationRequest, GenerationSettings
from dateeval.backends.scheduler.plans import common_prefix_length, packed_batches, scoring_batches
from dateeval.backends.transformers import TransformersBackend
from dateeval.cli import quiet_libraries
from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.engine.worker import prompt_input
from dateeval.models import resolve
from dateeval.tasks import build_task

DATES = [dt.date(2024, 1, 1) + dt.timedelta(days=37 * k) for k in range(12)]


def tasks(
    backend: TransformersBackend, data_dir: str, prompts: int, dates: int, max_new_tokens: int | None
) -> list[tuple[list[list[str]], GenerationSettings]]:
    """Per task: (each date's rendered prompts, generation settings), as the worker asks the backend."""
    from dataclasses import replace

    work = []
    for name in ("gsm8k", "mmlu_cot"):
        task = build_task(name, data_dir, Subset(limit=prompts))
        settings = replace(task.settings, max_new_tokens=max_new_tokens or task.settings.max_new_tokens)
        conditions = [Condition(date=day) for day in DATES[:dates]]
        work.append(
            (
                [
                    [prompt_input(backend, task.prompt(item, c).messages, c)[0] for item in task.items]
                    for c in conditions
                ],
                settings,
            )
        )
    return work


def run_both(
    backend: TransformersBackend, batch_size: int, work: list[tuple[list[list[str]], GenerationSettings]]
) -> tuple[dict, dict]:
    """Per path (before, now): seconds, replies per unit, forward passes, decode steps and decode row-positions.

    Each task goes through both, in alternating order, so a moving machine
    load does not favour one side; times are printed as they come (a killed
    run keeps them). The counts do not depend on the load: a decode step
    reads every weight once whatever its rows, so on memory-bound hardware
    (a GPU, or this CPU at small batches) time follows the steps.
    """

    def before(units: list[list[str]], settings: GenerationSettings) -> list[list[Generation]]:
        """Today's: one static-batched call per unit."""
        return [backend.generate_texts(prompts, settings, FixedBatch(batch_size)) for prompts in units]

    def now(units: list[list[str]], settings: GenerationSettings) -> list[list[Generation]]:
        """The sweep's: a task's units pooled into one continuous batch."""
        return backend.generate_units(
            [[GenerationRequest(prompt, settings) for prompt in prompts] for prompts in units], batch_size
        )

    paths = {path: {"seconds": 0.0, "replies": [], "forwards": 0, "steps": 0, "positions": 0} for path in (before, now)}
    forward, current = backend.model.forward, [None]

    def counted(**kwargs: Any) -> Any:  # the model's forward: its keyword arguments and its output
        rows, width = kwargs["input_ids"].shape
        tally = paths[current[0]]
        tally["forwards"] += 1
        if width == 1:
            tally["steps"], tally["positions"] = tally["steps"] + 1, tally["positions"] + rows
        return forward(**kwargs)

    backend.model.forward = counted
    try:
        for k, (units, settings) in enumerate(work):
            for path in (before, now) if k % 2 == 0 else (now, before):
                current[0], started = path, time.perf_counter()
                paths[path]["replies"] += path(units, settings)
                paths[path]["seconds"] += time.perf_counter() - started
            print(
                f"  task {k + 1}/{len(work)}: before {paths[before]['seconds']:.1f} s, now {paths[now]['seconds']:.1f} s so far "
                f"(load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        backend.model.forward = forward
    return paths[before], paths[now]


def discarded(
    backend: TransformersBackend,
    work: list[tuple[list[str], GenerationSettings]],
    replies: list[list[Generation]],
    batch_size: int,
) -> int:
    """Decode positions static batches compute after a row's reply ended: each batch runs to its longest reply."""
    total = 0
    for (prompts, _), unit in zip(work, replies):
        lengths = [len(tokens) for tokens in backend.encode(prompts)]
        order = sorted(range(len(prompts)), key=lambda i: (lengths[i], i))
        for start in range(0, len(order), batch_size):
            counts = [unit[i].n_tokens for i in order[start : start + batch_size]]
            total += len(counts) * max(counts) - sum(counts)
    return total


def padding(lengths: list[int], batches: list[list[int]], rows: int) -> tuple[float, float]:
    """(share of computed positions that are padding, share of prompts scored in a batch of exactly ``rows``)."""
    computed = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return 1 - sum(lengths) / computed, sum(len(batch) for batch in batches if len(batch) == rows) / len(lengths)


def probability_shifts(backend: TransformersBackend, data_dir: str, condition: Condition, items: int = 32) -> str:
    """Largest |change| of a renormalised option probability on MMLU between scorings of the same prompts.

    Today's fixed chunks (``FixedBatch``: length-sorted, padded, exactly the
    batch size, the paper's batch-size factor) at 8, 16 and 32 against each
    other and against the default packed scoring at batch 32 and at batch 1;
    and the time packed and padded-by-length scoring take on them.
    """
    import numpy as np

    from dateeval.tasks import mcqa

    task = build_task("mmlu", data_dir, Subset(limit=items))
    encoded = backend.encode(
        [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    labels = [list(mcqa.label_tokens(backend.tokenizer, 4).token_ids)] * len(encoded)
    runs = {f"fixed {rows}": backend.next_token_logprobs(encoded, labels, FixedBatch(rows)) for rows in (8, 16, 32)}
    runs.update({f"packed {rows}": backend.next_token_logprobs(encoded, labels, rows) for rows in (32, 1)})
    seconds: dict[str, list[float]] = {"packed": [], "by length": []}
    for _ in range(3):  # alternating: the machine's load moves
        for name, packs in (("packed", True), ("by length", False)):
            backend.runner.packs, started = packs, time.perf_counter()
            backend.next_token_logprobs(encoded, labels, 32)
            seconds[name].append(time.perf_counter() - started)
    backend.runner.packs = True
    print(
        "scoring the same prompts at batch 32, 3 rounds: "
        + ", ".join(f"{name} " + " / ".join(f"{t:.2f}" for t in times) + " s" for name, times in seconds.items())
    )
    probs = {
        name: np.vstack([mcqa.grade(np.asarray(lp, dtype=np.float64), 0).probs for lp in run])
        for name, run in runs.items()
    }
    pairs = [("packed 32", "packed 1"), ("fixed 8", "fixed 32"), ("fixed 16", "fixed 32"), ("fixed 8", "fixed 16")]
    pairs += [(f"fixed {rows}", "packed 32") for rows in (8, 16, 32)]
    return f"option probabilities, {len(encoded)} MMLU prompts, largest |change|: " + ", ".join(
        f"{a} vs {b} {np.abs(probs[a] - probs[b]).max():.1e}" for a, b in pairs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    parser.add_argument("--prompts", type=int, default=32, help="items per task")
    parser.add_argument("--dates", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: each task's own")
    parser.add_argument("--skip-generation", action="store_true")
    parser.add_argument("--skip-scoring", action="store_true")
    parser.add_argument(
        "--scoring-dtype", default="float32", choices=("float32", "bfloat16"), help="the probability comparison's dtype"
    )
    args = parser.parse_args()
    quiet_libraries()
    backend = TransformersBackend(resolve("smollm2-135m"), dtype="float32", device="cpu")
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", flush=True)

    condition = Condition(date=DATES[0])
    print(
        "scoring padding (sorted by length; share of computed positions that are padding; share of prompts in batches of the full batch size):"
    )
    scored = (
        () if args.skip_scoring else (("arc_challenge", 100), ("mmlu", 32), ("mmlu", 200), ("mmlu", None))
    )  # ARC x 100: vs_lmeval's
    for dataset, limit in scored:
        task = build_task(dataset, args.data_dir, Subset(limit=limit))
        encoded = backend.encode(
            [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
        )
        prefix = common_prefix_length(encoded)
        lengths = [len(tokens) - prefix for tokens in encoded]
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        for rows in (8, 32, 128):
            before = padding(lengths, [order[s : s + rows] for s in range(0, len(order), rows)], rows)
            budget = backend.runner.position_budget(prefix + max(lengths), logits=False)
            after = padding(lengths, scoring_batches(lengths, rows, budget, shared=prefix), rows)
            packed = packed_batches(lengths, rows, budget - prefix)
            filler = 1 - sum(lengths) / sum(max(packing.MIN_ROWS, sum(lengths[i] for i in batch)) for batch in packed)
            print(
                f"  {dataset:13s} {len(lengths):6d} prompts, batch {rows:3d}: before {before[0]:6.1%} padding ({before[1]:6.1%} in full batches), "
                f"by length {after[0]:6.1%} ({after[1]:6.1%}), packed {filler:6.1%} ({padding(lengths, packed, rows)[1]:6.1%})"
            )
    if not args.skip_scoring:
        scorer = (
            backend
            if args.scoring_dtype == "float32"
            else TransformersBackend(resolve("smollm2-135m"), dtype=args.scoring_dtype, device="cpu")
        )
        print(f"{args.scoring_dtype} " + probability_shifts(scorer, args.data_dir, condition))
    if args.skip_generation:
        return

    work = tasks(backend, args.data_dir, args.prompts, args.dates, args.max_new_tokens)
    backend.generate_texts(work[0][0][0][:2], type(work[0][1])(max_new_tokens=2), 2)  # warm-up
    before, now = run_both(backend, args.batch_size, work)
    units = [(prompts, settings) for unit_prompts, settings in work for prompts in unit_prompts]
    tokens = sum(reply.n_tokens for unit in now["replies"] for reply in unit)
    texts = [(a.text, b.text) for x, y in zip(before["replies"], now["replies"]) for a, b in zip(x, y)]
    print(
        f"generation (float32, GSM8K + mmlu_cot, {args.prompts} prompts x {args.dates} dates, batch {args.batch_size}, "
        f"max_new_tokens {args.max_new_tokens or 'task default'}; {tokens} tokens generated):"
    )
    ended = {"before": discarded(backend, units, now["replies"], args.batch_size), "now": 0}
    for name, path in (("before", before), ("now", now)):
        label = "static batches per unit" if name == "before" else "units pooled, continuous"
        print(
            f"  {label:25s} {path['seconds']:8.1f} s {tokens / path['seconds']:7.1f} tokens/s; {path['forwards']} forward passes, "
            f"{path['steps']} decode steps of {path['positions']} row-positions, {ended[name]} of them for ended rows"
        )
    print(
        f"  speed-up {before['seconds'] / now['seconds']:.2f}x in time, {before['steps'] / now['steps']:.2f}x in decode steps; "
        f"replies whose text differs: {sum(a != b for a, b in texts)} of {len(texts)}"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
