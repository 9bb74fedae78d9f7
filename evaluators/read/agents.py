"""An agent's run as people read it: a row's trace (turns, tool calls with their arguments and results, the calls a
judge found at fault) and each tool's success rate across a run.

A judge marks a call at fault by naming its id in its reply's ``properties.faulty_calls`` (our agent prompts ask
for it) or, failing that, in its reasoning. A call fails when its result reports an error
(:func:`evaluators.core.agent.failed`); a call no tool message answers counts in no rate.
"""
from __future__ import annotations

import re
from typing import Any

from evaluators.core.agent import is_agent_messages, parse_json_text, sdk_messages, split_log, tool_success, trace

LONG = 400  # characters past which a result is shown collapsed


def agent_parts(ds, i: int) -> tuple[Any, Any] | None:
    """(query, response) of an agent row, or None when the row holds no agent messages."""
    if ds.shape == "conversation":
        msgs = ds.messages(i)
        return split_log(msgs) if is_agent_messages(msgs) else None
    query, response = parse_json_text(ds.value(i, "query")), parse_json_text(ds.value(i, "response"))
    if is_agent_messages(response) or is_agent_messages(query):
        return query, sdk_messages(response)
    return None


def faults(res, i: int) -> dict[str, list[str]]:
    """Call id -> the judged metrics whose verdict on row ``i`` names it (failing verdicts only)."""
    out: dict[str, list[str]] = {}
    parts = agent_parts(res.dataset, i)
    if parts is None:
        return out
    ids = [c["id"] for s in trace(*parts) for c in s["calls"] if c["id"]]
    for spec in res.specs:
        if not spec.is_judge:
            continue
        cell = res.cell(spec.name, i)
        if cell is None or cell.status != "ok" or res.passed(spec, cell) is not False:
            continue
        named: set[str] = set()
        for t in cell.turns:
            props = (t.outputs or {}).get("_properties") or {}
            listed = props.get("faulty_calls") if isinstance(props, dict) else None
            if isinstance(listed, list):
                named |= {str(x) for x in listed}
        if not named and cell.reason:
            named = {c for c in ids if re.search(rf"(?<![\w-]){re.escape(str(c))}(?![\w-])", cell.reason)}
        for c in ids:
            if c in named:
                out.setdefault(c, []).append(spec.name)
    return out


def row_trace(res, i: int) -> list[dict] | None:
    """Row ``i``'s steps (:func:`evaluators.core.agent.trace`), each call with ``faulted_by`` (metric names) and
    ``long`` (its result is past :data:`LONG` characters); None for a row without agent messages."""
    parts = agent_parts(res.dataset, i)
    if parts is None:
        return None
    marked = faults(res, i)
    steps = trace(*parts)
    for s in steps:
        for c in s["calls"]:
            c["faulted_by"] = marked.get(c["id"], [])
            c["long"] = c["result"] is not None and len(c["result"]) > LONG
    return steps


def tool_rates(ds) -> list[dict]:
    """Per tool, across the dataset: calls made, calls answered, answered calls that succeeded and their share,
    most called first."""
    made: dict[str, int] = {}
    answered: dict[str, tuple[int, int]] = {}
    for i in range(len(ds)):
        parts = agent_parts(ds, i)
        if parts is None:
            continue
        calls = [c for s in trace(*parts) for c in s["calls"]]
        for c in calls:
            made[c["name"]] = made.get(c["name"], 0) + 1
        for name, (ok, n) in tool_success(calls).items():
            a, b = answered.get(name, (0, 0))
            answered[name] = (a + ok, b + n)
    rows = []
    for name, n in sorted(made.items(), key=lambda x: (-x[1], x[0])):
        ok, total = answered.get(name, (0, 0))
        rows.append({"tool": name, "calls": n, "answered": total, "succeeded": ok,
                     "success_rate": ok / total if total else None})
    return rows
