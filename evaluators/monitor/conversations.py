"""Conversations judged as conversations: the traces sharing a ``gen_ai.conversation.id`` (or OpenInference's
``session.id``: the mapping's ``conversation_key``) make one row once no turn of it has been mapped for the
project's conversation quiet period (``monitor project --conversation-quiet-seconds``, default 300 s).

The row is stored in ``monitor_traces`` with kind ``conversation`` and an id derived from its key
(:func:`evaluators.store.monitor_conversations.conversation_id`), so rules decide and judge it as they do a trace.
Its fields are the dataset's conversation shape: ``conversation``, the turns' messages in the order the traces
started (a user message of each trace's query, an assistant message of its response carrying the documents it
was answered from as ``context``), with the first turn's system instructions first; and ``query`` and
``response``, the last turn's. The turns' fields are already redacted, with tokens the conversation shares.
A trace of the conversation mapped after its row is kept and marked late, not added and not judged in it again.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

SUMMED = ("input_tokens", "output_tokens", "llm_calls")
FIRST = ("conversation_id", "user_id", "service_name", "service_version", "model", "provider")


def conversation_fields(turns: list[dict[str, Any]]) -> tuple[dict, dict, bool]:
    """(fields, sources, content) of a conversation's row from its turns (the traces' rows, in start order)."""
    messages: list[dict] = []
    fields: dict[str, Any] = {}
    first = turns[0]["fields"] or {}
    if isinstance(first.get("system_instructions"), str) and first["system_instructions"]:
        messages.append({"role": "system", "content": first["system_instructions"]})
    for t in turns:
        f = t["fields"] or {}
        if isinstance(f.get("query"), str) and f["query"]:
            messages.append({"role": "user", "content": f["query"]})
        if isinstance(f.get("response"), str) and f["response"]:
            answer = {"role": "assistant", "content": f["response"]}
            if f.get("context"):
                answer["context"] = f["context"]
            messages.append(answer)
    answered = [m for m in messages if m["role"] == "assistant"]
    if answered:
        fields["conversation"] = messages
        asked = [m for m in messages if m["role"] == "user"]
        if asked:
            fields["query"] = asked[-1]["content"]
        fields["response"] = answered[-1]["content"]
    for name in FIRST:
        value = next((t["fields"][name] for t in turns if (t["fields"] or {}).get(name) is not None), None)
        if value is not None:
            fields[name] = value
    for name in SUMMED:
        counted = [t["fields"][name] for t in turns if isinstance((t["fields"] or {}).get(name), int)]
        if counted:
            fields[name] = sum(counted)
    fields["error"] = any((t["fields"] or {}).get("error") for t in turns)
    fields["turns"] = len(turns)
    where = f"query and response of {len(turns)} trace(s) of the conversation, in start order"
    sources = {name: where for name in ("conversation", "query", "response") if name in fields}
    sources.update({name: f"{name} of the conversation's first trace having it" for name in FIRST if name in fields})
    sources.update({name: f"{name} summed over its traces" for name in SUMMED if name in fields})
    sources["error"] = "whether any of its traces had an error"
    sources["turns"] = "traces of the conversation"
    return fields, sources, bool(answered)


def assemble_conversations(store, project: str, now: dt.datetime) -> int:
    """Store the row of each conversation of ``project`` due at ``now`` (turns of a conversation whose row was
    stored before are marked late instead). Returns how many rows were stored."""
    quiet = dt.timedelta(seconds=store.monitor_project(project)["conversation_quiet_seconds"])
    done = 0
    for key in store.due_conversations(project, now - quiet):
        turns = store.conversation_turns(project, key)
        if not turns:
            continue
        fields, sources, content = conversation_fields(turns)
        hint = "" if content else "no trace of this conversation captured an answer (see its traces' hints)"
        if store.save_conversation(project, key, turns, fields=fields, sources=sources, content=content, hint=hint):
            done += 1
    return done
