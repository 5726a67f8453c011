"""Factors: the date next to other sources of variation, and next to chance (paper Table 5, §5.1)."""

import streamlit as st

from dateeval import explorer, plots
from dateeval.metrics import EXPLAIN, METRICS, dataset_metrics, percent
from dateeval.results import descriptive

st.title("Is the date effect real, and how big is it next to the rest?")
explorer.app_settings()
explorer.intro(
    "A worst-to-best delta over 366 dates is never zero, even by chance. Here each source of variation (the date, batch "
    "size, precision, option order, system-prompt wording, user location) is measured on the same questions as a "
    "coefficient of variation (CV = standard deviation / mean across its levels). On few questions counting noise inflates "
    "a measured CV, so accuracy's bars carry the CV without counting noise (a diamond) with its 95% interval; the date's "
    "delta is compared with the deltas chance alone produces; and repeats of one condition show "
    "the run-to-run variation (zero on a deterministic setup)."
)
_, metrics = explorer.load()
store = explorer.current_store()
tables = explorer.statistics(store)
dataset = explorer.dataset_picker(metrics)
factors = tables["factors"][tables["factors"]["dataset"] == dataset]
graded = factors["accuracy_cv"].notna().any() if len(factors) else False
if not graded:  # translation: a corpus metric, no per-question right/wrong to compute a CV or shuffle from
    st.info(
        f"Accuracy and ECE do not apply to {dataset}: its metrics are corpus scores (BLEU, chrF), so there is no per-question "
        "right/wrong to compare factors or dates with. Its scores over dates are on **Curves**; the date budget below uses them."
    )
else:
    rates = [m for m in ("accuracy", "ece") if f"{m}_cv" in factors and factors[f"{m}_cv"].notna().any()]
    metric = explorer.picker(
        "Metric",
        rates,
        "factor_metric",
        format_func=lambda m: plots.axis_label(m, dataset).removesuffix(" (%)"),
        help=f"{EXPLAIN['cv']}\n\n{EXPLAIN['ece']}",
    )
    if set(factors["factor"]) == {"date"}:
        st.info(
            "Only the date was swept on this dataset, so there is nothing to set it against yet. Run e.g. `python -m dateeval run ... "
            "--batch-sizes 1,8,32 --option-orders 5 --system-prompts paper --dtype float32 --dtype bfloat16 --repeat 2`."
        )
    figure = plots.factor_bars(factors, metric)
    st.plotly_chart(figure, width="stretch", config=plots.CHART_CONFIG)
    st.download_button(  # the page's HTML made on a click, not on every visit
        "Download figure (HTML, works offline; its camera saves PNG)",
        lambda: plots.standalone_html(figure),
        "factors.html",
        "text/html",
    )
    explorer.show_table(factors.drop(columns=["dataset"]), dataset)
formats = explorer.fewshot_formats(store)
formats = formats[formats["dataset"] == dataset]
if len(formats):
    st.subheader("The date effect under each few-shot format (paper §5.4)")
    st.caption(
        "The same model and exemplars, the exemplars in the one user message (single-turn) or as conversation turns "
        "(multi-turn, as lm-eval builds them with a chat template): does the format change how much the date moves the score?"
    )
    explorer.show_table(formats.drop(columns=["dataset"]), dataset)
st.subheader("The date's delta against chance")
significance = tables["significance"][tables["significance"]["dataset"] == dataset]
st.caption(
    "*Chance delta, 95%*: 95% of the deltas you would see if every question's answers were shuffled across dates (the date "
    "having no effect) are at most this; *p-value*: share of those deltas at least as large as the observed one. Cochran's Q "
    "tests whether accuracy is equal on all dates.",
    help=f"{EXPLAIN['null']}\n\n{EXPLAIN['cochran']}",
)
if len(significance):
    explorer.show_table(significance.drop(columns=["dataset"]), dataset)
else:
    st.caption("No test here: it needs per-question right/wrong answers on two or more dates.")
if len(tables["run_to_run"]):
    st.subheader("Run-to-run variation (repeats of one condition)")
    explorer.show_table(tables["run_to_run"], dataset)
st.subheader("Is there a good date? (Table 3)")
trend = tables["trend"][tables["trend"]["dataset"] == dataset]
if len(trend):
    explorer.show_table(trend.drop(columns=["dataset"]), dataset)
else:
    st.caption(
        f"No trend of accuracy over the dates on {dataset}: it needs per-question grades on three or more dates."
    )
correlations = tables["correlations"]
correlations = correlations[
    correlations["a"].str.endswith(f" / {dataset}") | correlations["b"].str.endswith(f" / {dataset}")
]
if len(correlations):
    explorer.show_table(correlations, dataset)
st.subheader("How many dates does a budget need?")
entries = sorted(metrics[metrics["dataset"] == dataset]["entry"].unique())
entry = explorer.picker("Model", entries, "entry")
dated = descriptive.dated(metrics[(metrics["dataset"] == dataset) & (metrics["entry"] == entry)])
scored = [m for m in dataset_metrics(dated) if METRICS[m].higher_is_better]
if len(dated) < 2 or not scored:
    st.info("A date budget needs a score on two or more dates.")
else:
    budget_metric = scored[0]
    tolerance = st.slider("Tolerance (relative to the full-range value)", 5, 50, 20, 5, format="%d%%") / 100
    budget = explorer.date_budget(tuple(dated[budget_metric].to_numpy()), tolerance)
    st.caption(
        f"From {len(dated)} dates ({plots.axis_label(budget_metric, dataset)}): share of random samples of m dates whose delta / CV "
        f"is within {percent(tolerance)} of the full value. Worst-to-best grows with the number of dates, so a few dates understate it."
    )
    explorer.show_table(budget, dataset)
