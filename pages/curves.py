"""Curves: accuracy and ECE against the date (paper Figures 2, 11-13), with a 95% interval per date."""

import pandas as pd
import streamlit as st

from dateeval import explorer, plots
from dateeval.explorer import viewstate
from dateeval.metrics import EXPLAIN, METRICS, dataset_metrics, points
from dateeval.results import descriptive, paper

st.title("Scores by date: accuracy, calibration, pass@1, BLEU, chrF")
explorer.app_settings()
explorer.intro(
    "One line per model: the score (accuracy, ECE, pass@1, BLEU or chrF, whichever the dataset has) when the system prompt "
    "says it is that day; the shaded band is a 95% interval for that day's score over the question population (exact "
    "Clopper-Pearson for rates, bounds on the debiased ECE from 50 questions, a log-scale jackknife over segments for BLEU and "
    "chrF): it says how sure one date's number is, not "
    "whether the date matters. Triangles mark each model's best and worst date; dashed lines are the same model with no date "
    "at all (the paper's recommended mitigation). Whether the date matters is the permutation test's question: for "
    "accuracy the dotted lines are each model's chance band (shuffling each question's answers across the dates, the date "
    "having no effect, keeps the whole line between them 95% of the time), and the table below gives each delta with what "
    "chance alone gives."
)
frame, chosen, selection = explorer.page_data()
dated = descriptive.dated(chosen)
dated = dated[dated["date"].between(selection.start, selection.end)]
if dated.empty:
    st.info("No dated results for this selection: widen the date range or pick other models.")
    st.stop()
metric = explorer.picker(
    "Metric",
    dataset_metrics(dated),
    "metric",
    format_func=lambda m: plots.axis_label(m, selection.dataset),
    help=EXPLAIN["ece"],
)
left, right = st.columns(2)
viewstate.seed("rolling", list(range(1, 32)), 1)
rolling = left.slider("Rolling mean over calendar days (1 = off)", 1, 31, key="rolling")
viewstate.publish("rolling", rolling)
show_band = right.toggle(
    "95% interval per date (over questions)",
    value=True,
    help="Accuracy and pass@1: the exact Clopper-Pearson interval of the day's k of n (coverage >= 95% at any "
    "n and rate; docs/coverage.md). BLEU and chrF: the jackknife over segments on the log scale, "
    "with a t quantile (each leave-one-out corpus score from the other segments' statistics; docs/coverage.md). ECE (debiased): "
    "bounds that hold whatever the bins' true gaps (the plug-in plus a Brier-score t bound above; less the bins' "
    "summed sampling error below), drawn from 50 questions, where they covered at least 93% in every simulated "
    "cell (calibrated and miscalibrated, accuracy 10-90%; docs/coverage.md). With fewer than 50 questions no ECE band is drawn.",
)
viewstate.seed("panels", [True, False], True)
panels = right.toggle(
    "One panel per model",
    key="panels",
    help="Each model in its own panel, on one scale: its band and line are not covered by another model's. Off: "
    "every model in one plot, to compare the lines directly.",
)
viewstate.publish("panels", panels)
store = explorer.current_store()
band = explorer.bands(store, selection, metric) if show_band else None
chance = explorer.chance_bands(store, selection) if metric == "accuracy" else None
defaults = explorer.template_default_dates(selection)
everything = explorer.store_metrics()
others = sorted(set(everything.loc[everything[metric].notna(), "dataset"]) - {selection.dataset})
overlay = explorer.picker(
    "Compare with another dataset, same models (e.g. chain of thought vs next-token, paper Figure 4)",
    ["(none)", *others],
    "overlay",
)
if overlay != "(none)":
    extra = everything[(everything["dataset"] == overlay) & everything["entry"].isin(selection.entries)]
    dated_extra = descriptive.dated(extra)
    dated_extra = dated_extra[dated_extra["date"].between(selection.start, selection.end) & dated_extra[metric].notna()]

    def tag(table: pd.DataFrame, name: str) -> pd.DataFrame:
        return table.assign(entry=table["entry"] + " · " + name)

    dated, chosen = (
        pd.concat([tag(dated, selection.dataset), tag(dated_extra, overlay)]),
        pd.concat([tag(chosen, selection.dataset), tag(extra, overlay)]),
    )
    band = tag(band, selection.dataset) if band is not None else None
    chance = tag(chance, selection.dataset) if chance is not None else None
estimated = explorer.estimates(store, selection) if metric == "accuracy" and overlay == "(none)" else None
if estimated is not None and len(estimated):
    st.caption(
        "Open circles: **estimated** dates ("
        + "; ".join(
            f"{entry}: estimated from {share:.0%} of the grid"
            for entry, share in estimated.groupby("entry")["share"].first().items()
        )
        + "), each with its 95% interval for what a full sweep would give on these questions; the line joins the "
        "dates scored in full (docs/sparse.md)."
    )
figure = plots.curves(
    dated,
    metric,
    chosen,
    rolling=rolling,
    default_dates=defaults,
    dataset=selection.dataset,
    band=band,
    chance=chance,
    estimated=estimated,
    panels=panels,
)
clicked = st.plotly_chart(
    figure, width="stretch", config=plots.CHART_CONFIG, on_select="rerun", selection_mode="points", key="curve_click"
)
picked = [point for point in (clicked.selection.points if clicked else []) if point.get("customdata")]
if picked:  # a point on an entry's line: that date's questions on Flips, and the prompt on that date
    day, entry = str(picked[0]["x"])[:10], picked[0]["customdata"]
    shared = {"store": st.query_params.get("store", "demo"), "dataset": selection.dataset}
    left, right = st.columns(2)
    span = {
        "from": f"{selection.start:%Y-%m-%d}",
        "to": f"{selection.end:%Y-%m-%d}",
    }  # a question flips between dates: the range, not one day
    left.page_link(
        "pages/flips.py",
        label=f"{entry}: the questions that flip over {span['from']}..{span['to']} (Flips)",
        icon=":material/swap_horiz:",
        query_params={**shared, **span, "entry": entry},
    )
    right.page_link(
        "pages/prompt.py",
        label=f"The prompt on {day} (Prompt)",
        icon=":material/search:",
        query_params={**shared, "first": day},
    )
else:
    st.caption("Click a point on a line to open that date's questions on **Flips** and its prompt on **Prompt**.")
st.download_button(
    "Download figure (HTML, works offline; its camera saves PNG)",
    plots.standalone_html(figure),
    f"curves-{metric}.html",
    "text/html",
)
explorer.downloads(explorer.item_table(selection), "per-item-per-date")
st.subheader("Worst-to-best delta (Tables 1, 2 and 8)")
summary = explorer.summary(store, selection.period)
summary = summary[(summary["dataset"] == selection.dataset) & summary["entry"].isin(selection.entries)]
chance = ["delta_null_upper", "delta_p_value"] if metric == "accuracy" else []
explorer.show_table(
    summary[
        [
            c
            for c in (
                "entry",
                "n_items",
                "n_dates",
                f"{metric}_delta",
                *chance,
                f"{metric}_min",
                f"{metric}_max",
                f"{metric}_worst_date",
                f"{metric}_best_date",
            )
            if c in summary
        ]
    ],
    selection.dataset,
)
figures = paper.beside(
    selection.dataset, metric, task=chosen["task"].dropna().iloc[0] if chosen["task"].notna().any() else None
)
if figures and len(summary):
    top = summary.loc[summary[f"{metric}_delta"].idxmax()] if summary[f"{metric}_delta"].notna().any() else None
    mine = "-" if top is None else METRICS[metric].delta(top[f"{metric}_delta"], int(top["n_items"]))
    noise = (
        f" (chance alone: up to {points(top['delta_null_upper'], int(top['n_items']))} for that entry)"
        if top is not None and metric == "accuracy"
        else ""
    )
    st.caption(
        "The paper beside you: "
        + "; ".join(f"{f.says} ({f.where})" for f in figures)
        + f". Your largest delta here: {mine}{noise}, "
        f"on {int(summary['n_items'].max())} questions x {int(summary['n_dates'].max())} dates."
    )
