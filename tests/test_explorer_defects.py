"""The explorer's defects of issue 23 §3, each through Streamlit's AppTest on the demo (or the function that draws it)."""

from __future__ import annotations

import datetime as dt
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from dateeval import plots
from dateeval.explorer import uploads
from dateeval.metrics.columns import for_display


@pytest.fixture
def page(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def open_page(name: str, **query: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"store": "demo", **query})
        at.run()
        at.switch_page(name).run()
        assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
        return at

    return open_page


def test_a_link_followed_inside_the_app_opens_its_view(page):
    """Curves' point links to Flips with a range: in the same session the range in the link wins over the one the session
    had (it used to open on the whole range), and the link carries the Curves selection's range, not one day (0 questions)."""
    at = page("pages/flips.py", dataset="mmlu")
    assert at.sidebar.date_input(key="dates").value == (dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    at.query_params.update({"from": "2024-03-01", "to": "2024-03-31"})  # what the page link writes
    at.run()
    assert at.sidebar.date_input(key="dates").value == (dt.date(2024, 3, 1), dt.date(2024, 3, 31))
    at.sidebar.date_input(key="dates").set_value(
        (dt.date(2024, 2, 1), dt.date(2024, 2, 29))
    ).run()  # the user's own choice still holds
    assert at.sidebar.date_input(key="dates").value == (dt.date(2024, 2, 1), dt.date(2024, 2, 29))
    source = (ROOT / "pages" / "curves.py").read_text()
    assert '"from": day, "to": day' not in source and "the questions that flip over" in source


def test_a_flips_question_opens_on_the_prompt_page_by_its_id(page):
    flips = page("pages/flips.py", dataset="mmlu")
    links = [link for link in flips.get("page_link") if "The prompt of this question" in link.proto.label]
    assert links  # the link exists on the page
    question = flips.selectbox(key="question").value
    prompt = page("pages/prompt.py", dataset="mmlu", real_item="True", question=question)
    assert any(caption.value.startswith(f"{question} (") for caption in prompt.caption), [
        c.value for c in prompt.caption
    ]


def test_flips_shows_letters_counts_and_readable_tables(page):
    at = page("pages/flips.py", dataset="mmlu")
    table = next(table.value for table in at.dataframe if "Answer changes" in table.value)
    assert set(table["Correct answer"]) <= set("ABCDEFGHIJ")  # the correct option as a letter, not its index
    heading = next(h.value for h in at.subheader if "most date-sensitive first" in h.value)
    count = int(heading.split()[0].replace(",", ""))
    assert heading.startswith(f"{count} question{'s' if count != 1 else ''},")
    cot = page("pages/flips.py", dataset="mmlu_cot")
    cot.selectbox(key="show").set_value("all").run()
    per_date = [table.value for table in cot.dataframe if "Confidence (%)" in table.value.columns]
    assert not per_date or not per_date[0].isin(["None"]).any().any()
    board = page("pages/leaderboard.py", dataset="mmlu")
    assert all("rank" not in table.value.columns and "entry" != table.value.index.name for table in board.dataframe)


def test_the_uploader_says_the_limit_it_enforces():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == uploads.MAX_BYTES // 2**20


def test_tied_lines_on_the_ranking_chart_are_drawn_side_by_side():
    ranked = pd.DataFrame(
        {
            "entry": ["a", "b", "c"] * 2,
            "date": pd.to_datetime(["2024-01-01"] * 3 + ["2024-01-02"] * 3),
            "rank": [1, 1, 1, 1, 2, 3],
        }
    )
    figure = plots.bump(ranked)
    first_day = [float(trace.y[0]) for trace in figure.data]
    assert len(set(first_day)) == 3 and all(
        abs(y - 1) <= 0.2 for y in first_day
    )  # three models tied first, none hidden
    assert [int(trace.customdata[0]) for trace in figure.data] == [1, 1, 1]
    assert figure.layout.legend.yanchor == "top" and figure.layout.legend.y <= -0.25  # below the Date title


def test_no_table_shows_minus_zero():
    shown = for_display(pd.DataFrame({"pearson": [-0.001, 0.5, np.nan]}))
    assert list(shown.iloc[:2, 0]) == [0.0, 0.5] and not np.signbit(shown.iloc[0, 0])


def test_factors_leaves_out_what_does_not_apply_and_other_datasets(page):
    at = page("pages/factors.py", dataset="wmt16_en_de")
    for table in at.dataframe:
        frame = table.value
        assert "Spearman ρ" not in frame.columns  # WMT has no per-question grade: no trend table of dashes
    mmlu = page("pages/factors.py", dataset="mmlu")
    for table in mmlu.dataframe:
        if "Pearson r" in table.value.columns:
            assert table.value.apply(
                lambda row: bool(re.search(r" / mmlu$", row["A"]) or re.search(r" / mmlu$", row["B"])), axis=1
            ).all()


def test_figures_export_as_png_beside_svg(page):
    """What to report offers the figure as PNG beside SVG (a real PNG, 200 dpi), and a chart's offline HTML saves PNG
    with its camera while the page's camera saves SVG: both formats for every figure."""
    at = page("pages/robust.py", dataset="mmlu")
    labels = [button.proto.label for button in at.get("download_button")]
    assert "Figure (SVG)" in labels and "Figure (PNG)" in labels
    from dateeval import results
    from dateeval.results import robust_format

    view, _ = results.open(ROOT / "demo" / "store")
    found = robust_format.png(view.robust_record("mmlu"))
    assert found.startswith(b"\x89PNG\r\n\x1a\n") and len(found) > 10_000
    figure = plots.go.Figure(plots.go.Scatter(x=[1, 2], y=[0.5, 0.6]))
    offline = plots.standalone_html(figure)
    assert (
        '"format": "png"' in offline
        and not re.search(r"<script[^>]+src=", offline)
        and plots.CHART_CONFIG["toImageButtonOptions"]["format"] == "svg"
    )
