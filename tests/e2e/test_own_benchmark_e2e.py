"""A researcher's own benchmark end to end (issue 20's "done when"): a spec'd JSONL multiple-choice dataset and a spec'd
generation dataset go through a CLI sweep, every explorer page in a real browser, the robust report and the export.

Kept small (2 questions, 3 dates and the no-date baseline, 8 generated tokens): CPU generation is the slow part.
Needs Debian's chromium for the browser part (``.ci/run`` installs it); skips with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import json

import pandas as pd
import pytest
from conftest import ROOT, run_cli
from test_browser import PAGES, _open, chromium, streamlit_server

EXAMPLES = ROOT / "docs" / "examples"
DATASETS = {"geography": EXAMPLES / "geography.toml", "arithmetic": EXAMPLES / "arithmetic.toml"}
DATES = "2024-01-01,2024-04-01,2024-07-01"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("own") / "store"
    args = [arg for path in DATASETS.values() for arg in ("--dataset", str(path))]
    ran = run_cli(
        "run",
        *args,
        "--limit",
        "2",
        "--dates",
        DATES,
        "--no-date",
        "--dtype",
        "float32",
        "--max-new-tokens",
        "8",
        "--store",
        str(store),
    )
    assert ran.returncode == 0, ran.stderr
    return store


def test_the_robust_report_and_the_export_cover_both_datasets(store, tmp_path):
    robust = run_cli("robust", "--store", str(store), "--json")
    assert robust.returncode == 0, robust.stderr
    records = {record["dataset"]: record for record in json.loads(robust.stdout)}
    assert set(records) == set(DATASETS)
    for record in records.values():  # a date-robust number, its sentence and what produced it, for each dataset
        (entry,) = record["entries"]
        assert (entry["n_dates"], entry["n_items"]) == (
            3,
            2,
        ) and "mean over 3 dates in 2024-01-01..2024-07-01" in entry["sentence"]
        assert entry["identity"]["model"] == "smollm2-135m" and entry["identity"]["task_key"]
    report = run_cli("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report" / "index.html").read_text()
    assert all(name in html for name in DATASETS)
    export = run_cli("export", "--store", str(store), "--out", str(tmp_path / "rows.parquet"))
    assert export.returncode == 0, export.stderr
    rows = pd.read_parquet(tmp_path / "rows.parquet")
    assert rows.groupby("dataset").size().to_dict() == {
        "geography": 8,
        "arithmetic": 8,
    }  # 2 questions x (3 dates + no date)
    assert rows.loc[rows["dataset"] == "arithmetic", "output"].str.len().gt(0).all()


@pytest.fixture(scope="module")
def own_server(store):
    yield from streamlit_server(store, EXAMPLES)


@pytest.fixture(scope="module")
def own_browser(own_server):
    yield from chromium()


SHOWS_A_DATASET = "() => ['geography', 'arithmetic'].some(name => document.documentElement.outerHTML.includes(name))"


@pytest.mark.parametrize("name", [name for name in PAGES if name != "run"])
def test_every_page_shows_the_researchers_datasets(own_browser, own_server, name):
    page, errors = _open(own_browser, f"{own_server}/{PAGES[name]}?store=mine")
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").count() == 0, page.locator(
        "[data-testid='stAlertContentError']"
    ).all_inner_texts()
    assert not errors, errors
    if name in ("overview", "curves", "robust", "flips", "factors"):
        # The page's text and its widgets' chosen values, waited for (up to 60 s): under the suite's load a page that
        # reruns itself may read as finished between its runs, before the dataset's name is drawn again.
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(SHOWS_A_DATASET, timeout=60_000)
        shown = page.content()
        assert "geography" in shown or "arithmetic" in shown, page.inner_text("body")[-2000:]
    page.close()
