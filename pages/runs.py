"""Runs: every evaluation in the store, newest first, a page at a time; a run's name opens its results.

A list of links, not a data grid: the grid's code costs a browser about half a second to load
before it draws anything (bench/dashboard_scale.py), and a link opens a run in one click.
"""
import streamlit as st

from ui import loaders, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

PER_PAGE = 25
# Each run's name and line are inline code spans (data stays inert: no link, no HTML, no directive), drawn by
# default as monospace boxes that break apart when a long line wraps. Our own style sheet (no data in it),
# scoped to the list, draws them as the page's text: the name bold on a line of its own, the line under it in
# the caption's grey, wrapping as text does. (A style-only st.html goes to Streamlit's event container.)
PLAIN_SPANS = """<style>
.st-key-runs_list [data-testid="stPageLink"] code { font-family: inherit; font-size: inherit; background: none;
    padding: 0; border: 0; color: inherit; white-space: normal; overflow-wrap: anywhere; line-height: inherit; }
.st-key-runs_list [data-testid="stPageLink"] p { line-height: 1.45; padding: 0.3rem 0; }
.st-key-runs_list [data-testid="stPageLink"] p > strong { display: block; }
.st-key-runs_list [data-testid="stPageLink"] p > code { color: rgba(49, 51, 63, 0.6); }
</style>"""

st.title("Runs")
with w.guard():
    runs = loaders.runs(st.query_params.get("run"))
    st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
    if not runs:
        st.info("No runs yet. The bundled sample datasets are ready: start a new evaluation; classic metrics need no key.")
        st.stop()
    names = {d["id"]: d["name"] for d in loaders.datasets(st.query_params.get("dataset"))}
    # The filter box opens from a button that names the filter in use: drawn on the page, the text box
    # cost each first render of the list ~0.06 s (a browser A/B of new-tab loads).
    typed = st.session_state.get("q", st.query_params.get("q", ""))  # a new value is in the state before its rerun
    with st.popover(f"Filter: {w.literal(typed)}" if typed.strip() else "Filter", icon=":material/filter_list:"):
        query = st.text_input("Runs whose name or line holds", key="q", bind=state.URL,
                              placeholder="a run's name, dataset, metric, status, judge or author",
                              on_change=lambda: st.query_params.pop("page", None))  # a new filter starts at page 1
    listed = w.run_lines(runs, names, query)
    pages = max(1, -(-len(listed) // PER_PAGE))
    page = min(max(state.read("page", 1, int), 1), pages)
    first = (page - 1) * PER_PAGE
    st.caption(f"{len(listed):,} of {w.count(len(runs), 'run')}" if query else w.count(len(runs), "run"))
    if not listed:
        st.info("No run matches the filter.")
    # One container for the page's runs, not one per run, and one element per run: its link, whose
    # label is the run's name (bold) and its line. 25 nested blocks cost a browser ~0.3 s of main-thread
    # time on a page's first render; a line under each link, as a second element, ~0.07 s (A/B of
    # new-tab loads). Names and lines are data: each an inline code span, never Markdown (w.literal).
    with st.container(gap=None, key="runs_list"):
        st.html(PLAIN_SPANS)
        for run, line in listed[first:first + PER_PAGE]:
            st.page_link("pages/results.py", label=f"**{w.literal(run['name'])}** {w.literal(line)}",
                         query_params={"run": run["id"]},
                         icon=w.STATUS_ICONS.get(w.status_word(run), ":material/circle:"))
    if pages > 1:
        w.pager("pages/runs.py", page, pages, {"q": query} if query else {})
