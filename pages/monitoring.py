"""Monitoring: a project's production traces (issue 31): instrumenting an app (a token made here and the snippet),
the traffic and each rule's decisions, the trace list and a trace opened with why it has, or has not, a score."""
import streamlit as st

from ui import loaders_monitor, monitor, monitor_rules, monitor_series, monitor_traces, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Monitoring")
with w.guard():
    project = monitor.project_picker()
    if project is None:
        st.info("No project yet. Make one and its ingest token below, then run your app with the snippet: its "
                "traces show here.")
        monitor.instrument(None)
        st.stop()
    with st.expander("Instrument your app", icon=":material/key:",
                     expanded=bool(st.session_state.get(monitor.TOKEN))):
        monitor.instrument(project)
    st.subheader("Traffic")
    got = monitor.traffic(project)
    with st.expander("Add or change a rule", icon=":material/rule:"):
        monitor_rules.rule_form(project)
    st.subheader("Rates over time")
    where = monitor_series.rates(project, got["rules"])  # the slice picked there: the trace list keeps to it
    st.subheader("Alerts")
    monitor_series.alerts_panel(project, loaders_monitor.alert_history(project))
    st.subheader("Traces")
    opened = monitor_traces.trace_list(project, got["rules"], where)
    if opened:
        monitor_traces.trace_view(project, opened)
