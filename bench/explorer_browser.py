"""Benchmark: each explorer page's first visit in a real browser, as a user meets it after `./run.sh app`.

Keeps the demo's statistics first (in their own process, as `./run.sh app` does), starts the explorer on the built-in
demo as `./run.sh app` does, waits for its health check, then opens every page in headless Chromium (Debian's, driven by Playwright) in a
fresh browser context each time (a new session: the page's first visit), from the navigation until the script has
finished (the title drawn, no spinner, Streamlit's status widget gone). Prints one line per page and repeat, then the
median first visit per page and the machine's load.

    .venv/bin/python bench/explorer_browser.py [--repeats 3] [--pages overview,prompt]

Needs /usr/bin/chromium (apt-get install -y chromium).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = {
    "overview": "",
    "curves": "curves",
    "leaderboard": "leaderboard",
    "robust": "robust",
    "flips": "flips",
    "factors": "factors",
    "prompt": "prompt",
    "run": "run",
}
FINISHED = "() => document.querySelector('h1') && !document.querySelector('[data-testid=stSpinner]') && !document.querySelector('[data-testid=stStatusWidget]')"


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(store: Path) -> tuple[subprocess.Popen, str]:
    """The explorer on ``store`` as `./run.sh app` starts it (statistics kept first), with its URL once healthy."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from dateeval.keeping import keep; from dateeval.store import Store; keep(Store({str(store)!r}))",
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )
    port = _port()
    command = [
        sys.executable,
        "-m",
        "dateeval.cli.launch",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=1)
            return process, url
        except OSError:
            time.sleep(0.25)
    process.terminate()
    raise SystemExit("the explorer did not start within 60 s")


def first_visit(browser, url: str) -> float:
    """Seconds from navigating to ``url`` in a new session until the page's script has finished."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(FINISHED, timeout=180_000, polling=50)
    page.wait_for_timeout(300)  # a rerun that starts right after the first (query parameters written) must be over too
    page.wait_for_function(FINISHED, timeout=180_000, polling=50)
    elapsed = time.perf_counter() - started - 0.3
    context.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", default=",".join(PAGES))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    process, url = serve(ROOT / "demo" / "store")
    try:
        times: dict[str, list[float]] = {name: [] for name in args.pages.split(",")}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            opening = first_visit(
                browser, url
            )  # the server's first script run (its imports), which the first user meets once
            for repeat in range(args.repeats):
                for name in times:
                    times[name].append(first_visit(browser, f"{url}/{PAGES[name]}"))
                    print(f"repeat {repeat + 1}: {name:12s} {times[name][-1]:.2f} s", flush=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(
        f"\nload average {os.getloadavg()[0]:.1f}; the server's first page (imports, first read) {opening:.2f} s; "
        f"median first visit over {args.repeats} sessions:"
    )
    for name, found in times.items():
        print(f"  {name:12s} {statistics.median(found):.2f} s  (max {max(found):.2f} s)")


if __name__ == "__main__":
    main()
