"""Flips: which questions change answer when only the date changes (paper Table 7 and beyond)."""

import os
from pathlib import Path

import streamlit as st

from dateeval import explorer, plots
from dateeval.data import load_items
from dateeval.data.items import LABELS
from dateeval.errors import DateEvalError

st.title("Questions that flip with the date")
explorer.intro(
    "For each question: on how many dates the model is right, how often its answer changes from one date to the next, "
    "and its confidence. Fragile answers are the low-confidence ones (paper Table 7): accuracy alone hides them."
)
_, _, selection = explorer.page_data(multi_entry=False)
store = explorer.current_store()
flips, table7 = explorer.flips(str(store.root), store.fingerprint(), selection)
if flips.empty:
    st.info("No dated results for this selection.")
    st.stop()
rows = explorer.select(selection)
st.subheader("Confidence of consistent vs inconsistent predictions (Table 7)")
st.dataframe(table7, hide_index=True, width="stretch")
only_flipping = st.checkbox("Only questions whose answer changes", value=True)
shown = flips[~flips["consistent"]] if only_flipping else flips
st.subheader(f"{len(shown)} questions, most date-sensitive first")
st.dataframe(shown, hide_index=True, width="stretch", column_config={"mean_confidence": st.column_config.ProgressColumn(min_value=0, max_value=1)})
st.download_button("Download (CSV)", shown.to_csv(index=False), "flips.csv", "text/csv")
if shown.empty:
    st.stop()
item_id = st.selectbox("Question", shown["item_id"].tolist())
item_rows = rows[(rows["item_id"] == item_id) & (rows["factor"] == "date")].sort_values("date")
n_options = int(item_rows["n_options"].iloc[0])
probs = explorer.item_probs(str(store.root), store.fingerprint(), item_rows["model_key"].iloc[0], selection.dataset, item_id)
probs = probs[probs["condition_key"].isin(item_rows["condition_key"]) & probs["task_key"].isin(item_rows["task_key"])]
probs = probs.drop_duplicates("condition_key").sort_values("date")
figure = plots.option_heatmap(probs, list(LABELS[:n_options]))
st.plotly_chart(figure, width="stretch")
answer = int(item_rows["answer"].iloc[0])
st.caption(f"Correct option: {LABELS[answer]}. Predictions over dates: " + ", ".join(f"{LABELS[p]}×{n}" for p, n in item_rows["pred"].value_counts().items()))
default_dir = os.environ.get("DATEEVAL_DATA_DIR", str(Path(explorer.ROOT).parent / "shared" / "data"))
data_dir = st.text_input("Data folder for question text (the store keeps ids and numbers only)", value=default_dir)


@st.cache_data(show_spinner="Loading questions...")
def questions(dataset: str, folder: str) -> dict:
    return {item.id: item for item in load_items(dataset, folder or None)}


try:
    item = questions(selection.dataset, data_dir).get(item_id)
except DateEvalError as error:
    st.error(f"Question text unavailable: {error}")
else:
    if item is None:
        st.warning("This question id is not in that data folder.")
    else:
        st.markdown(f"**{item.question}**")
        for label, option in zip(item.labels, item.options):
            st.markdown(f"{'✅' if LABELS.index(label) == item.answer else '▫️'} **{label}.** {option}")
