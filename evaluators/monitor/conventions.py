"""What each telemetry convention says a model call was given and answered, read into one message form.

The conventions read (the attribute names as each documents them):

- OpenTelemetry GenAI, current: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (messages of
  ``parts``) and ``gen_ai.system_instructions``, on a span or on its
  ``gen_ai.client.inference.operation.details`` log event; ``gen_ai.tool.definitions``; ``execute_tool``
  spans (``gen_ai.tool.*``); retrieval spans' ``gen_ai.retrieval.documents``.
- OpenTelemetry GenAI, earlier: ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice`` events (log records or span
  events), their content in the body.
- OpenLLMetry: ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` and ``llm.request.functions.N.*``.
- OpenInference: ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``, ``llm.tools``,
  ``input.value`` / ``output.value``, ``retrieval.documents.N.document.*``, TOOL spans.

Every reader returns messages as the current GenAI convention writes them: ``{"role", "parts": [...]}``
with parts ``{"type": "text", "content"}``, ``{"type": "tool_call", "id", "name", "arguments"}`` and
``{"type": "tool_call_response", "id", "response"}`` (other parts kept as given). Pure functions over the
plain spans and log records of :mod:`evaluators.monitor.otlp`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# an attribute given as JSON text (as conventions allow where a structured value is not supported) decoded: the
# engine's one rule for JSON text in a field
from evaluators.core.agent import parse_json_text as json_value

LLM_OPERATIONS = {"chat", "text_completion", "generate_content"}
AGENT_OPERATIONS = {"invoke_agent", "create_agent", "invoke_workflow"}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
LEGACY_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
CHOICE_EVENT = "gen_ai.choice"
REDACTED = "__REDACTED__"  # what OpenInference writes for content it was told to hide


@dataclass
class Exchange:
    """What one span's model call (or agent run) was given and answered, and where each came from."""

    inputs: list | None = None
    outputs: list | None = None
    system: str | None = None
    source_in: str = ""
    source_out: str = ""
    source_system: str = ""


def span_label(span: dict) -> str:
    return f"span `{span.get('name', '')}`"


def kind(span: dict) -> str:
    """What a span is: "llm", "agent", "tool", "retrieval", "embeddings", "genai" (another GenAI span) or ""."""
    a = span["attributes"]
    op = _text(a.get("gen_ai.operation.name"))
    oi = _text(a.get("openinference.span.kind")).upper()
    if op in LLM_OPERATIONS or oi == "LLM" or a.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if op in AGENT_OPERATIONS or oi == "AGENT":
        return "agent"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op == "retrieval" or oi == "RETRIEVER" or any(k.startswith("retrieval.documents.") for k in a):
        return "retrieval"
    if op == "embeddings" or oi == "EMBEDDING":
        return "embeddings"
    if op or oi:
        return "genai"
    if any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in a) or "gen_ai.request.model" in a:
        return "llm"
    return ""


# --- message parts ---------------------------------------------------------------------------------------


def _text(v: Any) -> str:
    """A value that should be text, as text ("" when it is not: an app may send anything)."""
    return v if isinstance(v, str) else ""


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def call_id(v: Any) -> str | None:
    """A tool call's id as text (ids are matched across messages and spans), None when it has none."""
    return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None


def text_of(message: dict) -> str:
    """A message's text: its text parts joined."""
    return "".join(p.get("content", "") for p in message.get("parts", ())
                   if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str))


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw


def genai_messages(value: Any) -> list | None:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON text or structured) as messages, or None."""
    value = json_value(value)
    if not isinstance(value, list):
        return None
    out = []
    for m in value:
        if isinstance(m, dict) and isinstance(m.get("role"), str):
            parts = [_genai_part(p) for p in _list(m.get("parts")) if isinstance(p, dict)]
            msg = {"role": m["role"], "parts": parts}
            if m.get("finish_reason"):
                msg["finish_reason"] = m["finish_reason"]
            out.append(msg)
    return out


def _genai_part(p: dict) -> dict:
    if p.get("type") == "tool_call":
        return {"type": "tool_call", "id": call_id(p.get("id")), "name": p.get("name"),
                "arguments": _arguments(p.get("arguments"))}
    if p.get("type") == "tool_call_response":
        return {**p, "id": call_id(p.get("id"))}
    return dict(p)


def system_text(value: Any) -> str | None:
    """``gen_ai.system_instructions`` (parts, JSON text or plain text) as text."""
    value = json_value(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return text_of({"parts": value}) or None
    return None


def openai_message(m: dict, role: str | None = None) -> dict:
    """An OpenAI chat message (content text or parts, ``tool_calls``, ``tool_call_id``) as a message."""
    role = _text(m.get("role")) or role or "user"
    parts: list = []
    content = m.get("content")
    if role == "tool" and content is not None:
        parts.append({"type": "tool_call_response", "id": call_id(m.get("tool_call_id", m.get("id"))),
                      "response": content})
    elif isinstance(content, str) and content and content != REDACTED:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts += [{"type": "text", "content": c["text"]} for c in content
                  if isinstance(c, dict) and isinstance(c.get("text"), str)]
    for call in _list(m.get("tool_calls")):
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            parts.append({"type": "tool_call", "id": call_id(call.get("id")), "name": fn.get("name", call.get("name")),
                          "arguments": _arguments(fn.get("arguments", call.get("arguments")))})
    msg = {"role": role, "parts": parts}
    if m.get("finish_reason"):
        msg["finish_reason"] = m["finish_reason"]
    return msg


# --- indexed attributes (OpenInference, OpenLLMetry) -------------------------------------------------------


def indexed(attributes: dict, prefix: str) -> list[dict]:
    """``prefix.N.rest`` attributes as a list (by N) of ``{rest: value}``."""
    found: dict[int, dict] = {}
    start = prefix + "."
    for key, value in attributes.items():
        if key.startswith(start):
            index, _, rest = key[len(start):].partition(".")
            if index.isdigit() and rest:
                found.setdefault(int(index), {})[rest] = value
    return [found[i] for i in sorted(found)]


def _oi_message(d: dict) -> dict:
    """An OpenInference ``message.*`` group as an OpenAI message, then a message."""
    contents = [{"text": c.get("message_content.text")} for c in indexed(d, "message.contents")
                if c.get("message_content.type", "text") == "text"]
    calls = [{"id": c.get("tool_call.id"), "function": {"name": c.get("tool_call.function.name"),
                                                        "arguments": c.get("tool_call.function.arguments")}}
             for c in indexed(d, "message.tool_calls")]
    return openai_message({"role": d.get("message.role"), "content": d.get("message.content", contents or None),
                           "tool_calls": calls, "tool_call_id": d.get("message.tool_call_id")})


def _openllmetry_message(d: dict) -> dict:
    calls = [{"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
             for c in indexed(d, "tool_calls")]
    return openai_message({"role": d.get("role"), "content": d.get("content"), "tool_calls": calls,
                           "tool_call_id": d.get("tool_call_id"), "finish_reason": d.get("finish_reason")},
                          role="assistant")


# --- one span's exchange ----------------------------------------------------------------------------------


def _from_genai(a: dict, where: str, ex: Exchange) -> None:
    if ex.inputs is None and (inputs := genai_messages(a.get("gen_ai.input.messages"))) is not None:
        ex.inputs, ex.source_in = inputs, f"gen_ai.input.messages of {where}"
    if ex.outputs is None and (outputs := genai_messages(a.get("gen_ai.output.messages"))) is not None:
        ex.outputs, ex.source_out = outputs, f"gen_ai.output.messages of {where}"
    if ex.system is None and (system := system_text(a.get("gen_ai.system_instructions"))):
        ex.system, ex.source_system = system, f"gen_ai.system_instructions of {where}"


def _from_legacy_events(events: list[dict], where: str, ex: Exchange) -> None:
    """The earlier conventions' per-message events (each ``{"name", "body"}``), in order."""
    inputs, outputs, names = [], [], set()
    for e in events:
        body = e["body"] if isinstance(e["body"], dict) else {}
        if e["name"] in LEGACY_ROLES:
            inputs.append(openai_message(body, LEGACY_ROLES[e["name"]]) if LEGACY_ROLES[e["name"]] != "tool"
                          else openai_message({**body, "role": "tool"}))
            names.add(e["name"])
        elif e["name"] == CHOICE_EVENT:
            message = body.get("message") if isinstance(body.get("message"), dict) else {}
            outputs.append(openai_message({**message, "finish_reason": body.get("finish_reason")}, "assistant"))
    if inputs and ex.inputs is None:
        ex.inputs, ex.source_in = inputs, f"{', '.join(sorted(names))} events of {where}"
    if outputs and ex.outputs is None:
        ex.outputs, ex.source_out = outputs, f"{CHOICE_EVENT} events of {where}"


def exchange(span: dict, logs: list[dict]) -> Exchange:
    """What ``span`` (a model call or an agent run) was given and answered, by the first convention that
    says it: span attributes, then its log events and span events, then OpenInference's and OpenLLMetry's
    attributes. ``logs`` are the log records that name this span."""
    a = span["attributes"]
    where = span_label(span)
    ex = Exchange()
    _from_genai(a, where, ex)
    for record in logs:
        if record["event_name"] == DETAILS_EVENT:
            _from_genai(record["attributes"], f"the {DETAILS_EVENT} event of {where}", ex)
    legacy = [{"name": r["event_name"], "body": r["body"]} for r in logs]
    legacy += [{"name": e["name"], "body": e["attributes"]} for e in span["events"]]
    _from_legacy_events(legacy, where, ex)
    if ex.inputs is None and (groups := indexed(a, "llm.input_messages")):
        ex.inputs, ex.source_in = [_oi_message(d) for d in groups], f"llm.input_messages of {where}"
    if ex.outputs is None and (groups := indexed(a, "llm.output_messages")):
        ex.outputs, ex.source_out = [_oi_message(d) for d in groups], f"llm.output_messages of {where}"
    if ex.inputs is None and (groups := indexed(a, "gen_ai.prompt")):
        ex.inputs, ex.source_in = [_openllmetry_message(d) for d in groups], f"gen_ai.prompt of {where}"
    if ex.outputs is None and (groups := indexed(a, "gen_ai.completion")):
        ex.outputs, ex.source_out = [_openllmetry_message(d) for d in groups], f"gen_ai.completion of {where}"
    if ex.inputs is None and (text := _plain(a, "input")) is not None:
        ex.inputs, ex.source_in = [{"role": "user", "parts": [{"type": "text", "content": text}]}], f"input.value of {where}"
    if ex.outputs is None and (text := _plain(a, "output")) is not None:
        ex.outputs, ex.source_out = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}], \
            f"output.value of {where}"
    if ex.system is None and ex.inputs:
        system = "\n".join(text_of(m) for m in ex.inputs if m["role"] in ("system", "developer") and text_of(m))
        if system:
            ex.system, ex.source_system = system, ex.source_in
    return ex


def _plain(a: dict, which: str) -> str | None:
    """OpenInference's ``input.value`` / ``output.value`` when it is the text itself (not the request's
    JSON, whose messages ``llm.input_messages`` already gives)."""
    value = a.get(f"{which}.value")
    if not isinstance(value, str) or not value or value == REDACTED:
        return None
    if a.get(f"{which}.mime_type") == "application/json" or json_value(value) is not value:
        return None
    return value


# --- tools, definitions, documents -------------------------------------------------------------------------


def tool_span_call(span: dict) -> dict | None:
    """An ``execute_tool`` (or OpenInference TOOL) span as a tool call ``{"id", "name", "arguments",
    "result"}`` (the keys it has)."""
    a = span["attributes"]
    name = a.get("gen_ai.tool.name", a.get("tool.name"))
    if not isinstance(name, str):
        return None
    call = {"id": call_id(a.get("gen_ai.tool.call.id", a.get("tool_call.id"))), "name": name}
    arguments = a.get("gen_ai.tool.call.arguments", a.get("tool.parameters", a.get("input.value")))
    if arguments is not None and arguments != REDACTED:
        call["arguments"] = _arguments(arguments)
    result = a.get("gen_ai.tool.call.result", a.get("output.value"))
    if result is not None and result != REDACTED:
        call["result"] = json_value(result)
    return call


def tool_definitions(span: dict) -> tuple[list[dict], str]:
    """The tools a span says the model was offered, as ``{"name", "description", "parameters"}``."""
    a = span["attributes"]
    where = span_label(span)
    defs = json_value(a.get("gen_ai.tool.definitions"))
    if isinstance(defs, list):
        return [_definition(d) for d in defs if isinstance(d, dict)], f"gen_ai.tool.definitions of {where}"
    if groups := indexed(a, "llm.tools"):
        schemas = [json_value(g.get("tool.json_schema")) for g in groups]
        return [_definition(s) for s in schemas if isinstance(s, dict)], f"llm.tools of {where}"
    if groups := indexed(a, "llm.request.functions"):
        return [_definition({**g, "parameters": json_value(g.get("parameters"))}) for g in groups], \
            f"llm.request.functions of {where}"
    return [], ""


def _definition(d: dict) -> dict:
    fn = d.get("function") if isinstance(d.get("function"), dict) else d
    out = {"name": fn.get("name")}
    for key in ("description", "parameters"):
        if fn.get(key) is not None:
            out[key] = fn[key]
    return out


def documents(span: dict) -> tuple[list[dict], str]:
    """A retrieval span's documents as ``{"id", "content", "score"}`` (the keys each has)."""
    a = span["attributes"]
    where = span_label(span)
    docs = json_value(a.get("gen_ai.retrieval.documents"))
    if isinstance(docs, list):
        return [_document(d) for d in docs if isinstance(d, dict)], f"gen_ai.retrieval.documents of {where}"
    if groups := indexed(a, "retrieval.documents"):
        return [_document({k.removeprefix("document."): v for k, v in g.items()}) for g in groups], \
            f"retrieval.documents of {where}"
    return [], ""


def _document(d: dict) -> dict:
    out = {}
    for key in ("id", "title", "content", "score"):
        value = d.get(key, d.get("text") if key == "content" else None)
        if value is not None and value != REDACTED:
            out[key] = value
    if d.get("metadata") is not None:
        out["metadata"] = json_value(d["metadata"])
    return out
