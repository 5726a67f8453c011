"""Benchmark: each explorer page's first visit in a real browser, as a user meets it after `./run.sh app`.

Keeps the demo's statistics first (in their own process, as `./run.sh app` does), starts the explorer on the built-in
demo as `./run.sh app` does, waits for its health check, then opens every page in headless Chromium (Debian's, driven
by Playwright) in a fresh browser context each time (a new session: the page's first visit), from the navigation until
its content has settled: Streamlit's script run finished and connected (its own record on the app's root element, what
Streamlit's end-to-end tests wait for), no spinner, every chart drawn, and still so 300 ms later (a rerun that starts
right after the first, e.g. query parameters written back, must be over too).

Each condition is measured in turn: ``quiet`` (the machine as it is: its load average is printed, so say whether it was
shared) and ``busy`` (CPU-bound loops on half the cores beside it, as ../shared/tools/quiet-and-busy does). Prints one
line per visit, then a Markdown table of the median (max) first visit per page and condition, with the CPU, the date,
the commit and the load averages, for docs/benchmarks.md.

    .venv/bin/python bench/explorer_browser.py [--repeats 3] [--pages overview,prompt] [--conditions quiet,busy]

Needs /usr/bin/chromium (apt-get install -y chromium).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
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
    "overview": ("Overview", ""),
    "curves": ("Curves", "curves"),
    "leaderboard": ("Leaderboard", "leaderboard"),
    "robust": ("What to report", "robust"),
    "flips": ("Flips", "flips"),
    "factors": ("Factors", "factors"),
    "prompt": ("Prompt", "prompt"),
    "run": ("Run", "run"),
}
TARGET_S = 1.5  # issue 64 §6: every page's first visit on a quiet machine
SETTLED = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    if (!app || app.dataset.testScriptState !== 'notRunning' || app.dataset.testConnectionState !== 'CONNECTED') return false;
    if (!document.querySelector('h1') || document.querySelector('[data-testid=stSpinner]')) return false;
    return [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every(chart => chart.querySelector('.main-svg'));
}"""
SETTLE_CHECK_MS = 300


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
    command = [sys.executable, "-m", "dateeval.cli.launch", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
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
    """Seconds from navigating to ``url`` in a new session until the page's content has settled (:data:`SETTLED`)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(SETTLED, timeout=180_000, polling=50)
    settled = time.perf_counter()
    page.wait_for_timeout(SETTLE_CHECK_MS)
    if not page.evaluate(SETTLED):  # a rerun started after the first finished: until that one has settled
        page.wait_for_function(SETTLED, timeout=180_000, polling=50)
        settled = time.perf_counter()
    context.close()
    return settled - started


@contextlib.contextmanager
def condition(name: str) -> Iterator[str]:
    """``quiet``: nothing added; ``busy``: a CPU-bound loop on half the cores (at least one) while measuring. Yields a
    description of it for the table."""
    loops = max(1, (os.cpu_count() or 2) // 2) if name == "busy" else 0
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(loops)]
    try:
        yield f"busy ({loops} of {os.cpu_count()} cores taken)" if loops else "quiet"
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def cpu() -> str:
    """The CPU's model name (lscpu) and core count."""
    found = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next((line.split(":", 1)[1].strip() for line in found.splitlines() if line.startswith("Model name")), "?")
    return f"{model}, {os.cpu_count()} cores"


def measure(browser, url: str, names: list[str], repeats: int) -> dict[str, list[float]]:
    """Every page's first visit ``repeats`` times (pages in turn, so a slow moment is spread over them)."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in names:
            times[name].append(first_visit(browser, f"{url}/{PAGES[name][1]}"))
            print(f"  repeat {repeat + 1}: {name:12s} {times[name][-1]:.2f} s", flush=True)
    return times


def table(results: dict[str, tuple[dict[str, list[float]], str]], opening: float) -> str:
    """The Markdown table: per page, each condition's median first visit (max), and whether the quiet one is on target."""
    conditions = list(results)
    head = "| page | " + " | ".join(f"{results[c][1]}: median (max)" for c in conditions) + f" | ≤ {TARGET_S} s quiet |"
    lines = [head, "|---|" + "---|" * (len(conditions) + 1)]
    lines.append(f"| the server's first page (imports, first read), once | {opening:.2f} s |" + " |" * len(conditions))
    for name in results[conditions[0]][0]:
        cells = [f"{statistics.median(results[c][0][name]):.2f} s ({max(results[c][0][name]):.2f})" for c in conditions]
        quiet = results.get("quiet")
        verdict = "" if quiet is None else ("yes" if statistics.median(quiet[0][name]) <= TARGET_S else "**no**")
        lines.append(f"| {PAGES[name][0]} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument("--conditions", default="quiet,busy", help="quiet, busy or both (in that order)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    names = args.pages.split(",")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    loads = [f"{os.getloadavg()[0]:.1f}"]
    process, url = serve(ROOT / "demo" / "store")
    results: dict[str, tuple[dict[str, list[float]], str]] = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            opening = first_visit(browser, url)  # the server's first script run (its imports), met once
            for name in args.conditions.split(","):
                with condition(name) as described:
                    print(f"{described}:", flush=True)
                    results[name] = (measure(browser, url, names, args.repeats), described)
                loads.append(f"{os.getloadavg()[0]:.1f}")
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(
        f"\n{dt.date.today()}, {cpu()}, commit {commit.strip()}, load average (1 min) at the start and after each "
        f"condition: {', '.join(loads)}; median of {args.repeats} new sessions per page (max):\n"
    )
    print(table(results, opening))


if __name__ == "__main__":
    main()
