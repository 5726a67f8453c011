"""Overview: the finding in one sentence, then the worst-to-best delta per model and dataset (paper Tables 1, 2, 8 and 9)."""

import streamlit as st

from dateeval import explorer
from dateeval.results import descriptive, paper
from dateeval.metrics import METRICS, available_metrics, percent

st.title("How much does the date in the system prompt move the results?")
explorer.app_settings()
frame, metrics = explorer.load()
store = explorer.current_store()
top = explorer.headline(str(store.root), store.fingerprint())
if top is None:
    st.info("The headline needs one model scored on two or more dates: run a date sweep on the **Run** page.")
elif top["delta"] == 0:
    st.markdown(f"#### On the {top['n_dates']} dates and {top['n_items']} questions of this store, changing the date moved no score: "
                "every model gave the same share of right answers on every date.")  # fmt: skip
else:
    verdict = "beyond chance" if top["beyond_chance"] else "within chance"
    st.markdown(
        f"#### Changing only the date moves {METRICS['accuracy'].name_on(top['dataset'])} of **{top['entry']}** on **{top['dataset']}** "
        f"by up to **{percent(top['delta'])}** (95% interval {percent(top['low'])} to {percent(top['high'])}), **{verdict}**: "
        f"shuffling each question's answers across the dates gives a delta of at most {percent(top['null_upper'])} in 95% of draws "
        f"(p = {top['p_value']:.3f})."
    )
    columns = st.columns(4)
    columns[0].metric("Largest worst-to-best delta", percent(top["delta"]), help=f"worst {top['worst_date']}, best {top['best_date']}")
    columns[1].metric("95% interval (bootstrap over questions)", f"{percent(top['low'])} to {percent(top['high'])}")
    columns[2].metric("Chance alone (95% of permuted deltas ≤)", percent(top["null_upper"]), help=f"p = {top['p_value']:.3f}, {top['n_dates']} dates x {top['n_items']} questions")
    if top["reorder_dataset"] is not None:
        columns[3].metric(f"Date pairs that reorder the {top['reorder_entries']} models on {top['reorder_dataset']}", percent(top["reorder"]))
    else:
        columns[3].metric("Date pairs that reorder the leaderboard", "-", help="needs two or more models on one dataset")
explorer.intro(
    "Each model saw the same questions with only the date in its system prompt changed. Per dataset: the score over all "
    "dates (minimum, mean, maximum), the worst-to-best delta (paper Tables 1, 2, 4 and 8) and the score with no date at "
    "all (Table 9). Rates are percentages, BLEU and chrF points; values are on the questions every condition of a model "
    "scored, so dates compare like with like."
)
summary = descriptive.summarize(metrics)
for dataset, table in summary.groupby("dataset", sort=True):
    names = available_metrics(metrics[metrics["dataset"] == dataset])
    columns = ["entry", "n_items", "n_dates"] + [f"{m}_{part}" for m in names for part in ("min", "mean", "max", "delta", "worst_date", "best_date")]
    columns += [f"no_date_{m}" for m in names]
    st.subheader(dataset)
    explorer.show_table(table[[c for c in columns if c in table and table[c].notna().any()]], dataset)
    mine = paper.yours(metrics, dataset)
    if len(mine):
        with st.expander("The paper beside you: its headline figures next to yours"):
            explorer.show_table(mine)
st.download_button("Download the summary (CSV; rates as fractions, as stored)", summary.to_csv(index=False), "summary.csv", "text/csv")
st.markdown(
    "**Read it as:** *delta* = best date minus worst date (percentage points for rates). Open **Curves** for the "
    "day-by-day picture with intervals, **Leaderboard** for reordering, **Flips** for the questions that change answer, "
    "**Factors** for the date against chance and against other sources of variation."
)
