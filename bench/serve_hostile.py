"""Benchmark: ``dateeval serve`` under hostile clients (issue 25 §4): what each request gets, how long it takes, the peak memory.

Why: one client must not be able to grow the server without bound, hold the
model after it hung up, or make the log unreadable. This starts the server
(this checkout's code, or ``--root`` another checkout's), sends the hostile
set one by one (10,000 stop strings, an 8,000-token echo with top-20
logprobs, a lone surrogate, an invalid temperature with logprobs, a long
generation whose client leaves after 1 s, and how soon the server is free
after it), then the largest requests it accepts (an echo at the limit, a
prompt filling the context, both while others of their kind are in flight),
bodies of the worst JSON (16 MB of empty lists) eight at once, a thousand
idle connections, then a burst of small concurrent requests; prints each
one's status and time, the server's peak RSS (VmHWM) during it and the
tracebacks in its log. ``--passes`` first times, in this process, one forward
pass at each of the server's bounds and the longest stretch of it between
two points where a departed client's pass is abandoned::

    .venv/bin/python bench/serve_hostile.py [--root PATH] [--concurrent 1000] [--timeout 120] [--passes]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.http_backend import MODEL, START_TIMEOUT_S, _ready, server_command


def ask(port: int, body: bytes | dict, timeout: float, path: str = "/v1/completions") -> tuple[str, float, str]:
    """(status or what went wrong, seconds, the error message if any)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        return str(response.status), time.monotonic() - started, answer.get("error", {}).get("message", "")[:90]
    except TimeoutError:
        return "timed out", time.monotonic() - started, ""
    except OSError as error:
        return type(error).__name__, time.monotonic() - started, ""
    finally:
        connection.close()


def together(port: int, bodies: list[bytes | dict], timeout: float) -> list[tuple[str, float, str]]:
    """All ``bodies`` in flight at once, one connection each."""
    answers: list[tuple[str, float, str]] = [("", 0.0, "")] * len(bodies)
    threads = [
        threading.Thread(target=lambda i=i: answers.__setitem__(i, ask(port, bodies[i], timeout)))
        for i in range(len(bodies))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def rss_gb(pid: int, field: str = "VmHWM") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith(field)).split()[1]) / (1 << 20)


def reset_peak(pid: int) -> float:
    """Start the process's peak RSS (VmHWM) again from its RSS now, which is returned: each case reports its own peak over its start."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return rss_gb(pid, "VmRSS")


def report(name: str, answer: tuple[str, float, str], pid: int, start: list[float]) -> None:
    """One case's answer; ``start`` holds the RSS its case began with (and is set for the next case)."""
    status, seconds, message = answer
    peak = rss_gb(pid)
    print(
        f"  {name:52s} {status:10s} {seconds:7.2f} s  peak RSS {peak:5.2f} GB (+{peak - start[0]:4.2f})  {message}",
        flush=True,
    )
    start[0] = reset_peak(pid)


def seconds_until_idle(pid: int, since: float, quiet_s: float = 0.3) -> float:
    """Seconds from ``since`` until the process last used CPU before a ``quiet_s`` stretch without: when its work ended."""

    def cpu_ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    ticks, changed = cpu_ticks(), time.monotonic()
    while time.monotonic() - changed < quiet_s:
        time.sleep(0.005)
        if (now := cpu_ticks()) != ticks:
            ticks, changed = now, time.monotonic()
    return max(changed - since, 0.0)


def passes_at_the_bounds() -> None:
    """One forward pass at each bound, in this process: its seconds and its longest stretch between two checkpoints."""
    import torch

    from dateeval.backends.interrupt import checkpoints
    from dateeval.backends.transformers import TransformersBackend
    from dateeval.models import resolve
    from dateeval.serve.queue import BATCH_TOKENS, MAX_BATCH, MAX_ECHO_POSITIONS

    backend = TransformersBackend(resolve(MODEL), dtype="float32", device="cpu")
    marks: list[float] = []
    for module in checkpoints(backend.model):
        module.register_forward_pre_hook(lambda *_: marks.append(time.monotonic()))
    ids = backend.encode([" apple banana" * 5000])[0]
    shapes = {  # rows x tokens, and the positions whose logits the server's pass computes
        f"a prompt filling the context (1 x {backend.context_length:,}), last logits": (1, backend.context_length, 1),
        f"an echo at the limit (1 x {MAX_ECHO_POSITIONS:,}), every position's logits": (1, MAX_ECHO_POSITIONS, 0),
        f"a full scoring batch ({MAX_BATCH} x {BATCH_TOKENS // MAX_BATCH}), last logits": (
            MAX_BATCH,
            BATCH_TOKENS // MAX_BATCH,
            1,
        ),
    }
    for name, (rows, width, keep) in shapes.items():
        marks.clear()
        with torch.inference_mode():
            started = time.monotonic()
            backend.model(input_ids=torch.tensor([ids[:width]] * rows), logits_to_keep=keep)
            ended = time.monotonic()
        stretches = [b - a for a, b in zip([started, *marks], [*marks, ended])]
        print(
            f"  {name:60s} pass {ended - started:6.2f} s, longest stretch between checkpoints {max(stretches):5.2f} s",
            flush=True,
        )


def idle_connections(port: int, count: int, pid: int) -> None:
    """``count`` connections that send nothing (each holds a server thread until it closes or IDLE_S passes): the server's RSS."""
    before = reset_peak(pid)
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count)]
    time.sleep(5)
    held = rss_gb(pid, "VmRSS")
    for connection in sockets:
        connection.close()
    print(
        f"  {count} idle connections: RSS {before:.2f} -> {held:.2f} GB ({(held - before) * (1 << 20) / count:.0f} KB each), "
        f"peak {rss_gb(pid):.2f} GB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose server runs (default: this one)")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--concurrent", type=int, default=1000, help="small requests sent at once")
    parser.add_argument("--timeout", type=float, default=120.0, help="each client's timeout, seconds")
    parser.add_argument(
        "--passes", action="store_true", help="first time one forward pass at each bound, in this process"
    )
    args = parser.parse_args()
    port, timeout = args.port, args.timeout
    if args.passes:
        passes_at_the_bounds()
    with tempfile.TemporaryFile("w+") as log:
        command = server_command("dateeval", port)
        process = subprocess.Popen(
            command, cwd=args.root, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": args.root}
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _ready(f"http://127.0.0.1:{port}/v1"):
                if process.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the server did not start")
                time.sleep(1)
            hostile(port, timeout, args.concurrent, process.pid)
        finally:
            process.terminate()
            process.wait(timeout=60)
        log.seek(0)
        text = log.read()
    print(
        f"server log: {len(text.splitlines())} lines, {text.count('Traceback')} tracebacks, {text.count('left before its answer')} 'left' lines"
    )


def hostile(port: int, timeout: float, concurrent: int, pid: int) -> None:
    from transformers import AutoTokenizer

    from dateeval.models import converted_gguf_dir, resolve

    tokenizer = AutoTokenizer.from_pretrained(str(converted_gguf_dir(resolve(MODEL))))
    ids = tokenizer(" apple banana" * 5000)["input_ids"]
    small = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 1, "logprobs": 5}
    print(f"server PID {pid}, peak RSS after start {rss_gb(pid):.2f} GB")
    idle_connections(port, 1000, pid)
    start = [reset_peak(pid)]
    report(
        "10,000 stop strings",
        ask(port, {**small, "logprobs": None, "max_tokens": 4, "stop": ["x"] * 10_000}, timeout),
        pid,
        start,
    )
    report(
        "echo of 8,000 tokens, top-20 logprobs",
        ask(port, {"model": MODEL, "prompt": ids[:8000], "echo": True, "max_tokens": 0, "logprobs": 20}, timeout),
        pid,
        start,
    )
    report(
        "lone surrogate in the prompt",
        ask(port, b'{"model": "%s", "prompt": "Hi \\ud800", "max_tokens": 1}' % MODEL.encode(), timeout),
        pid,
        start,
    )
    report("temperature 5 with logprobs", ask(port, {**small, "temperature": 5}, timeout), pid, start)
    report("a small request (for comparison)", ask(port, small, timeout), pid, start)
    leaves = ask(port, {**small, "logprobs": None, "max_tokens": 2000}, 1.0)
    print(
        f"  client leaves mid-generation: seconds until the server is free (its CPU idle) {seconds_until_idle(pid, time.monotonic()):.3f} s"
    )
    report("generation of 2,000 tokens, client leaves at 1 s", leaves, pid, start)
    report("  then a small request", ask(port, small, timeout), pid, start)
    echo = {"model": MODEL, "echo": True, "max_tokens": 0, "logprobs": 20}
    answers = together(port, [{**echo, "prompt": ids[i : i + 2048]} for i in range(3)], timeout)
    report("3 echoes of 2,048 tokens (the limit), top-20, at once", max(answers, key=lambda a: a[1]), pid, start)
    filling = tokenizer.decode(ids[: 8190 - 1])  # decoded and tokenised again: the same 8,189 tokens
    answers = together(port, [{**small, "prompt": text, "logprobs": 20} for text in (filling, filling[1:])], timeout)
    report("2 prompts of 8,189 tokens + 1 (the context), top-20", max(answers, key=lambda a: a[1]), pid, start)
    worst = b'{"model": "%s", "prompt": "Hi", "max_tokens": 1, "x": [%s[]]}' % (
        MODEL.encode(),
        b"[]," * ((16 << 20) // 3 - 40),
    )
    answers = together(port, [worst] * 8, timeout)
    report(
        f"8 bodies of 16 MB of empty lists at once: {dict(Counter(a[0] for a in answers))}",
        max(answers, key=lambda a: a[1]),
        pid,
        start,
    )
    started = time.monotonic()
    answers = together(port, [small] * concurrent, timeout)
    counts = Counter(status for status, _, _ in answers)
    slowest = max(seconds for _, seconds, _ in answers)
    print(
        f"  {concurrent} small requests at once: {dict(counts)} in {time.monotonic() - started:.1f} s (slowest {slowest:.1f} s), "
        f"peak RSS {rss_gb(pid):.2f} GB"
    )


if __name__ == "__main__":
    main()
