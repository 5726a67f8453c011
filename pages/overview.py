"""Overview: the worst-to-best delta per model and dataset (paper Tables 1, 8 and 9)."""

import streamlit as st

from dateeval import analysis, explorer
from dateeval.metrics import column

st.title("How much does the date in the system prompt move the results?")
explorer.intro(
    "Each model saw the same questions with only the date in its system prompt changed. The table gives, per model and "
    "dataset, accuracy (pass@1 on HumanEval), calibration error (ECE; next-token MCQA only) and BLEU/chrF (translation) "
    "over all dates: minimum, mean, maximum and the worst-to-best delta (paper Tables 1, 2, 4 and 8), with the no-date "
    "baseline (Table 9). A large delta means a score reported on one day may not "
    "be reproducible on another."
)
_, metrics = explorer.load()
table = analysis.summarize(metrics)
numbers = [c for c in table.columns if table[c].dtype.kind == "f"]
percent = [c for c in numbers if column(c).kind == "percent"]
table[percent] = table[percent] * 100
columns = ["entry", "dataset", "n_items", "n_dates"] + [
    f"{metric}_{part}" for metric in analysis.METRICS for part in ("min", "mean", "max", "delta", "worst_date", "best_date")
] + [f"no_date_{metric}" for metric in analysis.METRICS]  # fmt: skip
shown = [c for c in columns if c in table and table[c].notna().any()]
st.dataframe(table[shown], hide_index=True, width="stretch", column_config={c: st.column_config.NumberColumn(format="%.2f") for c in numbers})
st.download_button("Download table (CSV)", table.to_csv(index=False), "summary.csv", "text/csv")
st.markdown(
    "**Read it as:** *accuracy delta* = best date minus worst date, in percentage points. Values are on the items every "
    "condition of that model scored, so dates compare like with like. Open **Curves** for the day-by-day picture, "
    "**Leaderboard** for reordering, **Flips** for the questions that change answer."
)
