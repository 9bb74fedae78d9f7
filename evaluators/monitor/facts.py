"""What a trace carries, as rules' filters read it (``monitor rule add --filter``): one small dict a trace, computed
when the trace is mapped and stored with it (``monitor_traces.facts``).

The row's own figures (model, provider, tokens, latency, service, error, conversation and user ids, model calls)
are taken from the mapped fields (:func:`evaluators.monitor.mapping.map_trace`: one reading of the conventions);
the spans add what the row does not keep: every model named, the spans' names, their scalar attributes (and the
resource's), the cost the app reported, and a user-feedback score where the app sent one.

Attributes are facts, not content: the conventions' content attributes (messages, prompts, documents...) are left
out, and so is any value over ``MAX_VALUE`` characters; at most ``MAX_ATTRIBUTES`` are kept, the root span's first.
"""
from __future__ import annotations

from typing import Any

from evaluators.monitor.mapping import MODEL

# Taken from the mapped row as they are.
ROW_FACTS = ("model", "provider", "input_tokens", "output_tokens", "latency_ms", "service_name", "error",
             "error_message", "conversation_id", "user_id", "llm_calls")
# What the app reported its calls cost (USD), summed over the spans that carry it: Langfuse's and OpenInference's.
COST_KEYS = ("gen_ai.usage.cost", "llm.cost.total")
# A user's feedback on the answer, on any span, span event or log record of the trace (the last one sent counts):
# a number, or true / false (1 / 0). No convention names it yet; these are the names apps use.
FEEDBACK_KEYS = ("user_feedback.score", "feedback.score", "user.feedback", "feedback")
# Attributes that hold what was said (messages, prompts, answers, documents, tool arguments): never facts.
CONTENT_PREFIXES = ("gen_ai.input.", "gen_ai.output.", "gen_ai.prompt", "gen_ai.completion", "gen_ai.system_instructions",
                    "gen_ai.tool.definitions", "gen_ai.tool.call.", "input.", "output.", "llm.input_messages",
                    "llm.output_messages", "llm.prompts", "llm.prompt_template", "llm.tools", "retrieval.documents",
                    "tool.parameters", "tool_call.", "traceloop.entity.input", "traceloop.entity.output",
                    "gen_ai.retrieval.", "embedding.", "reranker.")
MAX_VALUE = 256  # characters of an attribute kept as a fact
MAX_ATTRIBUTES = 256
MAX_SPAN_NAMES = 200


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    return float(v) if isinstance(v, (int, float)) else None


def _feedback(v) -> float | None:
    return float(v) if isinstance(v, bool) else _number(v)


def _attributes(spans: list[dict]) -> dict[str, Any]:
    """The spans' (root first) and their resources' scalar attributes that are not content."""
    out: dict[str, Any] = {}
    for holder in [s["attributes"] for s in spans] + [s.get("resource") or {} for s in spans]:
        for k, v in holder.items():
            if len(out) >= MAX_ATTRIBUTES:
                return out
            if k in out or len(k) > MAX_VALUE or k.startswith(CONTENT_PREFIXES) or k in FEEDBACK_KEYS:
                continue
            if isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= MAX_VALUE):
                out[k] = v
    return out


def trace_facts(spans: list[dict], logs: list[dict], fields: dict) -> dict[str, Any] | None:
    """A trace's facts, or None when its spans cannot be read for them (a filter then sees no value).

    Args:
        spans: its spans as received (normalized by :mod:`evaluators.monitor.otlp`).
        logs: its log records.
        fields: its mapped row's fields (empty when it could not be mapped).
    Returns:
        model, provider, input_tokens, output_tokens, tokens, latency_ms, service_name, error, error_message,
        conversation_id, user_id, llm_calls (from the row; None where it has none), models, span_names,
        span_count, attributes, cost (USD the app reported, or None) and feedback (or None).
    """
    try:
        return _facts(spans, logs, fields)
    except Exception:  # noqa: BLE001 — a trace the mapping kept must be stored, not retried for ever
        return None


def _facts(spans: list[dict], logs: list[dict], fields: dict) -> dict[str, Any]:
    roots = [s for s in spans if not s.get("parent_span_id")]
    ordered = roots + [s for s in spans if s.get("parent_span_id")]
    facts: dict[str, Any] = {k: fields.get(k) for k in ROW_FACTS}
    facts["error"] = bool(fields.get("error")) or any(s.get("status_code") == 2 for s in spans)
    if facts["service_name"] is None:
        facts["service_name"] = next((s["resource"]["service.name"] for s in ordered
                                      if isinstance((s.get("resource") or {}).get("service.name"), str)), None)
    tin, tout = _number(fields.get("input_tokens")), _number(fields.get("output_tokens"))
    facts["tokens"] = None if tin is None and tout is None else int((tin or 0) + (tout or 0))
    facts["models"] = sorted({s["attributes"][k] for s in spans for k in MODEL
                              if isinstance(s["attributes"].get(k), str)})
    facts["span_names"] = sorted({s.get("name") or "" for s in spans})[:MAX_SPAN_NAMES]
    facts["span_count"] = len(spans)
    facts["attributes"] = _attributes(ordered)
    costs = [next(c for c in (_number(s["attributes"].get(k)) for k in COST_KEYS) if c is not None) for s in spans
             if any(_number(s["attributes"].get(k)) is not None for k in COST_KEYS)]
    facts["cost"] = sum(costs) if costs else None
    said = [(s.get("end_ns") or 0, s["attributes"]) for s in spans]
    said += [(e.get("time_ns") or 0, e.get("attributes") or {}) for s in spans for e in s.get("events") or []]
    said += [(r.get("time_ns") or 0, r.get("attributes") or {}) for r in logs]
    scores = [(t, f) for t, a in said for f in [next((_feedback(a[k]) for k in FEEDBACK_KEYS if k in a), None)]
              if f is not None]
    facts["feedback"] = max(scores, key=lambda x: x[0])[1] if scores else None
    return facts
