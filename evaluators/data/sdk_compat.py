"""The Azure AI Evaluation SDK's conversation format, read as our canonical messages.

The SDK (azure-ai-evaluation 1.18) takes a conversation as one column holding
``{"messages": [{"role", "content", "context"?}, ...], "context": ...}``: a context for the
whole conversation beside the messages, and optionally one on a user or an assistant message.
Our canonical form is the bare ``messages`` list with each assistant turn carrying the documents
it was answered from. The record itself is never rewritten, so results carry the column as the
SDK writes it (``inputs.conversation``); only reading goes through here.
"""
from __future__ import annotations

from typing import Any

CONVERSATION_KEYS = {"messages", "context"}


def is_sdk_conversation(value: Any) -> bool:
    """Whether ``value`` is the SDK's ``{"messages": [...], "context": ...}`` object."""
    return isinstance(value, dict) and "messages" in value


def conversation_messages(value: Any) -> list[dict]:
    """The messages of a conversation cell, each assistant turn with the context that applies to it.

    Args:
        value: a list of messages (returned as is), or the SDK's conversation object.
    Returns:
        Messages; for the SDK's object, an assistant message's ``context`` combines, in this order,
        the conversation's context, the context of the user message before it and its own (text
        joined by blank lines when there are several), as the SDK's evaluators see them together.
    """
    if not is_sdk_conversation(value):
        return value if isinstance(value, list) else []
    messages = value.get("messages")
    if not isinstance(messages, list):
        return []
    shared = value.get("context")
    out, user_ctx = [], None
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        if m.get("role") == "user":
            user_ctx = m.get("context")
        if m.get("role") == "assistant":
            parts = [c for c in (shared, user_ctx, m.get("context")) if _present(c)]
            if len(parts) > 1:
                from evaluators.data.dataset import render_context

                m = {**m, "context": "\n\n".join(render_context(c) for c in parts)}
            elif parts:
                m = {**m, "context": parts[0]}
        out.append(m)
    return out


def check_conversation(value: dict, problems, row: int, col: str) -> dict:
    """Report what is wrong with an SDK conversation object (by row and column) to ``problems``.

    Returns:
        The object with its messages as the loader stores them (numbers as text).
    """
    from evaluators.data.mapping import _check_context, _check_messages

    unknown = sorted(set(value) - CONVERSATION_KEYS)
    if unknown:
        problems.add(row, col, f"conversation has unknown key(s) {', '.join(unknown)}; "
                               "expected {'messages': [...], 'context': ...}")
    if not isinstance(value.get("messages"), list):
        problems.add(row, col, f"conversation.messages must be a list of {{role, content}}, "
                               f"got {type(value.get('messages')).__name__}")
        return value
    if _present(value.get("context")):
        _check_context(value["context"], "conversation.", problems, row, col)
    messages = _check_messages(value["messages"], problems, row, col)
    for k, m in enumerate(value["messages"]):
        if isinstance(m, dict) and m.get("role") == "user" and "context" in m:
            _check_context(m["context"], f"messages[{k}]: ", problems, row, col)
    return value if messages is value["messages"] else {**value, "messages": messages}


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, (str, list, dict)) and len(v) == 0)
