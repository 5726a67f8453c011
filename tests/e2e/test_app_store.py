"""The explorer as `dateeval app --store PATH` serves it, in Chromium (issue 64 §3, §4): it opens on the store that
`dateeval run --store PATH` wrote, beside the demo, and no page shows Streamlit's Deploy button or main menu, while
tables and pages keep their downloads.

Runs a real sweep (two ARC questions on one date) and a real server; needs Debian's chromium and ../shared's data.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from test_browser import LAPTOP, PAGES, _drawn, _free_port, _open, chromium, wait_until_served

pytestmark = [pytest.mark.browser, pytest.mark.model]
DATASET = "arc_challenge"  # not among the demo's datasets: shown only if the store given was opened


@pytest.fixture(scope="module")
def swept(tmp_path_factory, data_dir) -> Path:
    """A store as a researcher makes one: `dateeval run --store PATH`."""
    store = tmp_path_factory.mktemp("swept") / "store"
    done = run_cli(
        "run", "--dataset", DATASET, "--data-dir", str(data_dir), "--limit", "2", "--dates", "2024-01-01",
        "--store", str(store),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return store


@pytest.fixture(scope="module")
def served(swept, tmp_path_factory, data_dir):
    """`dateeval app --store PATH --port N --no-browser`, as typed (`DATEEVAL_STORE` naming another folder); its URL."""
    port = _free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
        "DATEEVAL_DATA_DIR": str(data_dir),
        "DATEEVAL_STORE": str(tmp_path_factory.mktemp("elsewhere")),
    }
    command = [sys.executable, "-m", "dateeval", "app", "--store", str(swept), "--port", str(port), "--no-browser"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(served):
    yield from chromium()


def test_the_store_given_opens_on_the_overview(browser, served):
    page, errors = _open(browser, served, LAPTOP)
    page.get_by_role("heading", name=DATASET, exact=True).wait_for(timeout=60_000)  # one table per dataset
    assert "My results" in page.get_by_role("combobox", name="Results store").input_value()
    assert "store=mine" in page.url
    assert page.locator("[data-testid='stException']").count() == 0 and not errors, errors
    page.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_no_deploy_button_or_main_menu_on_any_page(browser, served, name):
    """Streamlit's toolbar shows neither (`client.toolbarMode = "minimal"`), on the demo and on the store given."""
    for store in ("demo", "mine"):
        page, errors = _open(browser, f"{served}/{PAGES[name]}?store={store}", LAPTOP)
        _drawn(page)
        for hidden in ("stAppDeployButton", "stMainMenu"):
            assert page.locator(f"[data-testid={hidden}]").count() == 0, (name, store, hidden)
        assert page.locator("[data-testid='stException']").count() == 0 and not errors, errors
        page.close()


def test_downloads_are_kept(browser, served):
    """The Overview's download button, and a table's own toolbar with its CSV download."""
    page, errors = _open(browser, f"{served}/?store=demo", LAPTOP)
    page.locator("[data-testid=stDownloadButton]").first.wait_for(timeout=60_000)  # below the charts: drawn after them
    table = page.locator("[data-testid=stDataFrame]").first
    table.hover()
    page.locator("[data-testid=stElementToolbar]").first.get_by_role("button", name="Download as CSV").wait_for(
        timeout=10_000
    )
    assert not errors, errors
    page.close()
