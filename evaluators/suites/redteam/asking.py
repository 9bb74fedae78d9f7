"""Asking a scan's target: an OpenAI-compatible :class:`~evaluators.run.target.Target` (through
:func:`evaluators.run.target.ask_requests`) or a Python callable ``f(messages) -> str`` (as the SDK's callback).
Either way each conversation is asked once: its answer is kept in the store's call cache as it arrives, under the
messages and the target's identity, so a scan killed half-way sends only what it had not sent, and the same scan
again sends nothing. A single-turn attack and a multi-turn attack's turn go the same way."""
from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from evaluators.core.asyncrun import run_to_end


@dataclass
class Answered:
    """What asking the target did: calls made, answers found in the cache, errors (request index -> text)."""

    calls: int = 0
    cached: int = 0
    errors: dict[int, str] = field(default_factory=dict)
    prompt_tokens: int = 0  # (as an endpoint reports them; a callable reports none)
    completion_tokens: int = 0

    def add(self, other: "Answered") -> None:
        """Another batch's counts added to these (its errors are the caller's to place)."""
        self.calls += other.calls
        self.cached += other.cached
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


def _callable_identity(fn: Callable, name: str | None) -> dict[str, Any]:
    """A callable's part of the cache key: the name given, else where it is defined (module and qualified name)."""
    return {"callable": name or f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"}


async def _reply_of(fn: Callable, messages: list[dict]) -> str:
    """``fn``'s answer to ``messages`` (a plain function runs in a thread of its own): text, or the SDK callback's
    shape (async, returning ``{"messages": [..., {"role": "assistant", "content": ...}]}``)."""
    got = await (fn(messages) if inspect.iscoroutinefunction(fn) else asyncio.to_thread(fn, messages))
    if inspect.isawaitable(got):
        got = await got
    if isinstance(got, Mapping) and isinstance(got.get("messages"), list) and got["messages"]:
        last = got["messages"][-1]
        got = last.get("content") if isinstance(last, Mapping) else last
    if not isinstance(got, str):
        raise TypeError(f"the target returned {type(got).__name__}, not text (or the SDK's {{'messages': [...]}})")
    return got


def _ask_callable(store, conversations: list[list[dict]], fn: Callable, name: str | None, concurrency: int = 8,
                  on_progress: Callable[[int, int], None] | None = None) -> tuple[list[str | None], Answered]:
    """Each conversation to ``fn``, once, ``concurrency`` at a time: each answer is cached as it comes back."""
    from evaluators.run.target import request_key

    identity, done = _callable_identity(fn, name), Answered()
    keys = [request_key(conv, identity) for conv in conversations]
    hits = store.cache_get_many(list(dict.fromkeys(keys)))
    replies: list[str | None] = [hits[k].reply if k in hits else None for k in keys]
    done.cached = sum(k in hits for k in keys)

    async def ask(i: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            try:
                reply = await _reply_of(fn, conversations[i])
            except Exception as e:  # noqa: BLE001 — the user's code failed on this attack: its error, not the scan's
                done.errors[i] = f"{type(e).__name__}: {e}"
                return
        replies[i] = reply
        done.calls += 1
        await asyncio.to_thread(store.write_results, "", [], [dict(key=keys[i], model=identity["callable"],
                                                                   reply=reply)])
        if on_progress:
            on_progress(done.cached + done.calls, len(conversations))

    async def run() -> None:
        sem = asyncio.Semaphore(max(1, concurrency))
        await asyncio.gather(*(ask(i, sem) for i, key in enumerate(keys) if key not in hits))

    run_to_end(run())
    return replies, done


def ask_target(store, conversations: list[list[dict]], target: Any, api_key: str | None = None,
               target_name: str | None = None, on_progress: Callable[[int, int], None] | None = None,
               concurrency: int = 8) -> tuple[list[str | None], Answered]:
    """The target's reply to each conversation (user and assistant turns; the last one the user's), each asked
    once; None where it failed, its error (``the target failed: ...``) in the returned ``errors``.

    Args:
        target: a :class:`~evaluators.run.target.Target` (its system prompt put first; a one-question
            conversation goes through its prompt template, if it has one), or a callable ``f(messages) -> str``
            (or, as the SDK's callback, an async one returning ``{"messages": [...]}``: the last message's
            content is the answer).
        target_name: a callable's name in the cache key (default: its module and qualified name).
        on_progress: called with (answers so far, conversations to answer) as the answers arrive.
        concurrency: a callable's calls at once (an endpoint's: its configuration's).
    """
    if callable(target):
        replies, got = _ask_callable(store, conversations, target, target_name, concurrency, on_progress)
        got.errors = {i: f"the target failed: {e}" for i, e in got.errors.items()}
        return replies, got
    from evaluators.run.target import ask_requests, target_messages

    requests = [target.messages({"query": conv[0]["content"]}) if len(conv) == 1
                else target_messages(target.system, conv, None) for conv in conversations]
    replies, usage = ask_requests(store, requests, target, api_key, on_progress)
    return replies, Answered(usage.calls, usage.cached, {i: f"the target failed: {e}" for i, e in usage.failed.items()},
                             usage.prompt_tokens, usage.completion_tokens)
