"""Benchmark: the vLLM backend against the transformers backend on the same sweep, in one run.

Both backends get the identical rendered prompts (ARC-Challenge items x dates
for next-token scoring, GSM8K items at one date for generation) with the same
batch size and dtype; both load before anything is timed, and the engine
load is reported apart. Prints item-dates/s, generated tokens/s, the
vLLM/transformers ratios and the option-probability parity on the scored
prompts. Needs the vLLM extra (``./run.sh test-vllm`` builds ``.venv-vllm``):

    .venv-vllm/bin/python bench/vllm_vs_transformers.py [--items 100] [--dates 4] [--prompts 16] [--tokens 64] [--dtype float32]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from dateeval.backends import BACKENDS, Backend, BackendOptions
from dateeval.backends.base import GenerationRequest, GenerationSettings, LabelRequest
from dateeval.cli import quiet_libraries
from dateeval.conditions import Condition, expand
from dateeval.data import Subset
from dateeval.engine.answers import model_view
from dateeval.models import resolve
from dateeval.tasks import build_task
from dateeval.tasks.base import Task
from dateeval.tasks.mcqa import grade


def render(backend: Backend, task: Task, item: object, condition: Condition) -> str:
    return backend.template.render(
        task.prompt(item, condition).messages,
        mode=condition.date_mode,
        day=condition.date,
        injection=condition.injection,
    ).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    parser.add_argument("--items", type=int, default=100, help="ARC-Challenge items per date")
    parser.add_argument("--dates", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=16, help="GSM8K prompts to generate for")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per GSM8K prompt")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    quiet_libraries()

    source = resolve("smollm2-135m")
    backends, loads = {}, {}
    for name in ("transformers", "vllm"):
        started = time.perf_counter()
        backends[name] = BACKENDS[name].open(source, BackendOptions(dtype=args.dtype, device="cpu"))
        loads[name] = time.perf_counter() - started
    reference = backends["transformers"]
    try:
        arc = build_task("arc_challenge", args.data_dir, Subset(limit=args.items))
        arc.prepare(model_view(reference))
        days = [dt.date(2024, 1, 1) + dt.timedelta(days=61 * i) for i in range(args.dates)]
        dated = [
            [
                LabelRequest(render(reference, arc, item, c), arc.labels.labels[: len(item.options)])
                for item in arc.items
            ]
            for c in expand(days)
        ]
        gsm = build_task("gsm8k", args.data_dir, Subset(limit=args.prompts))
        condition = expand([dt.date(2024, 3, 1)])[0]
        settings = GenerationSettings(max_new_tokens=args.tokens)
        generation = [GenerationRequest(render(reference, gsm, item, condition), settings) for item in gsm.items]

        rates, scores = {}, {}
        for name, backend in backends.items():
            backend.label_logprobs(dated[0][:2], 2)  # warm-up
            started = time.perf_counter()
            scores[name] = [
                score.logprobs for requests in dated for score in backend.label_logprobs(requests, args.batch_size)
            ]
            scored = time.perf_counter() - started
            started = time.perf_counter()
            replies = backend.generate(generation, args.batch_size)
            generated = time.perf_counter() - started
            tokens = sum(reply.n_tokens for reply in replies)
            rates[name] = (len(scores[name]) / scored, tokens / generated, tokens)
    finally:
        for backend in backends.values():
            backend.close()

    answers = [item.answer for item in arc.items] * args.dates
    ours = [grade(s, a) for s, a in zip(scores["vllm"], answers)]
    theirs = [grade(s, a) for s, a in zip(scores["transformers"], answers)]
    delta = max(float(np.abs(v.probs - t.probs).max()) for v, t in zip(ours, theirs))
    agreement = np.mean([v.pred == t.pred for v, t in zip(ours, theirs)])
    print(
        f"vLLM vs transformers ({args.dtype}, {os.cpu_count()} cores, batch {args.batch_size}): "
        f"{args.items} ARC-Challenge items x {args.dates} dates, {args.prompts} GSM8K prompts x <= {args.tokens} new tokens"
    )
    for name, (items, tokens, count) in rates.items():
        print(
            f"  {name:12s} load {loads[name]:6.1f} s   {items:7.2f} item-dates/s   {tokens:7.1f} generated tokens/s ({count} tokens)"
        )
    print(
        f"  ratio vLLM/transformers: {rates['vllm'][0] / rates['transformers'][0]:.2f}x item-dates/s, "
        f"{rates['vllm'][1] / rates['transformers'][1]:.2f}x generated tokens/s"
    )
    print(f"  parity: max |dp| {delta:.2e}, prediction agreement {agreement:.1%} over {len(ours)} item-dates")


if __name__ == "__main__":
    main()
