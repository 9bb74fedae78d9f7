"""An agent row's trace (its turns, each tool call with its arguments and result, the calls a judge found at
fault) and the tools' success rates across a run. What the data or a model wrote is shown as text only."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.read.agents import row_trace
from ui import loaders

ROLES = ("user", "assistant", "system", "tool")


def agent_trace(res, i: int, judged: bool = True) -> bool:
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
    shown_calls = {c["id"] for s in steps for c in s["calls"] if c["result"] is not None}
    for k, s in enumerate(steps):
        if s["role"] == "tool" and s.get("tool_call_id") in shown_calls:
            continue  # its result is shown with its call
        role = s["role"] if s["role"] in ROLES else "user"
        with st.chat_message(role):
            if s["role"] not in ROLES:
                st.caption("other role")
            if s["part"] == "response" and (k == 0 or steps[k - 1]["part"] == "query"):
                st.caption("— the agent's turn (judged) starts here —")
            if s["role"] == "tool":
                st.caption("Tool result for call")
                st.text(s.get("tool_call_id") or "")
                _long_text(s["text"], "Tool result")
            elif s["text"]:
                st.text(s["text"])
            for c in s["calls"]:
                _call(c)
    return True


def _call(c: dict) -> None:
    status = "no result" if c["failed"] is None else ("error result" if c["failed"] else "succeeded")
    head = f"Tool call · {status}"
    if c["faulted_by"]:
        st.error(f"{head} · at fault for: {', '.join(c['faulted_by'])}")  # ours: metric names and words
    elif c["failed"]:
        st.warning(head)
    else:
        st.caption(head)
    st.text(f"{c['name']}  (id {c['id']})")
    st.text(f"arguments: {c['arguments']}")
    if c["result"] is not None:
        st.caption("result")
        _long_text(c["result"], "Result")


def _long_text(text: str, label: str) -> None:
    if len(text) > 400:
        st.text(text[:200] + " …")
        with st.expander(f"{label}: all {len(text):,} characters", expanded=False):
            st.text(text)
    else:
        st.text(text)


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
               "tool message answers count in no rate.")
    df = pd.DataFrame(rates).rename(columns={"tool": "Tool", "calls": "Calls", "answered": "Answered",
                                             "succeeded": "Succeeded", "success_rate": "Success rate"})
    st.dataframe(df, hide_index=True, column_config={
        "Success rate": st.column_config.ProgressColumn("Success rate", format="percent", min_value=0, max_value=1)})
