"""evaldash: the dashboard's entry point — a router over the pages in pages/."""
import streamlit as st

from ui import loaders

st.set_page_config(page_title="evaldash", layout="wide")
loaders.store()  # opens the store and adds the bundled samples on first start
st.session_state["routed"] = True  # see ui.widgets.guard

st.navigation([
    st.Page("pages/runs.py", title="Runs", icon=":material/list:", url_path="runs", default=True),
    st.Page("pages/datasets.py", title="Datasets", icon=":material/dataset:", url_path="datasets"),
    st.Page("pages/new_run.py", title="New evaluation", icon=":material/play_arrow:", url_path="new"),
    st.Page("pages/results.py", title="Results", icon=":material/bar_chart:", url_path="results"),
    st.Page("pages/compare.py", title="Compare runs", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/safety.py", title="Risk and safety", icon=":material/health_and_safety:", url_path="safety"),
    st.Page("pages/attacks.py", title="Jailbreak attacks", icon=":material/shield:", url_path="attacks"),
    st.Page("pages/leaderboard.py", title="WildBench leaderboard", icon=":material/leaderboard:", url_path="leaderboard"),
    st.Page("pages/pairwise.py", title="Pairwise inspector", icon=":material/balance:", url_path="pairwise"),
]).run()
