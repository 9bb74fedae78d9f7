"""The Monitoring page's trace list (filters and paging in the URL, read a page at a time from the database) and a
trace opened: its spans, its row with where each field came from, and each rule's decision with the answer to "why
has this trace no score". What an app, a user or a judge wrote is shown as text only (st.text, st.code, cells)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import streamlit as st

from evaluators.monitor.redact import mask
from evaluators.monitor.rules import sample_point
from evaluators.read.monitor import PAGE, SCAN, STATES, TraceFilter
from evaluators.store.monitor_rules import DECISIONS
from evaluators.store.schema import utcnow
from ui import loaders, state, trace as trace_ui, widgets as w

RANGES = {"any time": None, "last hour": dt.timedelta(hours=1), "last 24 hours": dt.timedelta(days=1),
          "last 7 days": dt.timedelta(days=7), "last 30 days": dt.timedelta(days=30)}
ANY = "any"


def _new_filter() -> None:
    st.query_params.pop("before", None)  # a new filter starts at the newest
    st.query_params.pop("trace", None)


def filters(rules: list[dict], where=None) -> TraceFilter:
    """The list's filters, each bound to the URL; ``where``: the page's slice (a model, service, version)."""
    options = [ANY] + [f"{r['name']}: {d}" for r in rules for d in DECISIONS]
    c1, c2, c3, c4 = st.columns([1, 1, 1.4, 2])
    since = c1.selectbox("Arrived", list(RANGES), key="range", bind=state.URL, on_change=_new_filter)
    shown = c2.selectbox("State", [ANY, *STATES], key="state", bind=state.URL, on_change=_new_filter,
                         format_func=lambda s: s.replace("_", " "))
    decision = c3.selectbox("Decision of a rule", options, key="decision", bind=state.URL, on_change=_new_filter,
                            format_func=lambda s: s.replace("_", " "))
    text = c4.text_input("Query or response holds", key="text", bind=state.URL, on_change=_new_filter)
    span, metric, at_most = more_filters(rules)
    rule = version = picked = None
    if decision != ANY:
        name, picked = decision.rsplit(": ", 1)
        rule = next(r for r in rules if r["name"] == name)
        rule, version = rule["name"], rule["version"]
    start = end = started = None
    if RANGES[since] is not None:  # to the minute, so a page is cached for a minute's reruns, not one
        start = utcnow().replace(second=0, microsecond=0) - RANGES[since]
    window = picked_window()
    if window is not None:  # a bar of the traffic chart: the traces it counts, those that started in its window
        start = None  # (the arrival range gives way to the window, as the bar's count is of every arrival)
        started = [(t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1) * 1000 for t in window]
        st.caption(f"The traces that started from {_when(window[0])} to {_when(window[1])} UTC (the window picked on "
                   "the traffic chart, whose bars count traces by their start time, a late batch's too), newest "
                   "arrival first.")
        if st.button("Show every window", key="monitor.all_windows"):
            for k in ("at", "at_w", "before", "trace"):
                st.query_params.pop(k, None)
            st.rerun()
    return TraceFilter(since=start, until=end, started_from=started and started[0],
                       started_until=started and started[1], state=None if shown == ANY else shown,
                       rule=rule, rule_version=version, decision=picked, text=text or "",
                       model=getattr(where, "model", None), service=getattr(where, "service", None),
                       version=getattr(where, "version", None), span=span or "", metric=metric,
                       score_at_most=at_most)


def more_filters(rules: list[dict]) -> tuple[str, str | None, float | None]:
    """A span's name, and a judged score at most a value (a rule's metric): (span, metric, at most)."""
    metrics = list(dict.fromkeys(m for r in rules for m in r["metrics"]))
    c1, c2, c3 = st.columns([2, 1.4, 1])
    span = c1.text_input("Has a span named", key="span", bind=state.URL, on_change=_new_filter)
    metric = c2.selectbox("Judged score of", [ANY, *metrics], key="score_of", bind=state.URL, on_change=_new_filter)
    at_most = c3.number_input("at most", value=None, step=1.0, key="score_max", bind=state.URL, on_change=_new_filter,
                              disabled=metric == ANY)
    return span, None if metric == ANY else metric, None if metric == ANY or at_most is None else float(at_most)


def picked_window() -> tuple[dt.datetime, dt.datetime] | None:
    """The window a click on the traffic chart put in the URL (``at``: its start in ns, ``at_w``: its width in s)."""
    try:
        at, width = int(st.query_params.get("at", "")), int(st.query_params.get("at_w", ""))
    except ValueError:
        return None
    if width <= 0:
        return None
    start = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=at // 1000)
    return start, start + dt.timedelta(seconds=width)


def _key(raw: str | None) -> tuple[dt.datetime, str] | None:
    """A page's key from the URL ("2026-11-28T09:30:00.123456~<trace id>"); None if absent or unreadable."""
    try:
        when, tid = (raw or "").split("~", 1)
        return dt.datetime.fromisoformat(when), tid
    except ValueError:
        return None


def _digest(f: TraceFilter, before) -> str:
    """Names a list (its filter and page): a new list is a new table, whose selection starts empty (a table keeps
    its selected position, which in another list is another trace)."""
    return hashlib.sha256(repr((f, before)).encode()).hexdigest()[:12]


def _when(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def trace_list(project: str, rules: list[dict], where=None) -> str | None:
    """The filtered list (of the page's slice ``where``), a page at a time, newest first; returns the trace the URL
    opens (None: none)."""
    import pandas as pd

    f = filters(rules, where)
    before = _key(st.query_params.get("before"))
    page = loaders.trace_page(project, f, before)
    rows = page["rows"]
    if not rows:
        narrowed = f.residual() or f.since or f.started_from is not None
        st.info("No trace matches." if narrowed else "No trace yet: instrument your app (above).")
    else:
        frame = pd.DataFrame([{"arrived (UTC)": _when(r["first_seen"]), "trace": r["trace_id"],
                               "state": _state(r), **{f"rule {k}": v.replace("_", " ") for k, v in r["decisions"].items()},
                               "query": r["query"] or "", "response": r["response"] or "", "model": r["model"] or ""}
                              for r in rows])
        event = st.dataframe(frame, hide_index=True, on_select="rerun", selection_mode="single-row",
                             key=f"monitor.traces.{_digest(f, before)}", height=min(36 + 35 * len(rows), 560))
        picked = state.selected(event, len(rows))
        if picked is not None:
            state.write("trace", rows[picked]["trace_id"])
    if page["looked_to"] is not None:
        st.caption(f"Looked through the {SCAN:,} traces that arrived before this page's start, back to "
                   f"{_when(page['looked_to'][0])}; more may match further back (Older).")
    _pager(page, before)
    return st.query_params.get("trace")


def _state(r: dict) -> str:
    if r["status"] == "open":
        return "open"
    return "no content" if r["content"] is False else "no root" if r["completeness"] == "no_root" else "mapped"


def _pager(page: dict, before) -> None:
    c1, c2, _ = st.columns([1, 1, 4])
    if before is not None and c1.button("Newest", icon=":material/first_page:", key="monitor.newest"):
        st.query_params.pop("before", None)
        st.rerun()
    if page["next"] is not None and c2.button(f"Older ({PAGE} more)", icon=":material/navigate_next:",
                                              key="monitor.older"):
        when, tid = page["next"]
        state.write("before", f"{when.isoformat()}~{tid}")
        st.rerun()


def trace_view(project: str, trace_id: str) -> None:
    """A trace opened: why each rule has or has no score, its row and sources, its spans."""
    t = loaders.trace_detail(project, trace_id)
    if t is None:
        state.not_found("trace", "trace", trace_id)
    st.subheader("Trace")
    st.code(trace_id, language=None)
    st.caption(f"arrived {_when(t['first_seen'])} UTC · last span {_when(t['last_seen'])} UTC · "
               + ("open" if t["status"] == "open" else _state(t)))
    st.markdown("**Rules: why this trace has, or has not, a score**")
    if not t["rules"]:
        st.text("No rule judges this project's traces.")
    for rule in t["rules"]:
        st.text(f"{rule['name']} (version {rule['version']}): {why(t, rule)}")
        if rule["error"]:
            st.code(rule["error"], language=None, wrap_lines=True)
        for sc in rule["scores"]:
            value = "–" if sc["value"] is None else f"{sc['value']:g}"
            st.text(f"  {sc['metric']}: {value} ({sc['status']})" + (f", turn {sc['turn']}" if sc["turn"] else ""))
            if sc["reason"]:
                st.caption("Judge's reasoning")
                st.text(sc["reason"])
            if sc["error"]:
                st.code(sc["error"], language=None, wrap_lines=True)
    _row(t)
    _conversation(project, trace_id)
    _spans(t)


def _conversation(project: str, trace_id: str) -> None:
    """The trace's turns and tool calls (ui.trace, the view the Results page's Trace tab draws), from its raw spans
    with what the project redacts replaced by its label: the spans are stored as the app sent them."""
    spans, logs, cut = loaders.trace_telemetry(project, trace_id)
    turns = mask(loaders.store(), project, trace_ui.spans_turns(spans, logs))  # (settings read now: never stale)
    if not turns:
        return
    st.markdown("**Agent trace**")
    if cut:
        st.caption("A very long trace: its first 2,000 spans and log records are shown.")
    trace_ui.trace_view(turns, fold=True)


def why(t: dict, rule: dict) -> str:
    """The answer to "why has this trace no score" for one rule (or what its score is)."""
    d = rule["decision"]
    if d is None:
        if t["status"] == "open":
            return ("not decided yet: the trace is still open (its root span has not ended, or a span came within "
                    "the project's quiet period); rules decide it once it is mapped")
        return "not decided yet: the next `monitor rule run` decides it"
    if d == "sampled_out":
        return (f"sampled out: the rule judges {rule['sample_rate']:.0%} of traces, those whose trace-id hash is "
                f"under {rule['sample_rate']:g}; this one's is {sample_point(t['trace_id']):.3f}")
    if d == "no_content":
        return "no content: the app captured nothing to judge. " + (t["hint"] or "")
    if d == "pending":
        return "pending: to be judged at the next rule run"
    if d == "judged":
        return "judged: " + ("its scores below" if rule["scores"] else "its run's results are no longer in the store")
    if d == "failed":
        return "failed: judging it raised the error below"
    return d.replace("_", " ") + (": see below" if rule["error"] else "")


def _row(t: dict) -> None:
    st.markdown("**The row, and where each field came from**")
    fields, sources = t["fields"] or {}, t["sources"] or {}
    if not fields:
        st.text("No row yet (the trace is open)." if t["status"] == "open" else "The row holds no field.")
    for name, value in fields.items():
        st.caption(w.plain(f"{name} ← {sources[name]}" if sources.get(name) else name))
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
        st.code(text, language=None, wrap_lines=True)


def _spans(t: dict) -> None:
    st.markdown(f"**Spans** ({len(t['spans'])})")
    if not t["spans"]:
        st.text("No span received (log records only).")
        return
    lines = []
    for sp in t["spans"]:
        status = {0: "unset", 1: "ok", 2: "error"}.get(sp["status_code"], str(sp["status_code"]))
        if sp["status_message"]:
            status += f": {sp['status_message']}"
        lines.append(f"{sp['duration_ms']:>10.1f} ms  {status:<8}  {sp['name']}" + ("  (late)" if sp["late"] else ""))
    st.code("\n".join(lines), language=None)
