"""dateeval explorer: ``streamlit run app.py`` (or ``./run.sh app``)."""

import streamlit as st

st.set_page_config(page_title="dateeval", page_icon="📅", layout="wide")
PAGES = [
    st.Page("pages/overview.py", title="Overview", icon="📋", default=True),
    st.Page("pages/curves.py", title="Curves", icon="📈"),
    st.Page("pages/leaderboard.py", title="Leaderboard", icon="🏆"),
    st.Page("pages/flips.py", title="Flips", icon="🔀"),
    st.Page("pages/prompt.py", title="Prompt", icon="🔎"),
    st.Page("pages/run.py", title="Run", icon="▶️"),
]
navigation = st.navigation(PAGES)
navigation.run()
