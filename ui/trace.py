"""The trace view, shared: an agent's turns, each tool call with its arguments and result in monospace, folding,
errors and the calls a judge found at fault marked, latency and tokens where the data has them. A Results row
(:func:`agent_trace`), the Results page's Trace tab (:func:`trace_tab`) and a monitored trace (:func:`spans_turns`,
then :func:`trace_view`) draw it; and the tools' success rates across a run. What the data or a model wrote is
shown as text only (``st.text``, ``st.code``, labels through :func:`ui.widgets.plain`).

A turn, as :func:`trace_view` takes it (every key but ``role`` optional):
    ``role`` ("user", "assistant", "system", "tool" or another word), ``text``, ``name`` (an agent's or a span's
    name), ``part`` ("query" or "response": the judged turn starts at the first "response"), ``calls``,
    ``tool_call_id`` (a tool turn: the call it answers), ``error`` (text), ``latency_ms``, ``input_tokens``,
    ``output_tokens``.
A call: ``name``, ``id``, ``arguments`` and ``result`` (text; ``result`` None: no answer), ``failed`` (True: its
result reports an error; None: unanswered), ``error`` (text), ``faulted_by`` (metric names), ``latency_ms``,
``input_tokens``, ``output_tokens``.
"""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from evaluators.read.agents import row_trace
from ui import loaders, state
from ui.widgets import count, plain

ROLES = ("user", "assistant", "system", "tool")
LONG = 400  # characters past which a result is folded (its first lines shown, the rest in a scrolling box)
BOX_PX = 260  # the height of a long result's box
FOLD_PAST = 6  # calls in a trace past which the calls that succeeded start folded


def cost_line(d: dict) -> str:
    """ "1,240 ms · 312 tokens (280 in, 32 out)" from what ``d`` has of it ("" when nothing)."""
    parts = []
    if d.get("latency_ms") is not None:
        ms = float(d["latency_ms"])
        parts.append(f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.1f} ms")
    i, o = d.get("input_tokens"), d.get("output_tokens")
    if i is not None or o is not None:
        split = ", ".join(x for x in (f"{i:,} in" if i is not None else "", f"{o:,} out" if o is not None else "")
                          if x)
        parts.append(f"{count((i or 0) + (o or 0), 'token')} ({split})")
    return " · ".join(parts)


def _status(c: dict) -> str:
    if c.get("error") or c.get("failed"):
        return "error result"
    return "no result" if c.get("failed") is None and c.get("result") is None else "succeeded"


def trace_view(turns: list[dict], fold: bool = True) -> None:
    """Draw ``turns`` (the module's docstring says their keys): a summary line, then each turn as a chat message
    and each of its calls under it. ``fold``: each call in an expander (open when it errored, was found at
    fault, or the trace is short); False where the view sits inside an expander already (Streamlit nests none)."""
    calls = [c for t in turns for c in t.get("calls", ())]
    answered = {c.get("id") for c in calls if c.get("result") is not None}
    shown = [t for t in turns if not (t.get("role") == "tool" and t.get("tool_call_id") in answered)]
    errored = sum(_status(c) == "error result" for c in calls) + sum(bool(t.get("error")) for t in turns)
    # tokens add up; latencies do not (a run's span holds its calls' time): each shows on its own line
    total = {k: sum(x[k] for x in [*turns, *calls] if x.get(k) is not None) for k in ("input_tokens", "output_tokens")
             if any(x.get(k) is not None for x in [*turns, *calls])}
    summary = [count(len(shown), "turn"), count(len(calls), "tool call")]
    if errored:
        summary.append(f"{errored:,} with an error")
    st.caption(" · ".join(summary + ([f"recorded: {cost_line(total)}"] if total else [])))
    judged_from = next((k for k, t in enumerate(turns) if t.get("part") == "response"), None)
    for k, t in enumerate(turns):
        if t.get("role") == "tool" and t.get("tool_call_id") in answered:
            continue  # its result is shown with its call
        role = t.get("role") if t.get("role") in ROLES else "user"
        with st.chat_message(role):  # a chat name is a label: only ours
            if k == judged_from and k > 0:
                st.caption("— the agent's turn (judged) starts here —")
            head = [x for x in (t.get("name"), None if t.get("role") in ROLES else f"role: {t.get('role')}",
                                cost_line(t)) if x]
            if head:
                st.caption(plain(" · ".join(map(str, head))))
            if t.get("error"):
                st.error(f"Error: {plain(t['error'])}", icon=":material/error:")
            if t.get("role") == "tool":
                st.caption(plain(f"Tool result for call {t.get('tool_call_id') or ''}"))
                _code(t.get("text") or "", "Result")
            elif t.get("text"):
                st.text(t["text"])
            for c in t.get("calls", ()):
                _call(c, fold, open_=len(calls) <= FOLD_PAST)


def _call(c: dict, fold: bool, open_: bool) -> None:
    status = _status(c)
    bad = status == "error result" or bool(c.get("faulted_by"))
    head = " · ".join(x for x in (str(c.get("name")), f"id {c.get('id')}", status, cost_line(c)) if x)
    if fold:
        box = st.expander(plain(head), expanded=open_ or bad, icon=":material/error:" if bad else ":material/build:")
    else:
        box = st.container(border=True)
        box.text(head)
    with box:
        if c.get("faulted_by"):
            st.error(f"Tool call · {status} · at fault for: {plain(', '.join(c['faulted_by']))}",
                     icon=":material/error:")
        elif status == "error result":
            st.error(f"Tool call · error result{': ' + plain(c['error']) if c.get('error') else ''}",
                     icon=":material/error:")
        st.caption("arguments")
        _code(c.get("arguments") or "", "Arguments")
        if c.get("result") is not None:
            st.caption("result")
            _code(c["result"], "Result")


def _code(text: str, label: str) -> None:
    """Data in monospace as written (JSON highlighted when it is JSON); a long text in a box of its own height
    that scrolls, its length said."""
    try:
        language = "json" if isinstance(json.loads(text), (dict, list)) else None
    except ValueError:
        language = None
    long = len(text) > LONG
    st.code(text, language=language, wrap_lines=True, height=BOX_PX if long else "content")
    if long:
        st.caption(f"{label}: all {len(text):,} characters (scroll the box)")


ERROR_STATUS = 2  # OTLP's STATUS_CODE_ERROR


def spans_turns(spans: list[dict], logs: list[dict] | None = None) -> list[dict]:
    """A monitored trace's spans (as the store keeps them: ``span_id``, ``name``, ``start_ns``, ``end_ns``,
    ``status_code``, ``status_message``, ``attributes``, ``events``) as :func:`trace_view`'s turns: the user's
    last message first, then each model call or agent run in start order (its answer, latency and tokens; an
    error status marked) with the tool calls it asked for, each tool span's arguments, result, latency and error
    put on the call it ran (by id; else on the turn before it). Spans of no GenAI kind are left out. ``logs``:
    the trace's log records, where content capture sends the messages."""
    from evaluators.core.agent import as_text, failed
    from evaluators.monitor import conventions as cv
    from evaluators.monitor.mapping import INPUT_TOKENS, OUTPUT_TOKENS

    def cost(span: dict) -> dict:
        a, out = span["attributes"], {"latency_ms": max(span["end_ns"] - span["start_ns"], 0) / 1e6}
        if cv.kind(span) == "agent":
            return out  # an agent run's tokens are its model calls' (shown on them), not more
        for name, keys in (("input_tokens", INPUT_TOKENS), ("output_tokens", OUTPUT_TOKENS)):
            value = next((a[k] for k in keys if isinstance(a.get(k), (int, float)) and not isinstance(a[k], bool)),
                         None)
            if value is not None:
                out[name] = int(value)
        return out

    def error(span: dict) -> str | None:
        return (span.get("status_message") or "error status") if span.get("status_code") == ERROR_STATUS else None

    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    asked = False
    for span in sorted(spans, key=lambda s: (s["start_ns"], s["end_ns"], s["span_id"])):
        kind = cv.kind(span)
        if kind == "tool":
            found = cv.tool_span_call(span) or {"name": span["name"]}
            call = by_id.get(found.get("id")) or {"name": found.get("name"), "id": found.get("id")}
            result = found.get("result")
            call.update(arguments=as_text(found["arguments"]) if "arguments" in found else call.get("arguments"),
                        result=None if result is None else as_text(result), error=error(span), **cost(span))
            call["failed"] = bool(call["error"]) or (failed(result) if result is not None else None)
            if call.get("id") not in by_id:
                if not turns:
                    turns.append({"role": "assistant", "name": span["name"], "calls": []})
                turns[-1].setdefault("calls", []).append(call)
            continue
        if not kind:
            continue
        ex = cv.exchange(span, [r for r in logs or () if r.get("span_id") == span["span_id"]])
        if not asked and (users := [m for m in ex.inputs or () if m["role"] == "user" and cv.text_of(m)]):
            asked = True  # the first span that records the user's message (often a model call in an agent's run)
            turns.insert(0, {"role": "user", "text": cv.text_of(users[-1])})
        out = [m for m in ex.outputs or () if m["role"] in ("assistant", "model")]
        calls = [{"name": p.get("name"), "id": p.get("id"), "arguments": as_text(p.get("arguments")),
                  "result": None, "failed": None} for m in out for p in m["parts"] if p.get("type") == "tool_call"]
        by_id.update({c["id"]: c for c in calls if c["id"]})
        turns.append({"role": "assistant", "name": span["name"], "text": "\n".join(cv.text_of(m) for m in out),
                      "calls": calls, "error": error(span), **cost(span)})
    return turns


def agent_trace(res, i: int, judged: bool = True, fold: bool = False) -> bool:
    """Draw row ``i``'s trace (the judge's faults marked unless ``judged`` is False: a blind review); False
    (nothing drawn) when the row holds no agent messages."""
    steps = row_trace(res, i)
    if steps is None:
        return False
    if not judged:
        for s in steps:
            for c in s["calls"]:
                c["faulted_by"] = []
    st.markdown("**Agent trace**")
    trace_view(steps, fold=fold)
    return True


def has_traces(run: dict) -> bool:
    """Whether the run has an agent metric (its rows are agents' messages): the Results page's Trace tab."""
    from evaluators.core.registry import get_metric

    def family(name: str) -> str | None:
        try:
            return get_metric(name).family
        except Exception:  # noqa: BLE001 — a metric no longer registered: not an agent one as far as we know
            return None

    return any(family(m) == "agents" for m in run["spec"]["metrics"])


def trace_tab(res) -> None:
    """The Results page's Trace tab: one row's trace, the row picked here or in the Rows tab (``row`` in the URL)."""
    n = len(res)
    row = min(max(state.read_row() or 0, 0), n - 1) if n else 0
    if not n:
        st.info("The run has no rows.")
        return
    c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
    # keyed by the row: another row chosen elsewhere (the Rows tab, the buttons) is the value shown
    picked = int(c1.number_input(f"Row (1–{n:,})", 1, n, row + 1, key=f"trace.row.{row}")) - 1
    c2.button("‹ Previous row", key="trace.prev", disabled=row <= 0, on_click=state.write_row, args=(row - 1,))
    c3.button("Next row ›", key="trace.next", disabled=row >= n - 1, on_click=state.write_row, args=(row + 1,))
    if picked != row:
        state.write_row(picked)
        row = picked
    st.subheader(f"Row {res.dataset.row_no(row)}", anchor=False)
    if not agent_trace(res, row, fold=True):
        st.info(f"Row {res.dataset.row_no(row)} holds no agent messages: nothing to trace.")


def tool_rates(run: dict, res) -> None:
    """Each tool's calls and success rate across the run (nothing when its rows made no tool call). Only for a
    run with an agent metric: finding tool calls reads every row's response, which a 100,000-row run of plain
    answers should not pay on each first open (it took minutes there)."""
    if not any(s.family == "agents" for s in res.specs):
        return
    rates = loaders.tool_rates(run["id"], res.dataset)
    if not rates:
        return
    st.markdown("#### Tool calls")
    st.caption("Per tool across the run's rows: a call succeeded when its result reports no error; calls no "
               "tool message answers count in no rate. The Trace tab shows each row's calls.")
    df = pd.DataFrame(rates).rename(columns={"tool": "Tool", "calls": "Calls", "answered": "Answered",
                                             "succeeded": "Succeeded", "success_rate": "Success rate"})
    st.dataframe(df, hide_index=True, column_config={
        "Success rate": st.column_config.ProgressColumn("Success rate", format="percent", min_value=0, max_value=1)})
