"""Agents' and ranked retrieval's inputs, checked row by row as the SDK 1.18 takes them.

``query`` and ``response`` as agent messages (the SDK's parts, or an OpenAI log's ``tool_calls`` and ``tool``
messages: :mod:`evaluators.core.agent`), ``tool_definitions`` (the tools' JSON schemas: ``{"name",
"description", "parameters"}``, or OpenAI's ``{"type": "function", "function": {...}}``), ``tool_calls``,
``retrieval_ground_truth`` and ``retrieved_documents``. Each problem names the row, the column and, inside a
list, the item.
"""
from __future__ import annotations

from typing import Any

from evaluators.core.agent import check_messages, is_agent_messages, parse_json_text, tool_calls

AGENT_FIELDS = ("tool_definitions", "tool_calls", "retrieval_ground_truth", "retrieved_documents")


def fits(fld: str, v: Any) -> bool:
    """Whether a value can feed one of :data:`AGENT_FIELDS` (lists, or JSON text of one)."""
    v = parse_json_text(v)
    return isinstance(v, list) or (fld == "tool_definitions" and isinstance(v, dict))


def check_field(fld: str, v: Any, problems, row: int, col: str) -> Any:
    """Check one of :data:`AGENT_FIELDS`; returns the value decoded from JSON text (when it was text)."""
    v = parse_json_text(v)
    if fld == "tool_definitions":
        defs = [v] if isinstance(v, dict) else v
        if not isinstance(defs, list):
            problems.add(row, col, f"tool_definitions must be a list of tool schemas, got {type(v).__name__}")
            return v
        for k, d in enumerate(defs):
            fn = d.get("function", d) if isinstance(d, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                problems.add(row, col, f"tool_definitions[{k}] needs a 'name' (text)")
                break
        return v
    if not isinstance(v, list):
        problems.add(row, col, f"{fld} must be a list, got {type(v).__name__}")
        return v
    need = {"retrieval_ground_truth": ("document_id", "query_relevance_label"),
            "retrieved_documents": ("document_id", "relevance_score")}.get(fld)
    for k, item in enumerate(v):
        if need and not (isinstance(item, dict) and all(item.get(n) is not None for n in need)):
            problems.add(row, col, f"{fld}[{k}] needs {' and '.join(need)}")
            break
        if fld == "retrieval_ground_truth" and not _whole(item["query_relevance_label"]):
            problems.add(row, col, f"{fld}[{k}].query_relevance_label must be a whole number, "
                                   f"got {item['query_relevance_label']!r}")
            break
        if fld == "retrieved_documents" and not _number(item["relevance_score"]):
            problems.add(row, col, f"{fld}[{k}].relevance_score must be a number, got {item['relevance_score']!r}")
            break
        if fld == "tool_calls" and not (isinstance(item, dict) and isinstance(item.get("name", (item.get("function")
                                                                                            or {}).get("name")), str)):
            problems.add(row, col, f"tool_calls[{k}] needs a 'name' (text)")
            break
    return v


def check_agent_messages(fld: str, v: list, problems, row: int, col: str) -> list:
    """A query or response given as agent messages: every problem, each message by its index."""
    for p in check_messages(v, f"{fld}"):
        problems.add(row, col, p)
    return v


def is_agent_value(v: Any) -> bool:
    return is_agent_messages(parse_json_text(v))


def has_tool_calls(v: Any) -> bool:
    """Whether a response (or a conversation's messages) holds at least one tool call."""
    v = parse_json_text(v)
    return isinstance(v, list) and bool(tool_calls(v))


def _whole(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
