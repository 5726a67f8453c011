"""Overview: the worst-to-best delta per model and dataset (paper Tables 1, 8 and 9)."""

import streamlit as st

from dateeval import analysis, explorer

st.title("How much does the date in the system prompt move the results?")
explorer.intro(
    "Each model saw the same questions with only the date in its system prompt changed. The table gives, per model and "
    "dataset, accuracy and calibration error (ECE) over all dates: minimum, mean, maximum and the worst-to-best delta "
    "(paper Tables 1 and 8), with the no-date baseline (Table 9). A large delta means a score reported on one day may not "
    "be reproducible on another."
)
frame, metrics = explorer.load()
if metrics.empty:
    explorer.empty_state()
    st.stop()
table = analysis.summarize(metrics)
percent = [c for c in table.columns if c.startswith(("accuracy_", "ece_", "no_date_", "template_default_")) and not c.endswith("_date")]
table[percent] = table[percent] * 100
columns = ["entry", "dataset", "n_items", "n_dates", "accuracy_min", "accuracy_mean", "accuracy_max", "accuracy_delta", "accuracy_worst_date",
           "accuracy_best_date", "ece_min", "ece_max", "ece_delta", "no_date_accuracy", "no_date_ece"]  # fmt: skip
st.dataframe(table[[c for c in columns if c in table]], hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in percent})  # fmt: skip
st.download_button("Download table (CSV)", table.to_csv(index=False), "summary.csv", "text/csv")
st.markdown(
    "**Read it as:** *accuracy delta* = best date minus worst date, in percentage points. Values are on the items every "
    "condition of that model scored, so dates compare like with like. Open **Curves** for the day-by-day picture, "
    "**Leaderboard** for reordering, **Flips** for the questions that change answer."
)
