"""Benchmark: the HTTP backend against a local OpenAI-compatible server, and in-process scoring of the same prompts.

Why: a sweep over an endpoint pays per request (HTTP, JSON, the server's
own scheduling); this shows how much, and how far concurrency buys it back.
The same rendered ARC-Challenge prompts (items x dates, bare-letter labels so
that each item is one request: SmolLM2's bare letters are among the top 20)
are scored in this process (transformers, float32, batched) and over HTTP in
completions mode at each concurrency; prints requests/s, the ratio to
in-process item-dates/s, and the largest log-probability difference as a
check that both computed the same thing. The server is vLLM's
(``.venv-vllm``, the default model's converted folder, float32, eager, prefix
caching), dateeval's own (``python -m dateeval serve``, which batches the
requests in flight), or one already running (``--server URL#MODEL``);
several, comma-separated, are measured in one run, in turn at each
concurrency, against the same in-process rate (say this branch's server
and another checkout's)::

    .venv/bin/python bench/http_backend.py [--server vllm|dateeval|URL#MODEL[,...]] [--items 32] [--dates 2] [--concurrency 1,8,32]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from dateeval.backends.base import BackendOptions, LabelRequest
from dateeval.backends.openai_api import OpenAIBackend, parse_endpoint
from dateeval.backends.transformers import TransformersBackend
from dateeval.cli import quiet_libraries
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.answers import model_view
from dateeval.models import converted_gguf_dir, resolve
from dateeval.tasks import build_task

MODEL = "smollm2-135m"
START_TIMEOUT_S = 600


def server_command(kind: str, port: int) -> list[str]:
    """The command that serves the default model on ``port``: vLLM's OpenAI server, or dateeval's own."""
    if kind == "dateeval":
        return [sys.executable, "-m", "dateeval", "serve", "--model", MODEL, "--port", str(port)]
    folder = converted_gguf_dir(resolve(MODEL))  # vLLM reads the converted safetensors folder, as the vllm backend does
    return [
        str(ROOT / ".venv-vllm" / "bin" / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(folder),
        "--served-model-name",
        MODEL,
        "--dtype",
        "float32",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--enable-prefix-caching",
        "--max-logprobs",
        "20",
        "--kv-cache-memory-bytes",
        str(2 << 30),
    ]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def serving(kind: str, port: int) -> Iterator[str]:
    """Start a server, wait until it answers ``/models``, yield ``URL#MODEL``, stop it (its log is printed if it dies)."""
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            server_command(kind, port),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _ready(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"the {kind} server did not start:\n{log.read()[-3000:]}")
                time.sleep(2)
            yield f"{url}#{MODEL}"
        finally:
            process.terminate()
            process.wait(timeout=60)


def prompts(reference: TransformersBackend, data_dir: str, items: int, dates: int) -> list[LabelRequest]:
    """ARC-Challenge items x dates, rendered by the model's own template, bare-letter labels."""
    task = build_task("arc_challenge", data_dir, Subset(limit=items), label_style="label")
    task.prepare(model_view(reference))
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=61 * i) for i in range(dates)]
    return [
        LabelRequest(
            reference.template.render(
                task.prompt(item, c).messages, mode=c.date_mode, day=c.date, injection=c.injection
            ).text,
            task.labels.labels[: len(item.options)],
        )
        for c in expand(days)
        for item in task.items
    ]


def timed(
    score: Callable[[list[LabelRequest]], list[np.ndarray]], requests: list[LabelRequest]
) -> tuple[float, list[np.ndarray]]:
    """(requests per second, scores) of ``score``, a backend's label_logprobs."""
    started = time.perf_counter()
    scores = score(requests)
    return len(requests) / (time.perf_counter() - started), scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server",
        default="vllm",
        help="vllm, dateeval, or URL#MODEL of a server already running; several, comma-separated",
    )
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--items", type=int, default=32, help="ARC-Challenge items per date")
    parser.add_argument("--dates", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="in-process batch size")
    parser.add_argument("--concurrency", default="1,8,32", help="HTTP requests in flight, comma-separated")
    args = parser.parse_args()
    quiet_libraries()

    reference = TransformersBackend(resolve(MODEL), dtype="float32", device="cpu")
    requests = prompts(reference, args.data_dir, args.items, args.dates)
    reference.label_logprobs(requests[:2], 2)  # warm-up

    def in_process() -> tuple[float, list[np.ndarray]]:
        return timed(lambda r: reference.label_logprobs(r, args.batch_size), requests)

    before, local = in_process()
    print(
        f"{len(requests)} ARC-Challenge prompts ({args.items} items x {args.dates} dates), float32, {os.cpu_count()} cores"
    )

    servers = args.server.split(",")
    with ExitStack() as stack:
        # Every server up at once, measured in turn at each concurrency: on a shared machine the load moves.
        specs = [
            stack.enter_context(serving(s, args.port + i) if s in ("vllm", "dateeval") else nullcontext(s))
            for i, s in enumerate(servers)
        ]
        rates: dict[str, dict[int, tuple[float, float]]] = {server: {} for server in servers}
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for server, spec in zip(servers, specs):
                rates[server][concurrency] = over_http(spec, concurrency, requests, local)
    # Measured before and after the HTTP runs: on a shared machine the load moves, and the mean is the fairer reference.
    after = in_process()[0]
    local_rate = (before + after) / 2
    print(
        f"  in-process (transformers, batch {args.batch_size}): {local_rate:7.2f} item-dates/s (before {before:.2f}, after {after:.2f})"
    )
    for server, at in rates.items():
        print(f"  HTTP, completions mode, {server} server:")
        for concurrency, (rate, delta) in at.items():
            print(
                f"    concurrency {concurrency:3d}: {rate:7.2f} requests/s = {rate / local_rate:5.2f}x in-process   (max |d logprob| {delta:.1e})"
            )


def over_http(
    spec: str, concurrency: int, requests: list[LabelRequest], local: list[np.ndarray]
) -> tuple[float, float]:
    """(requests per second at this concurrency, the largest log-probability difference from in-process scoring)."""
    http = OpenAIBackend(parse_endpoint(spec), BackendOptions(concurrency=concurrency, timeout_s=600))
    try:
        http.label_logprobs(requests[:2], 2)  # warm-up: connections, the server's first batch
        before = batch_sizes(spec)
        rate, remote = timed(lambda r: http.label_logprobs(r, len(r)), requests)
        after = batch_sizes(spec)
    finally:
        http.close()
    if after is not None:  # dateeval's server says how it batched them
        counts = {size: after.get(size, 0) - before.get(size, 0) for size in sorted(after, key=int)}
        print(
            f"    ({spec.split('#')[0]}, {concurrency} in flight: batches of size x count {', '.join(f'{k}x{v}' for k, v in counts.items() if v)})"
        )
    return rate, max(float(np.abs(a - b).max()) for a, b in zip(remote, local))


def batch_sizes(spec: str) -> dict[str, int] | None:
    """The server's count of next-token batches by size (``GET /v1/stats``, dateeval's server only), else None."""
    import json

    try:
        with urllib.request.urlopen(f"{spec.split('#')[0]}/stats", timeout=5) as answer:
            return json.load(answer)["batches"].get("top", {})
    except (OSError, ValueError, KeyError):
        return None


if __name__ == "__main__":
    main()
