"""Benchmark: continuation scoring with logits at every position (now) against logits only where they are read (before).

``TransformersBackend.continuation_texts`` scores a continuation's tokens after its context (lm-eval multiple-choice
tasks, the confidence of a GSM8K answer). It computes the output layer at every position but the last, as lm-eval's
HF model does, so that a prompt scored alone equals lm-eval's float32 sums to the last digit (tests/tasks/test_lmeval.py).
The baseline is the earlier way: the output layer only at the positions read (``logits_to_keep``). Both run in one
process on the same requests (GSM8K questions with their reference solutions, the default model), alternating; the
figure is the ratio of their times, and the largest difference between their sums.

    .venv/bin/python bench/continuation_scoring.py [--items 32] [--batch-size 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def read_positions_only(backend, contexts: list[str], continuations: list[str], batch_size: int) -> list[float]:
    """The baseline: the output layer only at the positions whose next token is read."""
    import torch

    from dateeval.backends.base import ContinuationRequest, continuation_tokens

    pairs = [continuation_tokens(backend.encode, ContinuationRequest(c, k)) for c, k in zip(contexts, continuations)]
    totals = [0.0] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), i))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            ids, mask = backend._pad([pairs[i][0] for i in chunk], left=False)
            reads = [
                (row, p, pairs[i][0][p + 1])
                for row, i in enumerate(chunk)
                for p in range(pairs[i][1] - 1, len(pairs[i][0]) - 1)
            ]
            keep = torch.unique(torch.tensor([p for _, p, _ in reads]))
            logprobs = torch.log_softmax(
                backend.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits.float(), dim=-1
            )
            for row, position, token in reads:
                totals[chunk[row]] += float(logprobs[row, int(torch.searchsorted(keep, position)), token])
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args()

    from dateeval.backends.transformers import TransformersBackend
    from dateeval.models import resolve

    backend = TransformersBackend(resolve("smollm2-135m"), dtype="float32", device="cpu")
    rows = [
        json.loads(line)
        for line in (Path(args.data_dir) / "gsm8k" / "test.jsonl").read_text().splitlines()[: args.items]
    ]
    system = {"role": "system", "content": "You are a helpful assistant."}
    contexts = [
        backend.template.render([system, {"role": "user", "content": row["question"]}], mode="none").text
        for row in rows
    ]
    continuations = [row["answer"] for row in rows]
    ways = {
        "before (read positions only)": lambda: read_positions_only(backend, contexts, continuations, args.batch_size),
        "now (every position)": lambda: backend.continuation_texts(contexts, continuations, args.batch_size),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    sums: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            sums[name] = way()
            times[name].append(time.perf_counter() - started)
    before, now = (min(values) for values in times.values())
    difference = max(abs(a - b) for a, b in zip(*sums.values()))
    print(
        f"{args.items} GSM8K answers scored after their questions, batch {args.batch_size}, best of {args.rounds} rounds, one process:"
    )
    for name, values in times.items():
        print(f"  {name:30s} {min(values):7.2f} s")
    print(f"  now / before: {now / before:.2f}x the time; largest difference between the sums: {difference:.2e}")


if __name__ == "__main__":
    main()
