"""Benchmark: a paper-size model's date-sweep throughput on a GPU (issue 10 part 5), with random weights.

The device machine has torch and transformers but no network and takes at most
64 MiB from here, so no real weights travel: the model is Llama-3.1-8B's
architecture (the values of its config.json, :data:`LLAMA_3_1_8B`) with random
weights made on the device, saved to a temporary folder and loaded back through
the transformers backend's own path (``TransformersBackend``: the date's
shared prefix once, batches sorted by length, the output layer at the last
position), which is what a sweep runs. Throughput depends on the architecture
and the prompts' lengths, not on the weights' values.

Only a tokenizer travels. ``--export`` (run here, once) writes the default
model's tokenizer and chat template (a few MB) to ``cache/gpu-bench`` together
with the token length of every MMLU question the task loads, as this tokenizer renders it
(numbers only, no benchmark text); on the device each prompt is a dated chat
prompt whose user message has one of those lengths (random words). Its token
ids are all below Llama's vocabulary size, so Llama's 128,256-word output layer
is kept. Prints item-dates/s, prompt tokens/s, the model FLOP rate against the
measured matmul rate at the same dtype, and the time the paper's full MMLU
sweep (366 dates x 14,042 questions) would take at this rate::

    .venv/bin/python bench/gpu_throughput.py --export                  # here, once
    python bench/gpu_throughput.py --device cuda                       # on the device: carry cache/gpu-bench
    .venv/bin/python bench/gpu_throughput.py --size tiny --device cpu  # a smoke run anywhere

vLLM cannot be measured there: its wheel (133 MB) exceeds what a device run carries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from bench.machine import matmul_rate, sync
from dateeval.backends.base import LabelRequest
from dateeval.backends.scheduler.plans import common_prefix_length
from dateeval.backends.transformers import TransformersBackend
from dateeval.conditions import DEFAULT_SYSTEM_PROMPT
from dateeval.models import resolve
from dateeval.tasks import mcqa

BUNDLE = ROOT / "cache" / "gpu-bench"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
PAPER_SWEEP = 366 * 14_042  # item-dates of the paper's full MMLU sweep
# meta-llama/Llama-3.1-8B-Instruct's config.json (architecture only).
LLAMA_3_1_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
# The same shape, small enough for a smoke run on a CPU.
TINY = {
    **LLAMA_3_1_8B,
    "hidden_size": 256,
    "intermediate_size": 896,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


def export(data_dir: str) -> None:
    """Write the default model's tokenizer and MMLU's prompt lengths (under it) to ``BUNDLE``, for the device run."""
    from dateeval.conditions import Condition
    from dateeval.data import Subset
    from dateeval.tasks import build_task

    backend = TransformersBackend(resolve("smollm2-135m"), dtype="float32", device="cpu")
    BUNDLE.mkdir(parents=True, exist_ok=True)
    backend.tokenizer.save_pretrained(BUNDLE)
    task = build_task("mmlu", data_dir, Subset())
    condition = Condition(date_mode="date", date=dt.date(2024, 1, 1))
    users = [task.prompt(item, condition).messages[-1]["content"] for item in task.items]
    lengths = [len(tokens) for tokens in backend.encode(users)]
    (BUNDLE / "mmlu_user_lengths.json").write_text(json.dumps(lengths))
    kept = sorted(path.name for path in BUNDLE.iterdir())
    size = sum(path.stat().st_size for path in BUNDLE.iterdir())
    print(
        f"wrote {BUNDLE} ({size / 2**20:.1f} MiB: {', '.join(kept)}); {len(lengths)} MMLU questions, mean {np.mean(lengths):.0f} tokens"
    )


def random_model(folder: Path, size: str, dtype: str, device: str) -> None:
    """Save a Llama-architecture model with random weights and the bundled tokenizer to ``folder`` (as a Hub folder)."""
    import transformers

    config = transformers.LlamaConfig(**(LLAMA_3_1_8B if size == "8b" else TINY))
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    del model
    for name in TOKENIZER_FILES:
        if (BUNDLE / name).exists():
            (folder / name).write_bytes((BUNDLE / name).read_bytes())


def prompts(backend: TransformersBackend, lengths: list[int], day: dt.date, seed: int) -> list[str]:
    """Dated chat prompts whose user messages have (about) the given token lengths: random words, each a known
    number of tokens with its leading space, so no merge crosses them."""
    rng = np.random.default_rng(seed)
    words = sorted(w for w in backend.tokenizer.get_vocab() if w.isascii() and w.isalpha() and 3 <= len(w) <= 9)[:5000]
    sizes = [
        len(tokens) for tokens in backend.tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"]
    ]
    out = []
    for length in lengths:
        user, used = [], 0
        while used < length:
            pick = int(rng.integers(len(words)))
            user.append(words[pick])
            used += sizes[pick]
        messages = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": " ".join(user)}]
        out.append(backend.template.render(messages, mode="date", day=day).text)
    return out


def flops_per_token(config: dict) -> float:
    """Model FLOPs per computed token without the output layer (which runs at one position per prompt)."""
    hidden, layers, inter = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]
    kv = hidden * config["num_key_value_heads"] // config["num_attention_heads"]
    return 2 * layers * (hidden * (2 * hidden + 2 * kv) + 3 * hidden * inter)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--export", action="store_true", help="write the tokenizer and MMLU's prompt lengths to cache/gpu-bench (here)"
    )
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--size", default="8b", choices=("8b", "tiny"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--items", type=int, default=512, help="questions per date (drawn from MMLU's lengths)")
    parser.add_argument("--dates", type=int, default=3, help="dates timed after one warm-up date")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    if args.export:
        export(args.data_dir)
        return
    if not (BUNDLE / "mmlu_user_lengths.json").exists():
        sys.exit(f"gpu_throughput: {BUNDLE} is missing: run it with --export first (here), then carry cache/gpu-bench")
    lengths = (
        np.random.default_rng(0)
        .choice(json.loads((BUNDLE / "mmlu_user_lengths.json").read_text()), size=args.items)
        .tolist()
    )
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        random_model(Path(folder), args.size, args.dtype, args.device)
        backend = TransformersBackend(resolve(folder), dtype=args.dtype, device=args.device)
        load_seconds = time.perf_counter() - start
    labels = mcqa.label_tokens(backend.tokenizer, 4).labels
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=7 * i) for i in range(args.dates + 1)]
    batches = {
        day: [LabelRequest(text, labels) for text in prompts(backend, lengths, day, seed=i)]
        for i, day in enumerate(days)
    }
    backend.label_logprobs(batches[days[0]], args.batch_size)  # warm-up: kernels, allocator
    sync(args.device)
    start = time.perf_counter()
    for day in days[1:]:
        backend.label_logprobs(batches[day], args.batch_size)
    sync(args.device)
    seconds = time.perf_counter() - start
    config = LLAMA_3_1_8B if args.size == "8b" else TINY
    encoded = [backend.encode([request.prompt for request in batches[day]]) for day in days[1:]]
    total = sum(len(tokens) for date in encoded for tokens in date)
    computed = sum(
        sum(len(tokens) for tokens in date) - (len(date) - 1) * common_prefix_length(date) for date in encoded
    )
    achieved = computed * flops_per_token(config) / seconds
    peak = matmul_rate(getattr(torch, args.dtype), args.device, size=8192 if args.device == "cuda" else 2048)
    rate = args.items * args.dates / seconds
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({os.cpu_count()} cores)"
    print(
        f"Llama-3.1-8B architecture ({args.size}), random weights, {args.dtype} on {device}; transformers {__import__('transformers').__version__}"
    )
    print(
        f"  {args.items} MMLU-length prompts x {args.dates} dates, batch {args.batch_size}; model saved and loaded in {load_seconds:.0f} s"
    )
    print(f"  item-dates/s           : {rate:9.1f}")
    print(
        f"  prompt tokens/s        : {total / seconds:9.0f}  (computed {computed / seconds:.0f}/s: each date's shared prefix once)"
    )
    print(
        f"  model FLOP rate        : {achieved / 1e12:9.1f} TFLOP/s = {achieved / peak:.2f} of the measured {args.dtype} matmul rate ({peak / 1e12:.0f} TFLOP/s)"
    )
    print(
        f"  paper's MMLU sweep     : {PAPER_SWEEP:,} item-dates -> {PAPER_SWEEP / rate / 3600:.1f} h on one such device"
    )


if __name__ == "__main__":
    main()
