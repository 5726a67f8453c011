"""What to report: the date-robust number of the selection, the sentence to paste and how many dates it needs (issue 20 §2)."""

import json

import streamlit as st

from dateeval import explorer
from dateeval.explorer import viewstate
from dateeval.results.robust import robust_format

st.title("What to report")
explorer.app_settings()
explorer.intro(
    "One date's score is one draw from the dates a model may see. Report the mean over dates instead, with an interval "
    "that covers both the questions and the dates (exact at the effective sample size the question and date variance give; "
    "docs/coverage.md measures its coverage). Below: the leaderboard by that mean, each "
    "model's range of ranks over the dates, how the variance splits into question, date and question x date, and how "
    "many dates give an interval of the width you want."
)
_, chosen, selection = explorer.page_data()
widths = [0.5, 1.0, 2.0, 5.0, 10.0, 25.0]
viewstate.seed("half_width", widths, 1.0)
half_width = st.select_slider(
    "Interval half-width to plan for (pp)",
    widths,
    key="half_width",
    help="The 95% interval you want: ± this many percentage points.",
)
viewstate.publish("half_width", half_width)
store = explorer.current_store()
record = explorer.robust(store, selection, half_width / 100)
if not record.entries:
    st.info(
        f"A date-robust number needs graded results (not BLEU or chrF) on two or more dates and questions: {selection.dataset} "
        "has none in this selection."
    )
    st.stop()
board = record.board()
st.subheader("The sentence to paste")
for entry in record.entries:
    st.markdown(f"**{entry.entry}**")
    st.code(entry.sentence + ".", language=None, wrap_lines=True)
    st.caption(entry.advice)
st.subheader("Robust leaderboard")
shown = robust_format.display(board, selection.dataset, half_width / 100)
st.dataframe(
    shown,
    hide_index=True,
    width="stretch",
    column_config={
        "95% CI": st.column_config.TextColumn(help=robust_format.CI_HELP),
        robust_format.SD_HEADING: st.column_config.TextColumn(help=robust_format.SD_HELP),
    },
)
st.caption(robust_format.caption(selection.dataset, board))
unresolved = record.unresolved()
if unresolved:
    st.warning(
        "The date reorders these pairs and their intervals overlap, so no ranking of them is date-robust: "
        + "; ".join(unresolved)
        + "."
    )
figure = explorer.robust_figure(record)
if figure is not None:
    st.image(figure, width="stretch")
left, middle, right, last = st.columns(4)
left.download_button(
    "Table (Markdown)", robust_format.markdown(shown), f"robust-{selection.dataset}.md", "text/markdown"
)
caption = robust_format.caption(selection.dataset, board) + " " + record.entries[0].sentence + "."
middle.download_button(
    "Table (LaTeX)", robust_format.latex(shown, caption), f"robust-{selection.dataset}.tex", "text/x-tex"
)
right.download_button(
    "Record (JSON)", json.dumps(record.as_json(), indent=2), f"robust-{selection.dataset}.json", "application/json"
)
if figure is not None:
    last.download_button("Figure (SVG)", figure, f"robust-{selection.dataset}.svg", "image/svg+xml")
    last.download_button(
        "Figure (PNG)", lambda: robust_format.png(record), f"robust-{selection.dataset}.png", "image/png"
    )
