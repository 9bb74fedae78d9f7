"""One trace (its spans and log records) -> one row: the dataset's fields, and where each came from.

A trace of an LLM feature holds model calls (chat spans), maybe an agent run around them, tool executions
and retrievals. The row takes the user's query and the final answer (from the outermost agent run that
records them, else from the model calls), the conversation before it when there is one, the tool calls
with their results, the tools offered, the retrieved documents as ``context``, the model, the tokens
summed over the calls, the latency of the root span, the conversation id and the service. Each field
keeps the attribute and span it came from (``Mapped.sources``), as the dashboard shows it. The
conventions themselves are read by :mod:`evaluators.monitor.conventions`.

Instrumentations capture no content by default; such a trace still maps (model, tokens, latency...) with
``content`` False and a ``hint`` saying what to set in the app.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from evaluators.monitor import conventions as cv

GENAI_HINT = ("the app's GenAI instrumentation captured no prompts or answers (content capture is off by default): "
              "set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
              "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY in the app's environment (EVENT_ONLY sends "
              "the content as log events: then export the app's logs to /v1/logs as well); instrumentations on the "
              "earlier conventions take OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true and send log events")
OPENINFERENCE_HINT = ("OpenInference recorded no prompts or answers: unset OPENINFERENCE_HIDE_INPUTS, "
                      "OPENINFERENCE_HIDE_OUTPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES and "
                      "OPENINFERENCE_HIDE_OUTPUT_MESSAGES in the app's environment (or its TraceConfig)")
OPENLLMETRY_HINT = ("OpenLLMetry recorded no prompts or answers: set TRACELOOP_TRACE_CONTENT=true in the app's "
                    "environment (or traceContent in Traceloop.init)")
NO_GENAI_HINT = ("no span of this trace is a model call (no gen_ai.*, OpenInference or OpenLLMetry attributes): "
                 "instrument the app's model client, e.g. opentelemetry-instrumentation-openai-v2")
INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
MODEL = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
PROVIDER = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
# A conversation id longer than this groups nothing (the field keeps it; the key, which the store indexes, is None).
MAX_KEY = 256


@dataclass(frozen=True)
class Mapped:
    """One trace as a row.

    Attributes:
        fields: the dataset's fields found (``query``, ``response``, ``context``, ``conversation``,
            ``tool_calls``, ``tool_definitions``, ``retrieved_documents``, ``system_instructions``, ``model``,
            ``provider``, ``input_tokens``, ``output_tokens``, ``llm_calls``, ``latency_ms``,
            ``conversation_id``, ``user_id``, ``service_name``, ``service_version``, ``error``,
            ``error_message``); a field the trace does not give is absent (``error`` is always there).
        sources: field -> where it came from, e.g. "gen_ai.output.messages of span `chat gpt-4o`".
        content: whether a query or a response was captured (False: the trace is kept, counted "no content").
        hint: when not, what to set in the app so that it is.
        conversation_key: ``gen_ai.conversation.id`` or OpenInference's ``session.id`` as text, else None
            (None too past :data:`MAX_KEY` characters).
        genai: whether any span is a GenAI one (a model call, agent, tool, retrieval...) or a log record a
            GenAI event.
        spans: how many spans the trace had.
    """

    fields: dict
    sources: dict
    content: bool
    hint: str
    conversation_key: str | None
    genai: bool = True
    spans: int = 0


def _order(spans: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """Spans by start time, and each one's depth (0: a root, or a span whose parent is not in the trace)."""
    ordered = sorted(spans, key=lambda s: (s["start_ns"], s["end_ns"], s["span_id"]))
    parent = {s["span_id"]: s["parent_span_id"] for s in ordered}
    depth: dict[str, int] = {}
    for s in ordered:
        d, seen, p = 0, {s["span_id"]}, s["parent_span_id"]
        while p in parent and p not in seen and d < len(parent):
            seen.add(p)
            d, p = d + 1, parent[p]
        depth[s["span_id"]] = d
    return ordered, depth


def _logs_by_span(logs: list[dict], spans: list[dict], llm: list[dict]) -> dict[str, list[dict]]:
    """Log records by the span they name (a record naming no span of the trace goes to its one model call,
    when it has exactly one), each span's in time order."""
    ids = {s["span_id"] for s in spans}
    out: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(logs, key=lambda r: r["time_ns"]):
        if record["span_id"] in ids:
            out[record["span_id"]].append(record)
        elif len(llm) == 1:
            out[llm[0]["span_id"]].append(record)
    return out


def _first(spans: list[dict], keys: tuple[str, ...]):
    """(value, "key of span `name`") of the first span with one of ``keys``, or (None, "")."""
    for s in spans:
        for key in keys:
            value = s["attributes"].get(key)
            if value not in (None, ""):
                return value, f"{key} of {cv.span_label(s)}"
    return None, ""


def _last_user_text(messages: list) -> str | None:
    for m in reversed(messages or ()):
        if m["role"] == "user" and (text := cv.text_of(m)):
            return text
    return None


def _last_text(messages: list) -> str | None:
    for m in reversed(messages or ()):
        if m["role"] in ("assistant", "model") and (text := cv.text_of(m)):
            return text
    return None


class _Row:
    """The fields and their sources, filled step by step."""

    def __init__(self):
        self.fields: dict = {}
        self.sources: dict = {}

    def set(self, name: str, value, source: str) -> None:
        if value is not None and name not in self.fields:
            self.fields[name] = value
            self.sources[name] = source


def _query_response(row: _Row, agents: list, llm: list, exchanges: dict) -> None:
    """Query and response: the outermost agent run's when it records them, else the model calls' (the
    query the last user message of the latest call, the response the latest answer with text)."""
    for s in agents:
        ex = exchanges[s["span_id"]]
        row.set("query", _last_user_text(ex.inputs), ex.source_in)
        row.set("response", _last_text(ex.outputs), ex.source_out)
        row.set("system_instructions", ex.system, ex.source_system)
    for s in reversed(llm):
        ex = exchanges[s["span_id"]]
        row.set("query", _last_user_text(ex.inputs), ex.source_in)
        row.set("response", _last_text(ex.outputs), ex.source_out)
        row.set("system_instructions", ex.system, ex.source_system)


def _conversation(row: _Row, llm: list, exchanges: dict) -> None:
    """The latest model call's messages and its answer, as text messages, when they hold several turns."""
    for s in reversed(llm):
        ex = exchanges[s["span_id"]]
        if not ex.inputs:
            continue
        messages = [{"role": m["role"], "content": cv.text_of(m)} for m in ex.inputs
                    if m["role"] in ("system", "developer", "user", "assistant") and cv.text_of(m)]
        answer = _last_text(ex.outputs)
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
        if sum(m["role"] == "user" for m in messages) >= 2:
            row.set("conversation", messages, ex.source_in + (f" and {ex.source_out}" if answer is not None else ""))
        return


def _tool_calls(row: _Row, llm: list, tools: list, exchanges: dict) -> None:
    """The tool calls the model asked for (tool_call parts of its answers), each with its result (from a
    later call's tool message, or the execute_tool span that ran it), and tool runs no answer asked for."""
    calls: list[dict] = []
    by_id: dict = {}
    results: dict = {}
    sources: list[str] = []
    for s in llm:
        ex = exchanges[s["span_id"]]
        for m in ex.inputs or ():
            for p in m["parts"]:
                if p.get("type") == "tool_call_response" and p.get("id") is not None:
                    results.setdefault(p["id"], p.get("response"))
        asked = [p for m in ex.outputs or () for p in m["parts"] if p.get("type") == "tool_call"]
        for p in asked:
            call = {"type": "tool_call", "tool_call_id": p.get("id"), "name": p.get("name"), "arguments": p.get("arguments")}
            calls.append(call)
            if p.get("id") is not None:
                by_id[p["id"]] = call
        if asked:
            sources.append(f"tool_call parts of {ex.source_out}")
    for s in tools:
        run = cv.tool_span_call(s)
        if run is None:
            continue
        call = by_id.get(run["id"]) if run.get("id") is not None else next(
            (c for c in calls if c["name"] == run["name"] and "tool_result" not in c), None)
        if call is None:
            call = {"type": "tool_call", "tool_call_id": run.get("id"), "name": run["name"]}
            calls.append(call)
        if call.get("arguments") is None and "arguments" in run:
            call["arguments"] = run["arguments"]
        if "result" in run:
            call["tool_result"] = run["result"]
        sources.append(f"{cv.span_label(s)} ({'execute_tool' if 'gen_ai.tool.name' in s['attributes'] else 'TOOL'})")
    for call in calls:
        if "tool_result" not in call and call.get("tool_call_id") in results:
            call["tool_result"] = results[call["tool_call_id"]]
    if calls:
        row.set("tool_calls", calls, "; ".join(dict.fromkeys(sources)))


def _tool_definitions(row: _Row, spans: list) -> None:
    defs: dict = {}
    sources: list[str] = []
    for s in spans:
        found, source = cv.tool_definitions(s)
        new = [d for d in found if isinstance(d.get("name"), str) and d["name"] not in defs]
        for d in new:
            defs[d["name"]] = d
        if new:
            sources.append(source)
    if defs:
        row.set("tool_definitions", list(defs.values()), "; ".join(sources))


def _context(row: _Row, retrievals: list) -> None:
    docs: list[dict] = []
    sources: list[str] = []
    for s in retrievals:
        found, source = cv.documents(s)
        if found:
            docs += found
            sources.append(source)
    if docs:
        row.set("context", docs, "; ".join(sources))
        ranked = [{"document_id": str(d["id"]), "relevance_score": d["score"]} for d in docs
                  if d.get("id") is not None and isinstance(d.get("score"), (int, float)) and not isinstance(d["score"], bool)]
        if ranked:
            row.set("retrieved_documents", ranked, "; ".join(sources))


def _usage(row: _Row, llm: list, agents: list) -> None:
    for name, keys in (("input_tokens", INPUT_TOKENS), ("output_tokens", OUTPUT_TOKENS)):
        for group in (llm, agents):
            counted = [(s, next(k for k in keys if _count(s["attributes"].get(k))))
                       for s in group if any(_count(s["attributes"].get(k)) for k in keys)]
            if counted:
                total = sum(s["attributes"][k] for s, k in counted)
                where = cv.span_label(counted[0][0]) if len(counted) == 1 else f"{len(counted)} spans"
                row.set(name, total, f"{' + '.join(dict.fromkeys(k for _, k in counted))} of {where}")
                break


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _hint(spans: list, kinds: dict) -> str:
    attrs = [s["attributes"] for s in spans if kinds[s["span_id"]]]
    if any("openinference.span.kind" in a for a in attrs):
        return OPENINFERENCE_HINT
    if any(k.startswith(("traceloop.", "llm.request.type")) for a in attrs for k in a):
        return OPENLLMETRY_HINT
    return GENAI_HINT


def map_trace(spans: list[dict], logs: list[dict]) -> Mapped:
    """One trace as a row.

    Args:
        spans: the trace's spans, as :func:`evaluators.monitor.otlp.decode_traces` gives them.
        logs: its log records (GenAI events among them), as :func:`evaluators.monitor.otlp.decode_logs` gives them.

    Returns:
        The :class:`Mapped` row.
    """
    ordered, depth = _order(spans)
    kinds = {s["span_id"]: cv.kind(s) for s in ordered}
    of = lambda k: [s for s in ordered if kinds[s["span_id"]] == k]  # noqa: E731
    llm, tools, retrievals = of("llm"), of("tool"), of("retrieval")
    agents = sorted(of("agent"), key=lambda s: depth[s["span_id"]])
    by_span = _logs_by_span(logs, ordered, llm)
    exchanges = {s["span_id"]: cv.exchange(s, by_span.get(s["span_id"], [])) for s in llm + agents}
    row = _Row()
    _query_response(row, agents, llm, exchanges)
    _conversation(row, llm, exchanges)
    _tool_calls(row, llm, tools, exchanges)
    _tool_definitions(row, agents + llm)
    _context(row, retrievals)
    row.set(*("model", *_first(list(reversed(llm)) + agents, MODEL)))
    row.set(*("provider", *_first(llm + agents, PROVIDER)))
    _usage(row, llm, agents)
    if llm:
        row.set("llm_calls", len(llm), f"{len(llm)} model call span(s)")
    by_depth = sorted(ordered, key=lambda s: depth[s["span_id"]])
    key, key_source = _first(by_depth, ("gen_ai.conversation.id", "session.id"))
    if key is None:
        key, key_source = next(((r["attributes"]["gen_ai.conversation.id"], f"gen_ai.conversation.id of the "
                                 f"{r['event_name'] or 'log'} event") for r in logs
                                if isinstance(r["attributes"].get("gen_ai.conversation.id"), str)), (None, ""))
    key = cv.call_id(key)  # an id is text (or a number written as text); anything else is no id
    row.set("conversation_id", key, key_source)
    row.set(*("user_id", *_first(by_depth, ("enduser.id", "user.id"))))
    roots = [s for s in ordered if depth[s["span_id"]] == 0]
    if roots:
        start, end = min(s["start_ns"] for s in roots), max(s["end_ns"] for s in roots)
        row.set("latency_ms", round(max(end - start, 0) / 1e6, 3),
                f"{cv.span_label(roots[0])} (root)" if len(roots) == 1 else f"{len(roots)} root spans")
        resource = roots[0]["resource"]
        for name, key_ in (("service_name", "service.name"), ("service_version", "service.version")):
            if resource.get(key_) is not None:
                row.set(name, resource[key_], f"resource {key_} of {cv.span_label(roots[0])}")
    failed = [s for s in ordered if s["status_code"] == 2]
    row.set("error", bool(failed), f"status of {cv.span_label(failed[0])}" if failed else "no span has an error status")
    if failed:
        message = failed[0]["status_message"] or failed[0]["attributes"].get("error.type")
        row.set("error_message", message or None, f"status of {cv.span_label(failed[0])}")
    genai = any(kinds.values()) or any(r["event_name"].startswith("gen_ai.") for r in logs)
    content = any(n in row.fields for n in ("query", "response"))
    hint = "" if content else (_hint(ordered, kinds) if genai else NO_GENAI_HINT)
    return Mapped(fields=row.fields, sources=row.sources, content=content, hint=hint,
                  conversation_key=key if key is None or len(key) <= MAX_KEY else None, genai=genai,
                  spans=len(ordered))
