"""Benchmark: explorer page render times and peak memory on a large synthetic store.

Builds (once, under cache/bench-store-<items>x<models>) a store of 366 dates x
10,000 items x 5 models with the real schema, written through the store (one
checksummed file per model, as `dateeval compact` leaves it, with its
aggregates sidecar), then renders every page through Streamlit's AppTest and
prints cold and warm p50/p95 render times, the time of a new Flips selection
(another model) and the process's peak resident memory after each page. Each
render is a new session opening the page by its link on the bench store
(``?store=mine``): one script run. The first page's cold render includes the
process's imports and the store's first read. (Until 2026-11-30 each render
was three runs: the app's default page and the page on the demo store first,
then the store switched in the sidebar; figures before then are 3-6x higher
for the same page.) The
synthetic numbers are random (each model has its own accuracy level); only
their size matters here.

    .venv/bin/python bench/explorer_render.py [--items 10000] [--models 5] [--repeats 10] [--pages overview,flips]

``--no-sidecars`` removes the store's aggregates first, to time the renders of
an old store (written before sidecars existed), which sum its units in memory
(readers write nothing; ``keeping.keep`` writes the sidecars).
``--fresh-statistics`` removes only the statistics kept with the store
(``dateeval.results.sources.stored``: the headline, null bands, Table 5 rows) and computes
them again in a process of their own, as the end of a sweep or of ``compact``
does (``dateeval.keeping.keep``), printing its time and peak memory; the
renders then read them, as the first explorer process after a sweep does.
``--computed-on-render`` removes them without computing them, so that cold
renders compute them (a store no sweep of this version finished).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGES = ["overview", "curves", "leaderboard", "flips", "factors"]


def build(root: Path, n_items: int, n_models: int, n_dates: int = 366) -> None:
    """One compacted, checksummed file per model (with its aggregates), as `dateeval compact` would leave it: rows by
    question, ``COMPACTED_ROW_GROUP`` rows per row group."""
    from dateeval.store import Store, sidecars
    from dateeval.store.upkeep import COMPACTED_ROW_GROUP

    store = Store(root)
    rng = np.random.default_rng(0)
    days = [(dt.date(2024, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(n_dates)]
    items = np.array([f"synthetic/{i:06d}" for i in range(n_items)], dtype=object)
    answers = rng.integers(0, 4, n_items)
    for m in range(n_models):
        skill = 0.4 + 0.05 * m
        logits = rng.normal(0, 1, (n_items, 4))
        logits[np.arange(n_items), answers] += 4 * skill
        n = n_items * n_dates
        noisy = np.repeat(logits[None], n_dates, axis=0).reshape(n, 4) + rng.normal(0, 0.3, (n, 4))
        probs = np.exp(noisy) / np.exp(noisy).sum(1, keepdims=True)
        pred = probs.argmax(1)
        answer = np.tile(answers, n_dates)
        table = pa.table(
            {
                "model": pa.array([f"synthetic-{m}"] * n),
                "model_key": pa.array([f"key{m}"] * n),
                "dtype": pa.array(["bfloat16"] * n),
                "device": pa.array(["cpu"] * n),
                "dataset": pa.array(["mmlu"] * n),
                "task_key": pa.array(["task"] * n),
                "condition": pa.array(np.repeat(days, n_items)),
                "condition_key": pa.array(np.repeat(days, n_items)),
                "date_mode": pa.array(["date"] * n),
                "date": pa.array(np.repeat(days, n_items)),
                "system_prompt": pa.array(["s"] * n),
                "item_id": pa.array(np.tile(items, n_dates)),
                "correct": pa.array(pred == answer),
                "confidence": pa.array(probs.max(1)),
                "pred": pa.array(pred),
                "answer": pa.array(answer),
                "prompt_hash": pa.array(np.tile(items, n_dates)),
                "created_at": pa.array(["2026-11-29T00:00:00+00:00"] * n),
                "n_options": pa.array(np.full(n, 4)),
                "subject": pa.array(["synthetic"] * n),
                "date_text": pa.array(np.repeat(days, n_items)),
                "probs": pa.FixedSizeListArray.from_arrays(pa.array(probs.reshape(-1)), 4).cast(pa.list_(pa.float64())),
            }
        )
        sidecars.write_unit(
            store,
            root / f"synthetic-{m}" / "mmlu" / "compacted-synthetic.parquet",
            table.sort_by("item_id"),
            COMPACTED_ROW_GROUP,
        )


def open_page(page: str) -> AppTest:
    """A new session opening ``page`` on the bench store by its link (``?store=mine``), as a shared URL does: one run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
    at.query_params["store"] = "mine"
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="store").value == "mine"
    return at


def render_times(page: str, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        open_page(page)
        times.append(time.perf_counter() - start)
    return times


def new_flips_selections() -> list[float]:
    """Render time of the Flips page after picking each other model (each one a selection not seen before)."""
    at = open_page("flips")
    box = at.selectbox(key="entry")
    times = []
    for entry in box.options[1:]:
        start = time.perf_counter()
        at.selectbox(key="entry").set_value(entry).run()
        times.append(time.perf_counter() - start)
        assert not at.exception, [e.message for e in at.exception]
    return times


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def keep_statistics(root: Path) -> None:
    """Time ``keeping.keep`` (what a sweep's or compaction's end runs) in a process of its own, with its peak memory."""
    code = (
        "import resource, sys, time; start = time.perf_counter(); from dateeval.keeping import keep; from dateeval.store import Store; "
        "messages = keep(Store(sys.argv[1])); "
        "print(f'kept statistics (end of sweep / compact): {time.perf_counter() - start:.2f}s, '"
        "f'peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB', *messages)"
    )
    subprocess.run([sys.executable, "-c", code, str(root)], cwd=ROOT, check=True)


# A selection change per page on the demo: (widget kind, key, value).
DEMO_SELECTIONS = {
    "overview": None,
    "curves": ("selectbox", "metric", "ece"),
    "leaderboard": ("select_slider", "top_k", 1),
    "flips": ("selectbox", "show", "all"),
    "factors": ("selectbox", "factor_metric", "ece"),
    "prompt": ("date_input", "first", dt.date(2024, 3, 14)),
    "robust": None,
}


def demo_visits() -> None:
    """The demo as a new user meets it, in one session: the first render (imports, first read), each page's first visit,
    and one selection change per page. The store is a copy without sidecars (git ignores .aggregates); its statistics
    are computed and kept in a process of their own first, timed, as `./run.sh app` does before opening the explorer."""
    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "store"
        shutil.copytree(ROOT / "demo" / "store", store, ignore=shutil.ignore_patterns(".aggregates"))
        keep_statistics(store)  # as `./run.sh app` does before it opens the explorer
        os.environ["DATEEVAL_STORE"] = str(store)
        start = time.perf_counter()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.query_params["store"] = "mine"
        at.run()
        print(f"{'first render':22s} {time.perf_counter() - start:6.2f}s (Overview: imports, first read of the store)")
        for page, change in DEMO_SELECTIONS.items():
            if not (ROOT / "pages" / f"{page}.py").exists():
                continue
            start = time.perf_counter()
            at.switch_page(f"pages/{page}.py").run()
            visit = time.perf_counter() - start
            assert not at.exception, [e.message for e in at.exception]
            changed = ""
            if change is not None:
                kind, key, value = change
                start = time.perf_counter()
                getattr(at, kind)(key=key).set_value(value).run()
                changed = f"   selection change {time.perf_counter() - start:5.2f}s"
                assert not at.exception, [e.message for e in at.exception]
            print(f"{page:22s} first visit {visit:5.2f}s{changed}   peak RSS so far {peak_gb():.2f} GB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated, from " + ",".join(PAGES))
    parser.add_argument("--no-sidecars", action="store_true", help="remove the store's aggregates first (an old store)")
    parser.add_argument(
        "--fresh-statistics",
        action="store_true",
        help="compute the statistics kept with the store again first, as a sweep's end does",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="time the built-in demo store instead (a copy): first render, each page's first "
        "visit in one session, and a selection change per page (issue 17 part 5 targets: 2 s, 2 s, 1 s)",
    )
    parser.add_argument(
        "--computed-on-render",
        action="store_true",
        help="remove the statistics kept with the store first (cold renders compute them)",
    )
    args = parser.parse_args()
    if args.demo:
        demo_visits()
        return
    root = ROOT / "cache" / f"bench-store-{args.items}x{args.models}"
    if not root.exists():
        start = time.perf_counter()
        build(root, args.items, args.models)
        print(f"built {root} in {time.perf_counter() - start:.0f}s")
    # sidecars.FOLDER and store.tables.KEPT_FOLDER, spelled out: importing dateeval here would take its imports out of the cold render
    if args.no_sidecars:
        shutil.rmtree(root / ".aggregates", ignore_errors=True)
    if args.fresh_statistics or args.computed_on_render:
        shutil.rmtree(root / ".aggregates" / "derived", ignore_errors=True)
    if args.fresh_statistics:
        keep_statistics(root)
    os.environ["DATEEVAL_STORE"] = str(root)
    print(f"store: 366 dates x {args.items} items x {args.models} models = {366 * args.items * args.models:,} rows")
    for page in args.pages.split(","):
        times = render_times(page, args.repeats + 1)
        cold, warm = times[0], np.array(times[1:])
        print(
            f"{page:12s} cold {cold:6.2f}s   warm p50 {np.percentile(warm, 50):5.2f}s  p95 {np.percentile(warm, 95):5.2f}s"
            f"   peak RSS so far {peak_gb():.2f} GB",
            flush=True,
        )
        if page == "flips":
            new = np.array(new_flips_selections())
            print(
                f"{'flips':12s} new selection: mean {new.mean():5.2f}s  max {new.max():5.2f}s  ({len(new)} models)",
                flush=True,
            )
    print(f"peak RSS {peak_gb():.2f} GB")


if __name__ == "__main__":
    main()
