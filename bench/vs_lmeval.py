"""Benchmark: dateeval's in-process engine against lm-evaluation-harness's HF backend, whole processes.

Both engines get the identical rendered prompts (ARC-Challenge items x dates,
dateeval's own templating with the date in the system prompt), the same
converted model folder and dtype, and score the option letters. Each engine
runs as its own process, timed from start to exit (imports and model load
included: what a user waits for), with its peak resident memory. lm-eval runs
twice: one process for all dates, and one process per date (what a user of
lm-eval must run, the date being part of the model's arguments). The
probabilities are compared item by item, so a speed-up cannot come from
computing something else.

lm-eval is installed only for this benchmark, in its own virtual environment
with the same torch and transformers as ``.venv`` (created on first use):

    .venv/bin/python bench/vs_lmeval.py [--items 100] [--dates 3] [--dtype float32] [--lmeval-batch 32]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
LMEVAL_VENV = ROOT / ".venv-lmeval"
LMEVAL_VERSION = "0.4.13"


def prepare(args: argparse.Namespace, out: Path) -> dict:
    """Render the prompts with dateeval and write them, with the model folder, for both engines."""
    sys.path.insert(0, str(ROOT))
    from dateeval.conditions import expand
    from dateeval.data import Subset
    from dateeval.models import converted_gguf_dir, resolve
    from dateeval.prompting import ChatTemplate
    from dateeval.tasks import build_task
    from dateeval.tasks.mcqa import label_tokens

    source = resolve("smollm2-135m")
    folder = converted_gguf_dir(source)
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    template = ChatTemplate.from_tokenizer(tokenizer, name=source.name)
    task = build_task("arc_challenge", args.data_dir, Subset(limit=args.items))
    labels = label_tokens(tokenizer, max(len(item.options) for item in task.items)).labels
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=97 * i) for i in range(args.dates)]
    prompts = []
    for condition in expand(days):
        for item in task.items:
            messages = task.prompt(item, condition).messages
            text = template.render(
                messages, mode=condition.date_mode, day=condition.date, injection=condition.injection
            ).text
            chosen = labels[: len(item.options)]
            prompts.append(
                {
                    "date": condition.date.isoformat(),
                    "prompt": text,
                    "labels": [[label.text, label.token_id] for label in chosen],
                }
            )
    spec = {"folder": str(folder), "dtype": args.dtype, "prompts": prompts}
    out.write_text(json.dumps(spec))
    return spec


def run_dateeval(spec: dict, batch_size: int, marks: dict[str, float]) -> list[list[float]]:
    """Score with dateeval's transformers backend: one log-probability per option letter."""
    sys.path.insert(0, str(ROOT))
    from dateeval.backends.base import Label, LabelRequest
    from dateeval.backends.transformers import TransformersBackend
    from dateeval.models import ModelSource

    backend = TransformersBackend(
        ModelSource(name="smollm2-135m", kind="dir", location=spec["folder"]), dtype=spec["dtype"], device="cpu"
    )
    marks["loaded"] = time.perf_counter()
    scores: list[list[float]] = []
    by_date: dict[str, list[dict]] = {}
    for entry in spec["prompts"]:
        by_date.setdefault(entry["date"], []).append(entry)
    for entries in by_date.values():
        requests = [
            LabelRequest(e["prompt"], tuple(Label(text, token) for text, token in e["labels"])) for e in entries
        ]
        scores += [list(map(float, s)) for s in backend.label_logprobs(requests, batch_size)]
    return scores


def run_lmeval(spec: dict, batch_size: int, marks: dict[str, float]) -> list[list[float]]:
    """Score with lm-eval's HFLM: one loglikelihood request per (prompt, option letter).

    The requests enter at lm-eval's token level (what ``loglikelihood`` calls
    after tokenizing), because its text level moves the prompt's trailing
    newline into the continuation, which would score ``"\\n A"`` instead of
    the option letter after the assistant header.
    """
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=spec["folder"], dtype=spec["dtype"], device="cpu", batch_size=batch_size)
    marks["loaded"] = time.perf_counter()
    requests = []
    for e in spec["prompts"]:
        context = lm.tok_encode(e["prompt"])
        requests += [((e["prompt"], text), context, [token]) for text, token in e["labels"]]
    results = iter(lm._loglikelihood_tokens(requests, disable_tqdm=True))
    return [[float(next(results)[0]) for _ in e["labels"]] for e in spec["prompts"]]


def child(engine: str, spec_path: Path, out_path: Path, batch_size: int, threads: int | None) -> None:
    """Score in this process and write the scores with where the time went (imports+load, scoring)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    spec = json.loads(spec_path.read_text())
    marks: dict[str, float] = {}
    scores = (run_dateeval if engine == "dateeval" else run_lmeval)(spec, batch_size, marks)
    done = time.perf_counter()
    phases = {"start+load": marks["loaded"] - STARTED, "score": done - marks["loaded"]}
    out_path.write_text(json.dumps({"scores": scores, "phases": phases, "cpu": time.process_time()}))


def timed(command: list[str], out: Path) -> dict:
    """Run one engine as a whole process: its wall seconds, peak resident memory (GB) and its own phase times."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{command[0]} failed: {process.stderr.read().decode()[-2000:]}")
    return {"seconds": seconds, "peak_gb": usage.ru_maxrss / 1e6, **json.loads(out.read_text())}


def model_flops(spec: dict) -> tuple[float, float]:
    """FLOPs each engine must do: dateeval runs each date's shared prefix once and the output layer at the last
    position only; lm-eval runs every prompt whole and the output layer at every position.

    Per token: 2 x the weights of the decoder layers, plus attention over the tokens before it; the output layer is
    2 x hidden x vocabulary per position where it runs.
    """
    import transformers

    sys.path.insert(0, str(ROOT))
    from dateeval.backends.scheduler.plans import common_prefix_length

    config = json.loads((Path(spec["folder"]) / "config.json").read_text())
    hidden, layers, vocab = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]
    head_dim = hidden // config["num_attention_heads"]
    kv = config.get("num_key_value_heads", config["num_attention_heads"]) * head_dim
    per_layer = 2 * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * config["intermediate_size"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["folder"])

    def span(first: int, last: int) -> float:
        """Positions first..last-1 through every layer, each attending to the positions before it."""
        n = last - first
        return layers * (n * per_layer + 4 * hidden * (last * (last + 1) - first * (first + 1)) / 2)

    ours = theirs = 0.0
    by_date: dict[str, list[list[int]]] = {}
    for entry in spec["prompts"]:
        by_date.setdefault(entry["date"], []).append(tokenizer.encode(entry["prompt"], add_special_tokens=False))
    for encoded in by_date.values():
        prefix = common_prefix_length(encoded)  # what the transformers backend runs once per date
        ours += span(0, prefix) + sum(span(prefix, len(e)) + 2 * hidden * vocab for e in encoded)
        theirs += sum(span(0, len(e)) + 2 * hidden * vocab * len(e) for e in encoded)
    return ours, theirs


def matmul_peak(dtype: str, threads: int | None) -> float:
    """The machine's matrix-multiply rate (FLOP/s) in this dtype, measured now: the ceiling for any engine."""
    import torch

    from bench.machine import matmul_rate

    if threads:
        torch.set_num_threads(threads)
    return matmul_rate(getattr(torch, dtype))


def ensure_lmeval() -> Path:
    python = LMEVAL_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(LMEVAL_VENV)], check=True)
        pins = subprocess.run(
            [sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
        ).stdout.split()
        same = [
            p
            for p in pins
            if p.split("==")[0].lower() in {"torch", "transformers", "accelerate", "datasets", "numpy", "tokenizers"}
        ]
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"lm-eval[hf]=={LMEVAL_VERSION}", *same], check=True)
    return python


def probabilities(scores: list[list[float]]):
    import numpy as np

    out = []
    for row in scores:
        x = np.exp(np.array(row) - max(row))
        out.append(x / x.sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--dates", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--batch-size", type=int, default=32, help="dateeval's batch size")
    parser.add_argument("--lmeval-batch", type=int, default=32, help="lm-eval's batch size")
    parser.add_argument("--threads", type=int, help="torch threads in both engines (default: torch's own choice)")
    parser.add_argument("--child", choices=("dateeval", "lmeval"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.spec, args.out, args.batch_size, args.threads)
        return

    lmeval_python = ensure_lmeval()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = prepare(args, work / "all.json")
        by_date: dict[str, list[dict]] = {}
        for entry in spec["prompts"]:
            by_date.setdefault(entry["date"], []).append(entry)
        for day, entries in by_date.items():
            (work / f"{day}.json").write_text(json.dumps({**spec, "prompts": entries}))
        me = str(Path(__file__).resolve())
        threads = ["--threads", str(args.threads)] if args.threads else []

        def engine(python: str, name: str, spec_file: str, batch: int) -> dict:
            out = work / f"{name}-{spec_file}"
            return timed(
                [
                    python,
                    me,
                    "--child",
                    name,
                    "--spec",
                    str(work / spec_file),
                    "--out",
                    str(out),
                    "--batch-size",
                    str(batch),
                    *threads,
                ],
                out,
            )

        peak = matmul_peak(args.dtype, args.threads)
        ours = engine(sys.executable, "dateeval", "all.json", args.batch_size)
        theirs = engine(str(lmeval_python), "lmeval", "all.json", args.lmeval_batch)
        per_date = [engine(str(lmeval_python), "lmeval", f"{day}.json", args.lmeval_batch) for day in by_date]
        peak = max(peak, matmul_peak(args.dtype, args.threads))
    report(args, spec, ours, theirs, per_date, peak)


def report(args: argparse.Namespace, spec: dict, ours: dict, theirs: dict, per_date: list[dict], peak: float) -> None:
    import numpy as np

    a, b = probabilities(ours["scores"]), probabilities(theirs["scores"])
    delta = max(float(np.abs(x - y).max()) for x, y in zip(a, b))
    agreement = np.mean([x.argmax() == y.argmax() for x, y in zip(a, b)])
    flops = dict(zip(("dateeval", "lm-eval"), model_flops(spec)))
    per_date_seconds = sum(run["seconds"] for run in per_date)
    print(
        f"dateeval vs lm-eval {LMEVAL_VERSION} HF backend ({args.dtype}, {args.threads or 'default'} threads on {os.cpu_count()} cores): "
        f"{args.items} ARC-Challenge items x {args.dates} dates = {len(a)} prompts, whole processes"
    )
    print(f"  matmul peak measured in this run: {peak / 1e9:.0f} GFLOP/s")
    rows = [
        (f"dateeval (batch {args.batch_size})", ours, "dateeval"),
        (f"lm-eval, one process (batch {args.lmeval_batch})", theirs, "lm-eval"),
    ]
    for label, run, name in rows:
        phases = run["phases"]
        rate = flops[name] / phases["score"]
        print(
            f"  {label:36s} {run['seconds']:7.1f} s  (start+load {phases['start+load']:5.1f} s, scoring {phases['score']:6.1f} s)  "
            f"peak {run['peak_gb']:.2f} GB   model {flops[name] / 1e12:5.2f} TFLOP, {rate / 1e9:4.0f} GFLOP/s = {rate / peak:.2f} of peak"
        )
    print(
        f"  {'lm-eval, one process per date':36s} {per_date_seconds:7.1f} s   peak {max(r['peak_gb'] for r in per_date):.2f} GB"
    )
    print(
        f"  speed-up: {theirs['seconds'] / ours['seconds']:.2f}x against one lm-eval process, {per_date_seconds / ours['seconds']:.2f}x against one per date; "
        f"{theirs['peak_gb'] / ours['peak_gb']:.2f}x less peak memory; {flops['lm-eval'] / flops['dateeval']:.2f}x fewer FLOPs"
    )
    bound = theirs["seconds"] / (ours["phases"]["start+load"] + flops["dateeval"] / peak)
    print(f"  ceiling: with scoring at the matmul peak and the same start-up, dateeval would be {bound:.2f}x lm-eval")
    print(f"  parity: max |dp| {delta:.2e}, prediction agreement {agreement:.1%}")


if __name__ == "__main__":
    main()
