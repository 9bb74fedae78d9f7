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
                m = {**m, "context": "\n\n".join(render_context(c) for c in parts)}
            elif parts:
                m = {**m, "context": parts[0]}
        out.append(m)
    return out


def render_context(ctx: Any) -> str:
    """Context as the judge reads it: text as is, documents numbered with id and title."""
    if isinstance(ctx, str):
        return ctx
    if isinstance(ctx, dict):
        ctx = ctx.get("citations", ctx.get("documents", [ctx]))
    parts = []
    for k, doc in enumerate(ctx, 1):
        if isinstance(doc, dict):
            head = " ".join(str(x) for x in (doc.get("id"), doc.get("title")) if x)
            parts.append(f"[doc{k}] {head}\n{doc.get('content', '')}".strip())
        else:
            parts.append(f"[doc{k}] {doc}")
    return "\n\n".join(parts)


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, (str, list, dict)) and len(v) == 0)
