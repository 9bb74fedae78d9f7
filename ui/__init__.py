"""Dashboard helpers: cached loaders (``loaders``), URL-bound state (``state``), shared widgets (``widgets``).

Only the dashboard imports these; the engine (``evaluators``) never imports Streamlit.
"""
