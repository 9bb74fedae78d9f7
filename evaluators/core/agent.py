"""Agent messages: the Azure AI Evaluation SDK 1.18's form and OpenAI chat logs, read as one trace.

Two forms of an agent's messages are read:

- the SDK's: ``content`` a list of parts, ``{"type": "text", "text"}``, ``{"type": "tool_call", "tool_call_id",
  "name", "arguments"}`` (on an assistant message) and ``{"type": "tool_result", "tool_result"}`` (on a
  ``tool`` message that names its ``tool_call_id``);
- OpenAI chat completions' logs: an assistant message's ``tool_calls`` (``{"id", "type": "function",
  "function": {"name", "arguments": JSON text}}``) and ``tool`` messages with ``tool_call_id`` and text content.

:func:`sdk_messages` turns either into the SDK's form (what the agent metrics and their judge read, so both
forms give the same values); :func:`trace` into steps a person reads. Pure functions over JSON values: the
data layer checks rows with them, the metrics read them, the dashboard shows them.
"""
from __future__ import annotations

import json
import re
from typing import Any

ROLES = {"system", "user", "assistant", "tool", "developer"}
SDK_PARTS = {"text", "tool_call", "tool_result", "function_call", "function_call_output", "openapi_call",
             "openapi_call_output", "mcp_approval_request", "mcp_approval_response"}
# a tool result counts as failed when it is an object with one of these keys set, or text starting with one
ERROR_KEYS = ("error", "errors", "exception")
ERROR_PREFIXES = ("error", "exception", "traceback", "failed", "failure")


def is_agent_messages(v: Any) -> bool:
    """Whether ``v`` is a list of messages in either agent form (some part, tool call or tool message)."""
    if not isinstance(v, list) or not v or not all(isinstance(m, dict) and "role" in m for m in v):
        return False
    return any(m.get("tool_calls") or m.get("role") == "tool" or _sdk_parts(m.get("content")) for m in v)


def _sdk_parts(content: Any) -> bool:
    """Whether a message's content is a list of the SDK's parts (another API's parts, such as the Responses
    API's ``input_text``, are not read as an agent's)."""
    return isinstance(content, list) and bool(content) and all(
        isinstance(p, dict) and p.get("type") in SDK_PARTS for p in content)


_JSONISH = re.compile(r"\s*[\[{]")


def parse_json_text(v: Any) -> Any:
    """A list or object given as JSON text (a CSV cell, the SDK's string inputs) decoded; anything else as is
    (text is looked at from its start only: a plain answer costs no copy)."""
    if isinstance(v, str) and _JSONISH.match(v):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _arguments(raw: Any) -> Any:
    """OpenAI's ``arguments`` JSON text -> its object (text that is not JSON stays text)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw if raw is not None else {}


def sdk_messages(messages: Any) -> Any:
    """Messages in the SDK's form: OpenAI ``tool_calls`` become ``tool_call`` parts, a tool message's text a
    ``tool_result`` part (JSON text decoded); messages already in the SDK's form, and text, are returned as is."""
    if not isinstance(messages, list):
        return messages
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        if m.get("role") == "assistant" and m.get("tool_calls"):
            parts = _text_parts(m.get("content"))
            for c in m["tool_calls"]:
                fn = c.get("function") or {}
                parts.append({"type": "tool_call", "tool_call_id": c.get("id"), "name": fn.get("name"),
                              "arguments": _arguments(fn.get("arguments"))})
            m = {k: v for k, v in m.items() if k != "tool_calls"} | {"content": parts}
        elif m.get("role") == "tool" and not isinstance(m.get("content"), list):
            m = {**m, "content": [{"type": "tool_result", "tool_result": parse_json_text(m.get("content"))}]}
        out.append(m)
    return out


def _text_parts(content: Any) -> list[dict]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def split_log(messages: list) -> tuple[list, list]:
    """A chat log -> (query, response) as the SDK's agent evaluators take them: the query every message up to
    and including the last user message, the response the messages after it."""
    last = max((k for k, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    return messages[:last + 1], messages[last + 1:]


def tool_calls(response: Any) -> list[dict]:
    """The tool calls of a response (either form), in order, each with its ``tool_result`` when a tool message
    answers it: as the SDK's ``_parse_tools_from_response`` finds them (parts of assistant messages whose
    content is a list; the first part of a tool message, when it is a ``tool_result``)."""
    msgs = sdk_messages(parse_json_text(response))
    if not isinstance(msgs, list):
        return []
    calls, results = [], {}
    for m in msgs:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant" and isinstance(m.get("content"), list):
            calls += [dict(p) for p in m["content"] if isinstance(p, dict) and p.get("type") == "tool_call"]
        elif m.get("role") == "tool" and m.get("tool_call_id"):
            content = m.get("content")
            if isinstance(content, list) and content and isinstance(content[0], dict) \
                    and content[0].get("type") == "tool_result":
                results[m["tool_call_id"]] = content[0]
    for c in calls:
        if c.get("tool_call_id") in results:
            c["tool_result"] = results[c["tool_call_id"]].get("tool_result")
    return calls


def failed(result: Any) -> bool:
    """Whether a tool result reports a failure (an ``error``-like key set, or text starting like an error)."""
    result = parse_json_text(result)
    if isinstance(result, dict):
        return any(result.get(k) not in (None, "", [], {}, False) for k in ERROR_KEYS) \
            or str(result.get("status", "")).lower() in ("error", "failed", "failure")
    if isinstance(result, str):
        return result.strip().lower().startswith(ERROR_PREFIXES)
    return False


def as_text(v: Any) -> str:
    """A value as a person reads it: text as is, anything else as indented JSON."""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False, indent=1)
    except (TypeError, ValueError):
        return str(v)


LATENCY_KEYS = ("latency_ms", "duration_ms")
USAGE_KEYS = ("usage", "usage_metadata")  # OpenAI's and the Responses API's; LangChain's
TOKEN_KEYS = {"input_tokens": ("input_tokens", "prompt_tokens"), "output_tokens": ("output_tokens", "completion_tokens")}


def measures(d: Any) -> dict:
    """What a message or a tool call records of its cost, the keys it has: ``latency_ms`` (its ``latency_ms``
    or ``duration_ms``), ``input_tokens`` and ``output_tokens`` (from its ``usage`` or ``usage_metadata``:
    ``input_tokens``/``prompt_tokens``, ``output_tokens``/``completion_tokens``). Non-numbers are left out."""
    out: dict = {}
    if not isinstance(d, dict):
        return out
    for k in LATENCY_KEYS:
        if _number(d.get(k)):
            out["latency_ms"] = float(d[k])
            break
    usage = next((d[k] for k in USAGE_KEYS if isinstance(d.get(k), dict)), {})
    for name, keys in TOKEN_KEYS.items():
        value = next((usage[k] for k in keys if _number(usage.get(k))), None)
        if value is not None:
            out[name] = int(value)
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _call_measures(messages: Any) -> dict:
    """Tool call id -> its :func:`measures`: the call's own (an SDK ``tool_call`` part, an OpenAI ``tool_calls``
    entry), else those of the tool message that answers it (the tool's run)."""
    own, answered = {}, {}
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        parts = m.get("content") if isinstance(m.get("content"), list) else []
        for c in [*(m.get("tool_calls") or []), *(p for p in parts if isinstance(p, dict)
                                                   and p.get("type") == "tool_call")]:
            if isinstance(c, dict) and (found := measures(c)):
                own[c.get("id", c.get("tool_call_id"))] = found
        if m.get("role") == "tool" and (found := measures(m)):
            answered[m.get("tool_call_id")] = found
    return {**answered, **own}


def trace(query: Any, response: Any) -> list[dict]:
    """The steps of an agent's run, for a person: one per message, in order.

    Each step: ``role``, ``text`` (the message's text), ``calls`` (for an assistant: each tool call's ``id``,
    ``name``, ``arguments`` as text, ``result`` as text or None when no tool message answers it, ``failed``,
    and its :func:`measures` where the data has them), ``part`` ("query" or "response"), and the message's
    :func:`measures` where it has them.
    """
    steps: list[dict] = []
    for part, value in (("query", query), ("response", response)):
        value = parse_json_text(value)
        if isinstance(value, str):
            steps.append({"role": "user" if part == "query" else "assistant", "text": value, "calls": [],
                          "part": part})
            continue
        msgs = sdk_messages(value) if isinstance(value, list) else []
        costs = _call_measures(value)
        results = {c.get("tool_call_id"): c.get("tool_result") for c in tool_calls(msgs) if "tool_result" in c}
        for m in msgs:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text",
                                                                                                  "output_text")] \
                if isinstance(content, list) else [content] if isinstance(content, str) else []
            step = {"role": str(m.get("role")), "text": "\n".join(t for t in texts if isinstance(t, str)),
                    "calls": [], "part": part, **measures(m)}
            if m.get("role") == "tool":
                step["tool_call_id"] = m.get("tool_call_id")
                step["text"] = as_text(results.get(m.get("tool_call_id"), content))
            for p in content if isinstance(content, list) else []:
                if isinstance(p, dict) and p.get("type") == "tool_call":
                    cid = p.get("tool_call_id")
                    has = cid in results
                    step["calls"].append({"id": cid, "name": str(p.get("name")), "arguments": as_text(p.get("arguments")),
                                          "result": as_text(results[cid]) if has else None,
                                          "failed": failed(results[cid]) if has else None, **costs.get(cid, {})})
            steps.append(step)
    return steps


def tool_success(calls: list[dict]) -> dict[str, tuple[int, int]]:
    """Tool name -> (calls that succeeded, calls answered) over ``calls`` (:func:`trace`'s call dicts)."""
    out: dict[str, list[int]] = {}
    for c in calls:
        if c.get("failed") is None:
            continue
        ok, n = out.setdefault(c["name"], [0, 0])
        out[c["name"]] = [ok + (not c["failed"]), n + 1]
    return {k: (v[0], v[1]) for k, v in out.items()}


def check_messages(v: Any, where: str) -> list[str]:
    """What is wrong with agent messages (either form), each message named by its index; [] when fine."""
    if not isinstance(v, list):
        return [f"{where}must be a list of messages, got {type(v).__name__}"]
    out = []
    for k, m in enumerate(v):
        at = f"{where}[{k}]: "
        if not isinstance(m, dict):
            out.append(f"{at}must be an object with role and content, got {type(m).__name__}")
            continue
        if m.get("role") not in ROLES:
            out.append(f"{at}role must be one of {', '.join(sorted(ROLES))}; this message has "
                       + ("no role" if "role" not in m else f"role {m.get('role')!r}"))
        content = m.get("content")
        if isinstance(content, list):
            for j, p in enumerate(content):
                if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                    out.append(f"{at}content[{j}] must be an object with a 'type'")
                elif p["type"] == "tool_call" and not isinstance(p.get("name"), str):
                    out.append(f"{at}content[{j}]: a tool_call needs a 'name' (text)")
        elif m.get("tool_calls") is not None:
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                out.append(f"{at}tool_calls must be a list")
                continue
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    out.append(f"{at}tool_calls[{j}] needs function.name (text)")
        elif content is not None and not isinstance(content, (str, int, float)):
            out.append(f"{at}content must be text or a list of parts, got {type(content).__name__}")
    return out


def transcript(value: Any, system: bool = True) -> str:
    """Messages (either form, or text) as a judge reads them: one line a step, tool calls with their
    arguments and results; ``system`` False leaves system and developer messages out."""
    value = parse_json_text(value)
    if isinstance(value, str) or value is None:
        return value or ""
    lines = []
    for s in trace([], value):
        if s["role"] in ("system", "developer") and not system:
            continue
        if s["role"] == "tool":
            lines.append(f"Tool result ({s.get('tool_call_id')}): {s['text']}")
            continue
        if s["text"]:
            lines.append(f"{s['role'].capitalize()}: {s['text']}")
        for c in s["calls"]:
            lines.append(f"{s['role'].capitalize()} calls tool {c['name']} (id {c['id']}) with arguments: "
                         f"{c['arguments']}")
    return "\n".join(lines)


def tool_names(definitions: Any) -> dict[str, dict]:
    """Tool definitions (the SDK's ``{"name", ...}`` or OpenAI's ``{"type": "function", "function": {...}}``;
    one object or a list) by name."""
    defs = parse_json_text(definitions)
    defs = [defs] if isinstance(defs, dict) else defs if isinstance(defs, list) else []
    out = {}
    for d in defs:
        fn = d.get("function", d) if isinstance(d, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn
    return out


def is_intermediate(response: Any) -> bool:
    """Whether a response stops at a call still waiting (its last part a ``function_call`` or an MCP approval
    request), as the SDK's ``_is_intermediate_response`` decides: such a response is not judged."""
    if isinstance(response, list) and response and isinstance(response[-1], dict) \
            and response[-1].get("role") == "assistant":
        content = response[-1].get("content")
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            return content[-1].get("type") in ("function_call", "mcp_approval_request")
    return False
