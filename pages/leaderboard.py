"""Leaderboard: how the ranking of models changes with the date (paper Figure 1b)."""

import datetime as dt

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

from dateeval import explorer, plots
from dateeval.explorer import viewstate
from dateeval.metrics import EXPLAIN, METRICS, counted, dataset_metrics, percent
from dateeval.results import descriptive

st.title("Leaderboard by date")
explorer.app_settings()
explorer.intro(
    "Models ranked by accuracy on each date: lines over a month or less (if the date did not matter they would never "
    "cross), a heatmap over more (one row per model; if the date did not matter each row would keep one colour). Below: the "
    "leaderboard on two dates side by side, how often consecutive dates reorder the top k, and Kendall tau between the "
    "rankings of every pair of dates (1 = identical order)."
)
frame, chosen, selection = explorer.page_data()
scores = [m for m in dataset_metrics(chosen) if METRICS[m].higher_is_better]
metric = (
    explorer.picker("Ranked by", scores, "rank_metric", format_func=lambda m: plots.axis_label(m, selection.dataset))
    if scores
    else "accuracy"
)


def model_against_model() -> None:
    """Two models' date-robust scores and their difference (``dateeval compare``): also where the per-date ranks have
    fewer than two models (a sparse entry's drawn dates are not ranked)."""
    if metric != "accuracy" or len(selection.entries) < 2:
        return
    st.subheader("Model against model, across dates")
    names = sorted(selection.entries)
    left, right = st.columns(2)
    a = left.selectbox("Model A", names, index=0, key="compare_a")
    b = right.selectbox("Model B", names, index=1, key="compare_b")
    store = explorer.current_store()
    lines = explorer.compare(store, selection, a, b) if a != b else []
    if a == b:
        st.info("Pick two different models.")
    elif not lines:
        st.info(f"{a} and {b} do not share two dates and the same questions in this range.")
    else:
        st.markdown(
            "\n".join(f"- {line}" for line in lines),
            help="The same as `dateeval compare`: A - B is the difference of the date-robust "
            "scores, its 95% interval clustered by question; date sensitivity is each model's date SD without counting noise, "
            "the questions resampled (paired) for the interval and p.",
        )


in_range = descriptive.dated(chosen)
in_range = in_range[
    in_range["date"].between(selection.start, selection.end)
]  # every statistic below reads the selected dates only
ranked = descriptive.ranks(in_range, metric)
if ranked["entry"].nunique() < 2:
    st.info(
        "A leaderboard needs at least two models with results on this dataset: select more in the sidebar or run another model."
    )
    model_against_model()
    st.stop()
st.plotly_chart(plots.ranking(ranked), width="stretch", config=plots.CHART_CONFIG)
dates = sorted(ranked["date"].dt.date.unique())
left, right = st.columns(2)
first = explorer.date_picker("First date", dates, "a", dates[0], where=left)
second = explorer.date_picker("Second date", dates, "b", dates[min(1, len(dates) - 1)], where=right)


def board(day: dt.date) -> pd.DataFrame:
    """The ranking on one date, scores in the metric's display unit."""
    rows = ranked[ranked["date"].dt.date == day].sort_values("rank")
    label = plots.axis_label(metric, selection.dataset)
    board = rows[["rank", "entry", metric]].assign(**{label: METRICS[metric].shown(rows[metric])})[
        ["rank", "entry", label]
    ]
    return board.rename(columns={"rank": "Rank", "entry": "Model"}).set_index("Model")


a, b = board(first), board(second)
moved = a.index[a["Rank"] != b.reindex(a.index)["Rank"]]


def style(table: pd.DataFrame) -> Styler:
    """Scores to two decimals, the models that change position highlighted."""
    return table.style.format({plots.axis_label(metric, selection.dataset): "{:.2f}"}).apply(
        lambda row: ["background-color: #fff3b0" if row.name in moved else "" for _ in row], axis=1
    )


left.dataframe(style(a), width="stretch")
right.dataframe(style(b), width="stretch")
st.caption(f"{len(moved)} of {counted(len(a), 'model')} change position between {first} and {second} (highlighted).")
sizes = list(range(1, ranked["entry"].nunique() + 1))
viewstate.seed("top_k", sizes, min(3, sizes[-1]))
k = st.select_slider(
    "Top k",
    sizes,
    key="top_k",
    help="How many of the best entries must keep their order for two dates to count as the same top k.",
)
viewstate.publish("top_k", k)
share = descriptive.top_k_reorders(in_range, selection.dataset, k, metric)
st.metric(
    f"Consecutive date pairs whose top {k} differs ({selection.start:%Y-%m-%d} to {selection.end:%Y-%m-%d})",
    percent(share),
    help=EXPLAIN["top_k"],
)
taus = descriptive.kendall_taus(in_range, selection.dataset, metric)
if len(taus):
    found = descriptive.reordering(taus)
    if found["n_defined"]:
        st.plotly_chart(plots.tau_histogram(taus[taus["defined"]]), width="stretch", config=plots.CHART_CONFIG)
    mean = f"Mean Kendall tau {found['mean_tau']:.3f} over the defined pairs; " if found["n_defined"] else ""
    chance = ""
    if metric == "accuracy" and found["n_defined"]:
        store = explorer.current_store()
        null = explorer.reorder_chance(store, selection, found["share"])
        if null["chance"] == null["chance"]:
            chance = (
                f" Chance alone (answers shuffled across the dates within each question): {percent(null['chance'])} "
                f"(95% of shuffles <= {percent(null['chance_upper'])}), p = {null['p_value']:.3f} that the date reorders them more."
            )
    st.caption(
        f"{mean}{percent(found['share'])} of date pairs rank the models differently: {descriptive.reordering_words(found)}{chance}",
        help=EXPLAIN["tau"],
    )
model_against_model()
leaderboard = (
    ranked.pivot_table(index="entry", columns="date", values="rank")
    .rename(columns=lambda day: f"{day:%Y-%m-%d}")
    .reset_index()
)
explorer.downloads(leaderboard, "leaderboard-ranks")
