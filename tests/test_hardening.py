"""Hardening, round 4 (issue 36): each hostile input refused with one line or an error box, bounded, nothing read or run."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest


@pytest.fixture
def linked_page(monkeypatch, tmp_path):
    """Open an explorer page from a link (its query parameters), the way a browser following a shared link does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))

    def open_page(name: str, **query: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"store": "demo", **query})
        at.run()
        at.switch_page(name).run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    return open_page


@pytest.mark.parametrize("query", [{"first": "0001-01-01"}, {"second": "9999-12-31"}])
def test_a_prompt_link_with_a_date_the_pickers_cannot_show_gets_an_error_box(linked_page, query):
    """Issue 36 §9: a date before 1900 or after 2100 raised StreamlitValueBelowMinError; now one error box and the default."""
    at = linked_page("pages/prompt.py", **query)
    assert any("outside the dates this page shows" in box.value for box in at.error), [box.value for box in at.error]
    assert at.date_input(key="first").value == dt.date(2024, 1, 1) and at.date_input(key="second").value == dt.date(2024, 7, 26)
