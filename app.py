"""evaldash: the dashboard's entry point — a router over the pages in pages/."""
import streamlit as st

from ui import loaders

st.set_page_config(page_title="evaldash", page_icon="⚖️", layout="wide")
loaders.store()  # opens the store and adds the bundled samples on first start

st.navigation([
    st.Page("pages/runs.py", title="Runs", icon="📋", url_path="runs", default=True),
    st.Page("pages/datasets.py", title="Datasets", icon="🗂️", url_path="datasets"),
    st.Page("pages/new_run.py", title="New evaluation", icon="▶️", url_path="new"),
    st.Page("pages/results.py", title="Results", icon="📊", url_path="results"),
    st.Page("pages/compare.py", title="Compare runs", icon="⚖️", url_path="compare"),
]).run()
