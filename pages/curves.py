"""Curves: accuracy and ECE against the date (paper Figures 2, 11-13)."""

import pandas as pd
import streamlit as st

from dateeval import analysis, explorer, plots

st.title("Scores by date: accuracy, calibration, pass@1, BLEU, chrF")
explorer.intro(
    "One line per model: the score (accuracy, ECE, pass@1, BLEU or chrF, whichever the dataset has) when the system prompt says it is that day. Triangles mark each model's best and "
    "worst date; dashed lines are the same model with no date at all (the paper's recommended mitigation). If the date "
    "did not matter, the lines would be flat and sit on the dashed line."
)
frame, chosen, selection = explorer.page_data()
dated = analysis.dated(chosen)
dated = dated[dated["date"].between(selection.start, selection.end)]
if dated.empty:
    st.info("No dated results for this selection: widen the date range or pick other models.")
    st.stop()
metrics = analysis.available_metrics(dated)
metric = st.radio("Metric", metrics, horizontal=True, format_func=lambda m: plots.axis_label(m, selection.dataset))
rolling = st.slider("Rolling mean over days (1 = off)", 1, 31, 1)
defaults = analysis.template_default_dates(explorer.select(selection))
everything = explorer.store_metrics()
others = sorted(set(everything.loc[everything[metric].notna(), "dataset"]) - {selection.dataset})
overlay = st.selectbox("Compare with another dataset, same models (e.g. chain of thought vs next-token, paper Figure 4)", ["(none)", *others])
if overlay != "(none)":
    extra = everything[(everything["dataset"] == overlay) & everything["entry"].isin(selection.entries)]
    dated_extra = analysis.dated(extra)
    dated_extra = dated_extra[dated_extra["date"].between(selection.start, selection.end) & dated_extra[metric].notna()]
    tag = lambda table, name: table.assign(entry=table["entry"] + " · " + name)  # noqa: E731
    dated, chosen = pd.concat([tag(dated, selection.dataset), tag(dated_extra, overlay)]), pd.concat([tag(chosen, selection.dataset), tag(extra, overlay)])
figure = plots.curves(dated, metric, chosen, rolling=rolling, default_dates=defaults, dataset=selection.dataset)
st.plotly_chart(figure, width="stretch")
st.download_button("Download figure (HTML)", figure.to_html(include_plotlyjs="cdn"), f"curves-{metric}.html", "text/html")
st.download_button("Download plotted data (CSV)", dated[["entry", "dataset", "date", "n_items", metric]].to_csv(index=False), f"curves-{metric}.csv", "text/csv")
st.subheader("Worst-to-best delta (Tables 1, 2 and 8)")
summary = analysis.summarize(dated.assign(date=dated["date"].dt.strftime("%Y-%m-%d")))
st.dataframe(
    summary[["entry", "n_dates", f"{metric}_min", f"{metric}_max", f"{metric}_delta", f"{metric}_worst_date", f"{metric}_best_date"]],
    hide_index=True, width="stretch",
)  # fmt: skip
