"""dateeval explorer: ``./run.sh app`` (``python -m dateeval.cli.launch``). Plain ``streamlit run app.py`` works too, except
that a deep link as a fresh server's first request then opens in Streamlit's v1 mode (see dateeval/cli/launch.py)."""

import streamlit as st

st.set_page_config(page_title="dateeval", page_icon=":material/calendar_month:", layout="wide")
PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/table_chart:", default=True),
    st.Page("pages/curves.py", title="Curves", icon=":material/show_chart:"),
    st.Page("pages/leaderboard.py", title="Leaderboard", icon=":material/leaderboard:"),
    st.Page("pages/robust.py", title="What to report", icon=":material/verified:"),
    st.Page("pages/flips.py", title="Flips", icon=":material/swap_horiz:"),
    st.Page("pages/factors.py", title="Factors", icon=":material/tune:"),
    st.Page("pages/prompt.py", title="Prompt", icon=":material/search:"),
    st.Page("pages/run.py", title="Run", icon=":material/play_arrow:"),
]
navigation = st.navigation(PAGES)
navigation.run()
