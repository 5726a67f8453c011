"""Flips: which questions change answer when only the date changes (paper Table 7), and how generated outputs diverge (§5.3)."""

import pandas as pd
import streamlit as st

from dateeval import analysis, explorer, plots
from dateeval.data.items import LABELS
from dateeval.tasks import generates

st.title("Questions that flip with the date")
explorer.intro(
    "For each question: on how many dates the model is right, how often its answer changes from one date to the next, "
    "and its confidence. Fragile answers are the low-confidence ones (paper Table 7): accuracy alone hides them. For "
    "generated answers (chain of thought, GSM8K, HumanEval, translation) pick two dates to read the outputs side by "
    "side: where they first diverge is where the date started a different reasoning path (§5.3)."
)
_, _, selection = explorer.page_data(multi_entry=False)
store = explorer.current_store()
flips, table7 = explorer.flips(str(store.root), store.fingerprint(), selection)
if flips.empty:
    st.info("No dated results for this selection.")
    st.stop()
rows = explorer.select(selection)
if table7["consistent_confidence"].notna().any() or table7["inconsistent_confidence"].notna().any():
    st.subheader("Confidence of consistent vs inconsistent predictions (Table 7)")
    st.dataframe(table7, hide_index=True, width="stretch")
only_flipping = st.checkbox("Only questions whose answer changes", value=True)
shown = flips[~flips["consistent"]] if only_flipping else flips
shown = shown.dropna(axis=1, how="all")
st.subheader(f"{len(shown)} questions, most date-sensitive first")
st.dataframe(shown, hide_index=True, width="stretch", column_config={"mean_confidence": st.column_config.ProgressColumn(min_value=0, max_value=1)})
st.download_button("Download (CSV)", shown.to_csv(index=False), "flips.csv", "text/csv")
if shown.empty:
    st.stop()
item_id = st.selectbox("Question", shown["item_id"].tolist())
item_rows = rows[(rows["item_id"] == item_id) & (rows["factor"] == "date")].sort_values("date")
model_key = item_rows["model_key"].iloc[0]


def history(*columns: str) -> pd.DataFrame:
    """The item's chosen columns on each of the selected dates, one row per date."""
    rows = explorer.item_history(str(store.root), store.fingerprint(), model_key, selection.dataset, item_id, columns)
    rows = rows[rows["condition_key"].isin(item_rows["condition_key"]) & rows["task_key"].isin(item_rows["task_key"])]
    return rows.drop_duplicates("condition_key").sort_values("date").reset_index(drop=True)


def option_probabilities() -> None:
    """Next-token MCQA: each option's probability on each date, and the predictions."""
    n_options = int(item_rows["n_options"].iloc[0])
    probs = history("probs")
    probs = probs[probs["probs"].notna()]  # CoT: none where the answer was unparseable
    st.plotly_chart(plots.option_heatmap(probs, list(LABELS[:n_options])), width="stretch")
    answer = int(item_rows["answer"].iloc[0])
    counts = ", ".join(f"{LABELS[int(p)]}×{n}" for p, n in item_rows["pred"].dropna().value_counts().items())
    st.caption(f"Correct option: {LABELS[answer]}. Predictions over dates: {counts}")


def verdict(row: pd.Series) -> str:
    if not pd.isna(row["correct"]):
        return "✅ right" if row["correct"] else "❌ wrong"
    return "" if pd.isna(row["score"]) else f"sentence chrF {row['score']:.1f}"


def outputs_side_by_side() -> None:
    """Generated tasks: the item's result on each date, then two dates' outputs with their first divergence."""
    outputs = history("output", "parsed", "correct", "score", "outcome", "outcome_message")
    st.plotly_chart(plots.item_over_dates(outputs, selection.dataset), width="stretch")
    dates = outputs["date"].tolist()
    right, wrong = outputs.index[outputs["correct"] == True], outputs.index[outputs["correct"] == False]  # noqa: E712 - may hold None
    first_default, second_default = (int(right[0]), int(wrong[0])) if len(right) and len(wrong) else (0, min(1, len(dates) - 1))
    left, right_column = st.columns(2)
    a = left.selectbox("Date A", range(len(dates)), index=first_default, format_func=lambda i: dates[i], key="output_a")
    b = right_column.selectbox("Date B", range(len(dates)), index=second_default, format_func=lambda i: dates[i], key="output_b")
    one, two = outputs.loc[a], outputs.loc[b]
    where = analysis.first_divergence(one["output"], two["output"])
    if where is None:
        st.success("The two dates produced identical outputs.")
    else:
        common = one["output"][:where]
        st.caption(f"Identical for the first {where} characters ({len(common.split())} words), then they diverge: the highlighted text differs.")
    html_a, html_b = plots.highlighted_diff(one["output"], two["output"])
    for column, row, html in ((left, one, html_a), (right_column, two, html_b)):
        parsed = "unparseable" if pd.isna(row["parsed"]) else str(row["parsed"])[:60]
        column.markdown(f"**{row['date']}** · {verdict(row)} · parsed: `{parsed}`")
        column.markdown(html, unsafe_allow_html=True)
        if isinstance(row.get("outcome"), str):
            with column.expander(f"Execution: {row['outcome']}"):
                st.code(row["outcome_message"] or "(no output)")


if item_rows["n_options"].notna().any() and item_rows["confidence"].notna().any():  # a choice task with option probabilities
    option_probabilities()
if generates(selection.dataset):
    outputs_side_by_side()
explorer.describe_item(selection.dataset, item_id)
