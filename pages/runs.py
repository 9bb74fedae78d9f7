"""Runs: every evaluation in the store as a table (ui.runs_table), newest first, 50 a page; sortable by any column,
runs selected in it opened, compared, renamed, archived or deleted. Archived runs are listed only on request."""
import streamlit as st

from ui import loaders, runs_table, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

PER_PAGE = 50

st.title("Runs")
with w.guard():
    runs_table.outcome()
    archived = st.session_state.get("archived", state.read("archived", "") == "true")  # its toggle is drawn below
    runs = loaders.runs(st.query_params.get("run"), archived=archived)
    st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
    if not runs and not archived:
        st.info("No runs yet. The bundled sample datasets are ready: start a new evaluation; classic metrics need no key.")
        st.stop()
    names = {d["id"]: d["name"] for d in loaders.datasets(archived=True)}
    typed = st.session_state.get("q", st.query_params.get("q", ""))  # a new value is in the state before its rerun
    with st.container(horizontal=True, gap="medium", vertical_alignment="center"):
        with st.popover(f"Filter: {w.literal(typed)}" if typed.strip() else "Filter", icon=":material/filter_list:"):
            query = st.text_input("Runs whose name or line holds", key="q", bind=state.URL,
                                  placeholder="a run's name, dataset, metric, status, judge or author",
                                  on_change=lambda: st.query_params.pop("page", None))  # a new filter starts at page 1
        st.toggle("Show archived", key="archived", bind=state.URL, on_change=lambda: st.query_params.pop("page", None))
    listed = [r for r, _ in w.run_lines(runs, names, query)]
    pages = max(1, -(-len(listed) // PER_PAGE))
    page = min(max(state.read("page", 1, int), 1), pages)
    first = (page - 1) * PER_PAGE
    st.caption((f"{len(listed):,} of {w.count(len(runs), 'run')}" if query else w.count(len(runs), "run"))
               + (", archived ones included" if archived else "") + ". Click a heading to sort.")
    if not listed:
        st.info("No run matches the filter." if runs else "No runs, archived or not.")
        st.stop()
    chosen = runs_table.table(listed[first:first + PER_PAGE], names)
    if pages > 1:
        w.pager("pages/runs.py", page, pages, {k: v for k, v in (("q", query), ("archived", "true" if archived else ""))
                                                if v})
    runs_table.actions(chosen)
