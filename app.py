"""evaldash: the dashboard's entry point — sign-in (when configured), then a router over the pages in pages/."""
import streamlit as st

from ui import auth, loaders

st.set_page_config(page_title="evaldash", layout="wide")
auth.require_sign_in()  # before anything else: a shared deep link shows only the sign-in form
loaders.store()  # opens the store and adds the bundled samples on first start
st.session_state["routed"] = True  # see ui.widgets.guard

st.navigation([
    st.Page("pages/runs.py", title="Runs", icon=":material/list:", url_path="runs", default=True),
    st.Page("pages/datasets.py", title="Datasets", icon=":material/dataset:", url_path="datasets"),
    st.Page("pages/new_run.py", title="New evaluation", icon=":material/play_arrow:", url_path="new"),
    st.Page("pages/results.py", title="Results", icon=":material/bar_chart:", url_path="results"),
    st.Page("pages/compare.py", title="Compare runs", icon=":material/compare_arrows:", url_path="compare"),
]).run()
