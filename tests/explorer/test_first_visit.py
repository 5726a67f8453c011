"""A page's first visit in a new session does no work an earlier session already did (issue 64 §6): What to report's
figure and Factors' date budget are computed once and shown the same, and Factors' HTML download is made on a click,
not on every visit. The figures per page are bench/explorer_browser.py's (docs/benchmarks.md)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from dateeval import plots
from dateeval.explorer import cache
from dateeval.results import inference
from dateeval.results.robust import robust_format


@pytest.fixture
def visit(tmp_path, monkeypatch):
    """A new session's first visit of a page on the demo (every cache cleared once, before the first session)."""
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache.clear()

    def open_page(page: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params.update({"store": "demo"})
        at.run()
        at.switch_page(page).run()
        assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
        return at

    return open_page


def _counted(monkeypatch, module: object, name: str) -> list:
    """Calls of ``module.name`` from now on, recorded (the function still runs)."""
    calls: list = []
    real = getattr(module, name)

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_what_to_report_draws_its_figure_once(visit, monkeypatch):
    drawn = _counted(monkeypatch, robust_format, "svg")
    first, second = visit("pages/robust.py"), visit("pages/robust.py")
    assert len(drawn) == 1
    shown = [at.get("image")[0].proto.imgs[0].url for at in (first, second)]
    assert shown[0] == shown[1]


def test_factors_computes_its_date_budget_once_and_its_html_on_a_click(visit, monkeypatch):
    budgets = _counted(monkeypatch, inference, "date_budget")
    pages = _counted(monkeypatch, plots, "standalone_html")
    first = visit("pages/factors.py")
    second = visit("pages/factors.py")
    assert len(budgets) == 1 and pages == []
    scores, tolerance = budgets[0][0], 0.2
    expected = inference.date_budget(scores, tolerance=tolerance)
    for at in (first, second):
        shown = next(table.value for table in at.dataframe if "Dates sampled" in table.value)
        assert shown["Dates sampled"].tolist() == expected["dates"].tolist()
    pd.testing.assert_frame_equal(cache.date_budget(tuple(scores), tolerance), expected)
