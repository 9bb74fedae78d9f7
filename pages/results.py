"""Results of one run: headline, the run in one picture, distributions and thresholds, errors, every row, exports."""
import streamlit as st

from ui import cost, exports_widgets, judge_form, loaders, overview, review, rows, state, trace, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Results")
with w.guard():
    runs = loaders.runs(st.query_params.get("run"))
    if not runs:
        st.info("No runs yet.")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    run_id = w.run_picker(runs)
    run = loaders.run(run_id)
    w.run_status(run)
    overview.refresh_while_running(run)
    head = st.container()
    traced = ["Trace"] if trace.has_traces(run) else []  # an agent run: a row's trace, one click from here
    views = ["Metrics", "Thresholds", "Rows", *traced, "Errors", "Share & export"]
    tabs = st.tabs(views, key="view", bind=state.URL)
    tab_metrics, tab_thresholds, tab_rows, *tab_trace, tab_errors, tab_share = tabs
    shown = next((v for v, t in zip(views, tabs) if t.open), None)
    if shown not in (None, "Share & export"):
        st.session_state["results.came_from"] = shown  # the view a share link opens (see exports_widgets)
    with tab_thresholds:  # sliders only in their tab; the thresholds they set (in the URL) hold on every tab
        intro, cells = st.container(), {}
        thresholds = w.threshold_bar(run, cells, shown=tab_thresholds.open is not False)
    res = loaders.results(run, thresholds)
    with head:
        w.what_if_banner(run, thresholds)
        w.headline(res, review.distrusted(run, res))
        review.results_summary(run, res)
        cost.cost_panel(run)
    if tab_metrics.open is not False:  # the figures cost passes over the run: drawn only while their tab is open
        with tab_metrics:
            st.markdown("#### Overview")
            overview.run_overview(res, overview.target_control())
            st.markdown("#### Score distributions")
            overview.distributions(res)
            trace.tool_rates(run, res)
    if tab_thresholds.open is not False:
        overview.what_if(res, intro, cells)
    # Only the open tab is drawn (the tabs are bound to the URL, so switching one re-runs the page):
    # a first render sends the browser one tab's elements, not a 100-row grid hidden behind another.
    if tab_rows.open is not False:
        with tab_rows:
            rows.rows_view(res)  # a fragment: filtering, paging and selecting rerun only this tab
    if tab_trace and tab_trace[0].open is not False:
        with tab_trace[0]:
            trace.trace_tab(res)
    if tab_errors.open is not False:
        with tab_errors:
            judge_form.errors_panel(res, run)
    if tab_share.open is not False:
        with tab_share:
            exports_widgets.share_link(views[:-1], st.session_state.get("results.came_from"))
            exports_widgets.exports(res, run)
