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
    assert _legend_reserves_its_room(figure)


# Issue 64 §1-2: figures that read at a glance at 1280 x 800, whatever the number of entries.
LEGEND_ROW_PX = 22  # a legend row's height at Plotly's 12 px font
MAIN_COLUMN_PX = 820  # the chart's width beside the sidebar at 1280 px (tests/e2e/test_browser.py measures it)


def _legend_reserves_its_room(figure) -> bool:
    """The legend hangs from the title's strip, placed on the figure (not the plot), so Plotly moves the plot down by
    its height instead of drawing it over the plot or the tick labels."""
    legend = figure.layout.legend
    return (
        legend.orientation == "h"
        and legend.yref == "container"
        and legend.yanchor == "top"
        and legend.y == pytest.approx(1 - plots.TITLE_PX / figure.layout.height)
    )


def _plot_share(figure, legend_names: list[str]) -> float:
    """The plot's share of the figure's height from its layout: less the title's strip, the legend's rows (its entries
    laid out in the main column at 7 px a character and 40 px of symbol each, a row at most its width, as Plotly
    wraps them), the bottom margin (ticks and the key) and the gaps between stacked panels."""
    rows, width = 1, 0
    for name in legend_names:
        item = 40 + 7 * len(name)
        rows, width = (rows + 1, item) if width + item > MAIN_COLUMN_PX - 80 else (rows, width + item)
    gaps = 1 - sum(high - low for low, high in (axis.domain or (0, 1) for axis in figure.select_yaxes()))
    plotted = figure.layout.height - plots.TITLE_PX - rows * LEGEND_ROW_PX - figure.layout.margin.b
    return plotted * (1 - gaps) / figure.layout.height


def _demo_curves(models: int, **options) -> tuple:
    """The Curves figure of the demo's MMLU entries, with each one's band and chance band, and an estimated date on
    the first; six models are the three and the same three as a second dataset (as Curves' overlay tags them)."""
    from dateeval import results
    from dateeval.results import descriptive

    view, _ = results.open(ROOT / "demo" / "store")
    metrics = view.metrics[view.metrics["dataset"] == "mmlu"]
    names = sorted(metrics["entry"].unique())
    band = pd.concat([view.bands.band(name, "mmlu", "accuracy") for name in names])
    chance = pd.DataFrame(
        [
            {
                "entry": name,
                "low": found.mean_accuracy - found.chance_half_width,
                "high": found.mean_accuracy + found.chance_half_width,
            }
            for name in names
            for found in [view.chance.significance(name, "mmlu")]
        ]
    )
    estimated = band[band["entry"] == names[0]].head(3).assign(value=0.4, share=0.5)
    tables = [descriptive.dated(metrics), metrics, band, chance, estimated]
    if models == 6:
        tables = [pd.concat([table, table.assign(entry=table["entry"] + " · again")]) for table in tables]
    dated, baselines, band, chance, estimated = tables
    figure = plots.curves(
        dated, "accuracy", baselines, band=band, chance=chance, estimated=estimated, dataset="mmlu", **options
    )
    return figure, sorted(dated["entry"].unique())


@pytest.mark.parametrize("panels", [False, True])
@pytest.mark.parametrize("models", [3, 6])
def test_curves_name_each_model_once_and_keep_the_plot_most_of_the_figure(models, panels):
    """One legend entry per model, on its line, and no other (the styles are in the key under the plot); every trace
    in its model's legend group, so one click shows or hides all of it; estimated dates open circles; the plot at
    least 60% of the figure's height (it was 35% under 18 legend entries for three models)."""
    figure, entries = _demo_curves(models, panels=panels)
    shown = [trace for trace in figure.data if trace.showlegend is not False]
    assert [trace.name for trace in shown] == entries and all(trace.legendgroup == trace.name for trace in shown)
    assert {trace.legendgroup for trace in figure.data} == set(entries)
    assert all(trace.name.startswith(trace.legendgroup) for trace in figure.data if trace.name and ":" in trace.name)
    estimated = [trace for trace in figure.data if "estimated" in str(trace.name)]
    assert len(estimated) == models // 3 and all(trace.marker.symbol == "circle-open" for trace in estimated)
    key = [note.text for note in figure.layout.annotations if "no date" in note.text]
    assert len(key) == 1 and all(style in key[0] for style in ("▲▼", "chance band", "95% interval", "estimated"))
    assert _legend_reserves_its_room(figure)
    assert _plot_share(figure, entries) >= 0.6, _plot_share(figure, entries)
    panel_axes = {trace.yaxis for trace in figure.data}
    assert len(panel_axes) == (models if panels else 1)  # a panel per model, or one plot
    fills = [index for index, trace in enumerate(figure.data) if trace.fill == "tonexty"]
    lines = [index for index, trace in enumerate(figure.data) if trace.name in entries]
    assert max(fills) < min(lines)  # every band under every line


def test_many_dates_rank_as_a_heatmap_few_as_a_bump_chart():
    """Issue 64 §2: 366 dates with ties on most read as a barcode as lines: a heatmap of rank by date, one row per
    model, best mean rank on top, labelled with its share of dates ranked first; a month or less stays a bump chart."""
    days = pd.date_range("2024-01-01", "2024-12-31")
    ranked = pd.DataFrame(
        {
            "entry": ["a"] * len(days) + ["b"] * len(days),
            "date": list(days) * 2,
            "rank": [1] * len(days) + [1 if day.day % 2 else 2 for day in days],
        }
    )
    heatmap = plots.ranking(ranked)
    (cells,) = heatmap.data
    assert cells.type == "heatmap" and cells.z.shape == (2, 366) and len(cells.x) == 366
    assert cells.y[0].startswith("a<br>first on 100%") and cells.y[1].startswith("b<br>first on 51%")
    assert list(cells.colorbar.tickvals) == [1, 2]
    short = plots.ranking(ranked[ranked["date"] < "2024-02-01"])
    assert {trace.type for trace in short.data} == {"scatter"} and len(short.data) == 2


def test_factor_bars_name_each_model_once():
    """Issue 64 §1 on Factors: a model's bars and its noise-free diamonds are one legend entry; the diamond's meaning
    is said once, under the plot."""
    table = pd.DataFrame(
        {
            "entry": ["a", "a", "b", "b"],
            "factor": ["date", "dtype"] * 2,
            "accuracy_cv": [0.02, 0.03, 0.04, 0.05],
            "accuracy_cv_noise_free": [0.01, 0.02, 0.03, 0.04],
            "accuracy_cv_low": [0.0, 0.01, 0.02, 0.03],
            "accuracy_cv_high": [0.02, 0.03, 0.04, 0.05],
        }
    )
    figure = plots.factor_bars(table)
    assert [trace.name for trace in figure.data if trace.showlegend is not False] == ["a", "b"]
    assert [trace.legendgroup for trace in figure.data] == ["a", "a", "b", "b"]
    assert ["◆" in note.text for note in figure.layout.annotations] == [True] and _legend_reserves_its_room(figure)


def test_option_probabilities_keep_their_legend_off_the_plot():
    """Issue 64 §1 on Flips: one legend entry per option, above the plot (it was beside it past six options, in a
    half-width column)."""
    rows = pd.DataFrame({"date": ["2024-01-01", "2024-01-02"], "probs": [[0.1] * 10, [0.1] * 10]})
    figure = plots.option_lines(rows, list("ABCDEFGHIJ"), 2)
    assert [trace.name for trace in figure.data][:3] == ["A", "B", "C (correct)"] and _legend_reserves_its_room(figure)


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
    from dateeval.results.robust import robust_format

    view, _ = results.open(ROOT / "demo" / "store")
    found = robust_format.png(view.robust.robust_record("mmlu"))
    assert found.startswith(b"\x89PNG\r\n\x1a\n") and len(found) > 10_000
    figure = plots.go.Figure(plots.go.Scatter(x=[1, 2], y=[0.5, 0.6]))
    offline = plots.standalone_html(figure)
    assert (
        '"format": "png"' in offline
        and not re.search(r"<script[^>]+src=", offline)
        and plots.CHART_CONFIG["toImageButtonOptions"]["format"] == "svg"
    )
