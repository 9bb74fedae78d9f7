"""Dashboard helpers: cached loaders (``loaders``), URL-bound state (``state``), shared widgets (``widgets``).

Only the dashboard imports these; the engine (``evaluators``) never imports Streamlit.
"""
from streamlit.runtime.pages_manager import PagesManager

# app.py routes with st.navigation. Because a pages/ folder exists, Streamlit starts a
# process in its legacy multipage mode until some session has run st.navigation, so a
# first visitor landing on /results would get that page without the router (no layout,
# file names in the sidebar). Pinned streamlit version; see widgets.guard for the rerun.
PagesManager.uses_pages_directory = False
