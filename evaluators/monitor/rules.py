"""Judging production traces by rules (``python -m evaluators monitor rule``).

Sampling is a pure function of the trace id: a trace is sampled by a rule when :func:`sample_point` of its id
falls under the rule's rate. Every rule of every project uses the same point, so two rules at 10% judge the same
traces (their scores compare row by row) and a rule at 20% judges a superset of one at 10%.

Each mapped trace gets a decision per rule version (:mod:`evaluators.store.monitor_rules`): ``sampled_out``,
``no_content`` (sampled, but the app captured no content to judge), ``pending``; judging then makes it
``judged`` (its scores in the engine's run and row) or ``failed`` (the error). Judging goes through the engine
that exists (the judge client, its cache, retries and rate limits), handed in from above as ``engine``.
"""
from __future__ import annotations

import hashlib
from typing import Any

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
    store.add_first_decisions(project, rule["name"], rule["version"], out)  # (one decided at once elsewhere stays)
    return len(out)


def judge_pending(store, project: str, rule: dict[str, Any], engine) -> dict[str, int]:
    """Judge the rule version's pending traces through the engine, in claimed batches (:mod:`evaluators.monitor.claims`:
    processes sharing the store never judge a trace twice, and a batch whose worker died is resumed).

    Args:
        engine: ``prepare(rows, rule) -> run id`` and ``run(run_id, rule)``; the caller's (api is a layer above).
    Returns:
        {"judged": n, "failed": m}
    """
    from evaluators.monitor.claims import judge_claimed

    return judge_claimed(store, project, rule, engine)
