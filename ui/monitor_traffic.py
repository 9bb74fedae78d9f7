"""The Monitoring page's traffic over time, its slice and its deploys (issue 32): pickers for a model, a service and
a deployed version (in the URL) that narrow every figure of the page; traces and judged ones per window, a bar a
click opens in the trace list below; mean latency and tokens; and a deploy (a change of ``service.version``)
compared before and after, in the Compare page's sentence (evaluators.read.monitor_traffic)."""
from __future__ import annotations

import streamlit as st

from evaluators.read.monitor_traffic import Slice, around_deploy, traffic_chart, usage_chart
from ui import loaders_monitor, state

ALL = "all"


def slice_picker(project: str, since_ns: int, until_ns: int) -> Slice:
    """A model, a service and a version the range's traces carry (or all): the slice the page reads."""
    offered = loaders_monitor.slice_values(project, since_ns, until_ns)
    cols = st.columns(3)
    picked = {}
    for col, (name, label) in zip(cols, (("model", "Model"), ("service", "Service"), ("version", "Version"))):
        current = st.query_params.get(f"slice_{name}")
        options = [ALL] + offered[name] + ([current] if current and current not in offered[name] else [])
        value = col.selectbox(label, options, key=f"slice_{name}", bind=state.URL,
                              help=f"Only the traces whose {name} is this one, in every chart and count below")
        picked[name] = None if value == ALL else value
    where = Slice(**picked)
    if where.said():
        st.caption(f"Every figure below is of the traces of {where.said()}.")
    return where


def traffic(project: str, rule: str | None, since_ns: int, until_ns: int, window_s: int, window: str,
            where: Slice) -> None:
    """Traces (and the rule's judged ones) per window; a clicked bar opens its window in the trace list."""
    points = loaders_monitor.traffic_series(project, since_ns, until_ns, window_s, rule, where)
    total, judged = sum(p["traces"] for p in points), sum((p.get("decisions") or {}).get("judged", 0) for p in points)
    event = st.vega_lite_chart(traffic_chart(points, f"traces per {window}" + (f" (judged by rule {rule!r} darker)"
                                                                                if rule else "")),
                               width="stretch", on_select="rerun", selection_mode="pick", key="monitor.traffic")
    picked = (event.selection.get("pick") or [{}])[0].get("start_ns") if event and event.selection else None
    if picked is not None:
        state.write("at", str(int(picked)))
        state.write("at_w", str(window_s))
    errors = sum(p["errors"] for p in points)
    st.caption(f"{total:,} traces in the range by their start time, {judged:,} judged, {errors:,} with an error. "
               "Click a bar to list that window's traces below.")
    if total:
        st.vega_lite_chart(usage_chart(points), width="stretch")
        st.caption("Mean latency and mean tokens a trace, per window, as the app's spans report them; a window with "
                   "no trace has no point.")


def deploy(project: str, rule: dict, metric: str, since_ns: int, until_ns: int, where: Slice) -> None:
    """A deploy (a version first seen after another) compared with the time before it, as long on both sides."""
    found = loaders_monitor.deploys(project, since_ns, until_ns, where)
    later = [d["version"] for d in found[1:]]
    if not later:
        st.caption("No deploy in the range: the traces carry one service.version or none (set it as a resource "
                   "attribute of your app, e.g. OTEL_RESOURCE_ATTRIBUTES=service.version=1.4.2).")
        return
    version = st.selectbox("Deploy of version", later, index=len(later) - 1, key="deploy", bind=state.URL)
    before, after = around_deploy(found, version, until_ns)
    got = loaders_monitor.compare_periods(project, rule["name"], metric, before, after,
                                          (f"before {version}", f"since {version}"), where)
    hours = (after[1] - after[0]) / 3.6e12
    st.text(f"The {hours:,.1f} hours since version {version} against the {hours:,.1f} hours before it: "
            f"{got['sentence']}")
