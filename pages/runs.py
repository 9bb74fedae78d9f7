"""Runs: every evaluation in the store, newest first, a page at a time; a run's name opens its results.

A list of links, not a data grid: the grid's code costs a browser about half a second to load
before it draws anything (bench/dashboard_scale.py), and a link opens a run in one click.
"""
import streamlit as st

from ui import loaders, state, widgets as w

PER_PAGE = 25

st.title("Runs")
with w.guard():
    runs = loaders.runs(st.query_params.get("run"))
    st.page_link("pages/new_run.py", label="Start a new evaluation", icon=":material/play_arrow:")
    if not runs:
        st.info("No runs yet. The bundled sample datasets are ready: start a new evaluation; classic metrics need no key.")
        st.stop()
    names = {d["id"]: d["name"] for d in loaders.datasets(st.query_params.get("dataset"))}
    query = st.text_input("Filter", key="q", bind=state.URL, placeholder="a run's name, dataset, metric, status, judge or author",
                          on_change=lambda: st.query_params.pop("page", None))  # a new filter starts at its first page
    listed = w.run_lines(runs, names, query)
    pages = max(1, -(-len(listed) // PER_PAGE))
    page = min(max(state.read("page", 1, int), 1), pages)
    first = (page - 1) * PER_PAGE
    st.caption(f"{len(listed):,} of {len(runs):,} runs" if query else f"{len(runs):,} runs")
    if not listed:
        st.info("No run matches the filter.")
    # One container for the page's runs, not one per run: 25 nested blocks cost a browser ~0.3 s of
    # main-thread time on a page's first render (bench/dashboard_scale.py).
    with st.container(gap=None):
        for run, line in listed[first:first + PER_PAGE]:
            st.page_link("pages/results.py", label=w.literal(run["name"]), query_params={"run": run["id"]},
                         icon=w.STATUS_ICONS.get(w.status_word(run), ":material/circle:"))
            st.text(line)  # names and datasets are data: plain text, never Markdown
    if pages > 1:
        w.pager("pages/runs.py", page, pages, {"q": query} if query else {})
