"""Judging production traces by rules (``python -m evaluators monitor rule``).

Sampling is a pure function of the trace id: a trace is sampled by a rule when :func:`sample_point` of its id
falls under the rule's rate. Every rule of every project uses the same point, so two rules at 10% judge the same
traces (their scores compare row by row) and a rule at 20% judges a superset of one at 10%.

Each mapped trace gets a decision per rule version (:mod:`evaluators.store.monitor_rules`): ``sampled_out``,
``no_content`` (sampled, but the app captured no content to judge), ``pending``; judging then makes it
``judged`` (its scores in the engine's run and row) or ``failed`` (the error). Judging goes through the engine
that exists (the judge client, its cache, retries and rate limits), handed in from above as ``judge_rows``.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable

# The fields of a mapped trace a judge may read (the dataset's canonical names), passed to the engine as a row.
ROW_FIELDS = ("query", "response", "context", "conversation", "tool_calls", "tool_definitions", "ground_truth")


def sample_point(trace_id: str) -> float:
    """Where a trace falls in [0, 1): SHA-256 of its hex id, so ids that are not random (a counter) spread too."""
    return int.from_bytes(hashlib.sha256(trace_id.lower().encode()).digest()[:8], "big") / 2**64


def decide(store, project: str, rule: dict[str, Any]) -> int:
    """Give every mapped trace this rule version has not decided its first decision. Returns how many."""
    out = []
    for t in store.undecided_traces(project, rule["name"], rule["version"]):
        if sample_point(t["trace_id"]) >= rule["sample_rate"]:
            decision = "sampled_out"
        elif t["content"] is False or not (t["fields"] or {}).get("response"):
            decision = "no_content"
        else:
            decision = "pending"
        out.append({"trace_id": t["trace_id"], "decision": decision})
    store.save_decisions(project, rule["name"], rule["version"], out)
    return len(out)


def judge_pending(store, project: str, rule: dict[str, Any],
                  judge_rows: Callable[[list[dict], dict], tuple[str, dict[int, str | None]]]) -> dict[str, int]:
    """Judge the rule version's pending traces as one run of the engine.

    Args:
        judge_rows: (rows, rule) -> (the run's id, row index -> its error or None); the caller runs the engine.
    Returns:
        {"judged": n, "failed": m}
    """
    pending = store.pending_traces(project, rule["name"], rule["version"])
    if not pending:
        return {"judged": 0, "failed": 0}
    rows = [{k: t["fields"][k] for k in ROW_FIELDS if (t["fields"] or {}).get(k) not in (None, "", [])}
            for t in pending]
    try:
        run_id, errors = judge_rows(rows, rule)
    except Exception as e:  # noqa: BLE001 — the run could not start (a judge refused, a metric the rows lack)
        store.save_decisions(project, rule["name"], rule["version"],
                             [{"trace_id": t["trace_id"], "decision": "failed", "error": str(e)} for t in pending])
        return {"judged": 0, "failed": len(pending)}
    out = [{"trace_id": t["trace_id"], "decision": "failed" if errors.get(i) else "judged", "error": errors.get(i),
            "run_id": run_id, "row_idx": i} for i, t in enumerate(pending)]
    store.save_decisions(project, rule["name"], rule["version"], out)
    return {"judged": sum(x["decision"] == "judged" for x in out), "failed": sum(x["decision"] == "failed" for x in out)}
