"""Benchmark: ``dateeval serve`` under hostile clients (issue 25 §4): what each request gets, how long it takes, the peak memory.

Why: one client must not be able to grow the server without bound, hold the
model after it hung up, or make the log unreadable. This starts the server
(this checkout's code, or ``--root`` another checkout's), sends the hostile
set one by one (10,000 stop strings, an 8,000-token echo with top-20
logprobs, a lone surrogate, an invalid temperature with logprobs, a long
generation whose client leaves after 1 s), then the largest requests it
accepts (an echo at the limit, a prompt filling the context, both while
others of their kind are in flight), then a burst of small concurrent
requests; prints each one's status and time, the server's peak RSS (VmHWM)
and the tracebacks in its log::

    .venv/bin/python bench/serve_hostile.py [--root PATH] [--concurrent 1000] [--timeout 120]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
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

from bench.http_backend import MODEL, START_TIMEOUT_S, _ready, server_command  # noqa: E402


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


def together(port: int, bodies: list[dict], timeout: float) -> list[tuple[str, float, str]]:
    """All ``bodies`` in flight at once, one connection each."""
    answers: list[tuple[str, float, str]] = [("", 0.0, "")] * len(bodies)
    threads = [threading.Thread(target=lambda i=i: answers.__setitem__(i, ask(port, bodies[i], timeout))) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def peak_rss_gb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) / (1 << 20)


def report(name: str, answer: tuple[str, float, str], pid: int) -> None:
    status, seconds, message = answer
    print(f"  {name:48s} {status:10s} {seconds:7.2f} s  peak RSS {peak_rss_gb(pid):5.2f} GB  {message}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose server runs (default: this one)")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--concurrent", type=int, default=1000, help="small requests sent at once")
    parser.add_argument("--timeout", type=float, default=120.0, help="each client's timeout, seconds")
    args = parser.parse_args()
    port, timeout = args.port, args.timeout
    with tempfile.TemporaryFile("w+") as log:
        command = server_command("dateeval", port)
        process = subprocess.Popen(command, cwd=args.root, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": args.root})
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
    print(f"server log: {len(text.splitlines())} lines, {text.count('Traceback')} tracebacks, {text.count('left before its answer')} 'left' lines")


def hostile(port: int, timeout: float, concurrent: int, pid: int) -> None:
    from transformers import AutoTokenizer

    from dateeval.models import converted_gguf_dir, resolve

    tokenizer = AutoTokenizer.from_pretrained(str(converted_gguf_dir(resolve(MODEL))))
    ids = tokenizer(" apple banana" * 5000)["input_ids"]
    small = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 1, "logprobs": 5}
    print(f"server PID {pid}, peak RSS after start {peak_rss_gb(pid):.2f} GB")
    report("10,000 stop strings", ask(port, {**small, "logprobs": None, "max_tokens": 4, "stop": ["x"] * 10_000}, timeout), pid)
    report("echo of 8,000 tokens, top-20 logprobs", ask(port, {"model": MODEL, "prompt": ids[:8000], "echo": True, "max_tokens": 0, "logprobs": 20}, timeout), pid)
    report("lone surrogate in the prompt", ask(port, b'{"model": "%s", "prompt": "Hi \\ud800", "max_tokens": 1}' % MODEL.encode(), timeout), pid)
    report("temperature 5 with logprobs", ask(port, {**small, "temperature": 5}, timeout), pid)
    report("a small request (for comparison)", ask(port, small, timeout), pid)
    report("generation of 2,000 tokens, client leaves at 1 s", ask(port, {**small, "logprobs": None, "max_tokens": 2000}, 1.0), pid)
    report("  then a small request", ask(port, small, timeout), pid)
    echo = {"model": MODEL, "echo": True, "max_tokens": 0, "logprobs": 20}
    answers = together(port, [{**echo, "prompt": ids[i : i + 2048]} for i in range(3)], timeout)
    report("3 echoes of 2,048 tokens (the limit), top-20, at once", max(answers, key=lambda a: a[1]), pid)
    filling = tokenizer.decode(ids[: 8190 - 1])  # decoded and tokenised again: the same 8,189 tokens
    answers = together(port, [{**small, "prompt": text, "logprobs": 20} for text in (filling, filling[1:])], timeout)
    report("2 prompts of 8,189 tokens + 1 (the context), top-20", max(answers, key=lambda a: a[1]), pid)
    started = time.monotonic()
    answers = together(port, [small] * concurrent, timeout)
    counts = Counter(status for status, _, _ in answers)
    slowest = max(seconds for _, seconds, _ in answers)
    print(f"  {concurrent} small requests at once: {dict(counts)} in {time.monotonic() - started:.1f} s (slowest {slowest:.1f} s), "
          f"peak RSS {peak_rss_gb(pid):.2f} GB")  # fmt: skip


if __name__ == "__main__":
    main()
