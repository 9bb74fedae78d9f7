"""Shared by the two WildBench metrics: planning a row's judge inputs (their replies are parsed by their kinds).

Inputs are filled as WildBench fills its own templates (``evaluators.core.wb_rules``): earlier turns as
``USER:`` / ``ASSISTANT:`` blocks, the last user turn as the query, one ``- item`` line per checklist
item, each response cut to 1,000 words with a truncation marker and an empty one shown as an explicit
marker. The facts stored with each verdict (lengths, empty or truncated, task groups, model names)
feed the leaderboard aggregates.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaluators.core.tasks import RowTask
from evaluators.core.wb_rules import (checklist_text, conversation_of, is_excluded, model_name, shorten,
                                      shown_response, tags_of)

if TYPE_CHECKING:
    from evaluators.data.dataset import Dataset
    from evaluators.core.registry import MetricSpec

NO_QUERY = "no user request: give messages, conversation_input, or history with user_query"


def _inputs(ds: "Dataset", i: int) -> tuple[dict, dict[str, Any], str | None]:
    rec, canon = ds.records[i], ds.canonical(i)
    history, query = conversation_of(rec, canon.get("query"))
    values = {"history": history, "query": query, "checklist": checklist_text(canon.get("checklist"))}
    return rec, values, canon.get("response")


def score_row_tasks(ds: "Dataset", i: int, spec: "MetricSpec") -> list:
    """One task: the row's response judged alone (turn 0)."""
    rec, values, response = _inputs(ds, i)
    shown = shorten(response or "")
    facts = {"model": _name(rec.get("model") or rec.get("model_test")), "length": len(shown),
             "excluded": is_excluded(shown), "groups": tags_of(rec)}
    if values["query"] is None:
        return [RowTask(0, values, "single", skip=NO_QUERY)]
    return [RowTask(0, {**values, "response": shown}, "single", facts=facts)]


def pairwise_row_tasks(ds: "Dataset", i: int, spec: "MetricSpec") -> list:
    """Turn 0 shows candidate_A as A; with the ``both_orders`` param, turn 1 shows the pair swapped."""
    rec, values, a = _inputs(ds, i)
    b = rec.get("candidate_B")
    shown_a, shown_b = shown_response(a), shown_response(b if isinstance(b, str) else None)
    facts = {"model_A": _name(rec.get("model_A")) or "A", "model_B": _name(rec.get("model_B")) or "B",
             "len_A": len(shown_a), "len_B": len(shown_b),
             "excluded": is_excluded(shown_a) or is_excluded(shown_b), "groups": tags_of(rec)}
    if values["query"] is None or not isinstance(b, str):
        why = NO_QUERY if values["query"] is None else "no candidate_B (text) to compare with"
        return [RowTask(0, values, "single", skip=why)]
    tasks = [RowTask(0, {**values, "candidate_A": shown_a, "candidate_B": shown_b}, "single", facts=facts)]
    if dict(spec.params).get("both_orders"):
        tasks.append(RowTask(1, {**values, "candidate_A": shown_b, "candidate_B": shown_a}, "single", facts=facts))
    return tasks


def _name(v: Any) -> str | None:
    return model_name(v) if v else None


