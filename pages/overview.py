"""Overview: the verdict first, then the worst-to-best delta per model and dataset (paper Tables 1, 2, 8 and 9)."""

import streamlit as st

from dateeval import explorer, results
from dateeval.metrics import EXPLAIN, dataset_metrics, percent
from dateeval.results import descriptive
from dateeval.results.report.export import to_csv
from dateeval.results.chance.headline import reorder_chance_text

NULL_HELP = (
    EXPLAIN["null"]
    + " The largest of K entries also grows with K, so the headline is tested against the largest of K shuffled deltas."
)

st.title("How much does the date in the system prompt move the results?")
explorer.app_settings()
frame, metrics = explorer.load()
store = explorer.current_store()
explorer.about_demo(metrics)
top = explorer.headline(store)
if top is None:
    st.info("The headline needs one model scored on two or more dates: run a date sweep on the **Run** page.")
elif top.delta == 0:
    st.markdown(f"#### {results.headline_sentence(top)}")
else:
    st.markdown(f"#### {results.headline_sentence(top, strong=lambda text: f'**{text}**')}", help=NULL_HELP)
    st.caption(results.verdict_power(top))
    columns = [
        *st.columns(2),
        *st.columns(2),
    ]  # two by two: at 1280 px four across cut their labels and the verdict short
    columns[0].metric(
        "Verdict",
        top.verdict,
        help=f"p = {top.p_value:.3f}: {results.verdict_power(top)} The delta itself against the largest of "
        f"{top.k_entries} shuffled deltas ({top.of_k}): p = {top.delta_p_value:.3f}.",
    )
    columns[1].metric(
        "Largest worst-to-best delta",
        top.delta_text(),
        help=f"worst {top.worst_date}, best {top.best_date}; percentage points",
    )
    columns[2].metric(f"Chance alone (largest of {top.k_entries}, 95% ≤)", top.chance_text(), help=NULL_HELP)
    if top.reorder_dataset is not None:
        columns[3].metric(
            f"Date pairs that reorder the {top.reorder_entries} models on {top.reorder_dataset}",
            percent(top.reorder),
            delta=reorder_chance_text(top),
            delta_color="off",
            help=f"{descriptive.reordering_words(top.reorder_counts())} {results.reorder_sentence(top)}",
        )
    else:
        columns[3].metric(
            "Date pairs that reorder the leaderboard", "-", help="needs two or more models on one dataset"
        )
explorer.intro(
    "Each model saw the same questions with only the date in its system prompt changed. Per dataset: the score over all "
    "dates (minimum, mean, maximum), the worst-to-best delta (paper Tables 1, 2, 4 and 8) with what chance alone gives for "
    "it, and the score with no date at all (Table 9). Rates are percentages, deltas of rates percentage points, BLEU and "
    "chrF points; values are on the questions every condition of a model scored, so dates compare like with like."
)
summary = explorer.summary(store)
for dataset, table in summary.groupby("dataset", sort=True):
    names = dataset_metrics(metrics[metrics["dataset"] == dataset])
    # The verdict's columns first (the delta, what chance gives for it, the test's p), so a laptop screen shows them.
    columns = (
        ["entry", "n_items", "n_dates"]
        + [f"{m}_delta" for m in names]
        + ["delta_null_upper", "cochran_permutation_p", "delta_p_value"]
    )
    columns += [f"{m}_{part}" for m in names for part in ("min", "mean", "max", "worst_date", "best_date")] + [
        f"no_date_{m}" for m in names
    ]
    st.subheader(dataset)
    explorer.show_table(table[[c for c in columns if c in table and table[c].notna().any()]], dataset)
    mine = explorer.paper_beside(store, dataset)
    if len(mine):
        with st.expander("The paper beside you: its headline figures next to yours, with what chance alone gives"):
            explorer.show_table(mine)
st.download_button(
    "Download the summary (CSV; rates as fractions, as stored)", to_csv(summary), "summary.csv", "text/csv"
)
st.markdown(
    "**Read it as:** *delta* = best date minus worst date (percentage points for rates); *chance alone* = the delta 95% of "
    "shuffles stay below. Open **Curves** for the day-by-day picture with intervals, **Leaderboard** for reordering, "
    "**Flips** for the questions that change answer, **Factors** for the date against other sources of variation."
)
