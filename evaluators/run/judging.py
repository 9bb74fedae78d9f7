"""Judge calls outside a run (aligning a judge, a multi-turn attack's turn-by-turn checks), through the judge client
and paced as a run is, each reply first looked up in, then kept in, the store's call cache under the key a run
gives the same prompt (:func:`evaluators.run.planning.cache_key`): a run over the same rows later takes these
replies from the cache, and the same calls again send nothing."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from evaluators.core.asyncrun import run_to_end
from evaluators.core.errors import UsageError
from evaluators.judge.client import JudgeClient, JudgeError
from evaluators.judge.config import JudgeConfig
from evaluators.judge.ratelimit import RateLimiter
from evaluators.judge.templates import Template
from evaluators.run.planning import cache_key


def reply_value(spec: Any, text: str) -> float | None:
    """A reply's primary value, or None when it cannot be used (the runner would record an error)."""
    try:
        value = spec.parse_reply(text).outputs.get(spec.primary)
    except Exception:  # noqa: BLE001 — an unusable reply leaves the row out, as the runner's error would
        return None
    return None if value is None else float(value)


class CachedJudge:
    """Calls through the judge client, each reply kept in (and first looked up in) the store's judge cache.

    Counts what it did: ``calls`` sent, ``cached`` replies found, the calls' tokens, and each failed call's reason
    (``errors``, and by cache key in ``failed``)."""

    def __init__(self, store: Any, run_id: str, judge: JudgeConfig, api_key: str | None):
        self.store, self.run_id, self.judge, self.api_key = store, run_id, judge, api_key
        self.calls = self.cached = self.prompt_tokens = self.completion_tokens = 0
        self.errors: list[str] = []  # failed calls' reasons
        self.failed: dict[str, str] = {}  # cache key -> why its call gave no usable reply
        self.tokens: dict[str, tuple[int, int]] = {}  # cache key -> (prompt, completion) tokens, sent or cached

    async def _ask(self, client: JudgeClient, sem: asyncio.Semaphore, key: str, messages: list[dict],
                   extra: dict | None, hit: Any, usable: Callable[[str], bool]) -> str | None:
        if hit is not None and usable(hit.reply):
            self.cached += 1
            self.tokens[key] = (hit.prompt_tokens or 0, hit.completion_tokens or 0)  # (what it cost when asked)
            return hit.reply
        async with sem:
            try:
                reply = await client.complete(messages, extra=extra)
            except JudgeError as e:
                self.errors.append(str(e))
                self.failed[key] = str(e)
                return None
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens or 0
        self.completion_tokens += reply.completion_tokens or 0
        self.tokens[key] = (reply.prompt_tokens or 0, reply.completion_tokens or 0)
        if not usable(reply.text):  # as the runner: only a reply that can be used is cached, so a retry asks again
            self.failed[key] = "the judge's reply could not be read"
            return None
        await asyncio.to_thread(self.store.write_results, self.run_id, [], [dict(
            key=key, model=self.judge.model, reply=reply.text, prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens, latency_ms=reply.latency_ms)])
        return reply.text

    def ask_many(self, jobs: list[tuple[str, list[dict], dict | None]],
                 usable: Callable[[str], bool] = lambda _: True, strict: bool = True) -> list[str | None]:
        """Replies to (cache key, messages, request parameters) jobs, in order; None where a call failed or its
        reply is not ``usable`` (then not cached either).

        Raises:
            UsageError: with ``strict``, when not one call of several was answered (the judge's first error).
        """
        if not jobs:
            return []
        hits = self.store.cache_get_many(sorted({j[0] for j in jobs}))

        async def go() -> list[str | None]:
            # paced as a run is: the judge's 429s and rate-limit headers, and the --rpm / --tpm budgets
            client = JudgeClient(self.judge, self.api_key, limiter=RateLimiter(self.judge.concurrency, self.judge.rpm,
                                                                          self.judge.tpm))
            sem = asyncio.Semaphore(self.judge.concurrency)
            try:
                return list(await asyncio.gather(*(self._ask(client, sem, *j, hits.get(j[0]), usable)
                                                   for j in jobs)))
            finally:
                await client.aclose()
        before = len(self.errors)
        out = run_to_end(go())
        if strict and all(x is None for x in out) and len(self.errors) > before:  # not one answer: say why, stop
            raise UsageError(f"the judge answered none of {len(jobs)} calls: {self.errors[before]}")
        return out

    def jobs(self, template: Template, rows: list[dict]) -> list[tuple[str, list[dict], dict | None]]:
        """(cache key, messages, request parameters) of ``template`` on each row's fields, as a run sends them."""
        out = []
        for values in rows:
            messages = template.render(values)
            out.append((cache_key(template, messages, self.judge), messages, template.request_params() or None))
        return out

    def values(self, template: Template, spec: Any, rows: list[tuple[Any, dict]]) -> dict[Any, float | None]:
        """Key -> the value ``template`` gets on each (key, the row's fields); None where the call or its reply
        failed."""
        jobs = self.jobs(template, [values for _, values in rows])
        out: dict[Any, float | None] = {}
        for (i, _), text in zip(rows, self.ask_many(jobs, lambda text: reply_value(spec, text) is not None)):
            out[i] = None if text is None else reply_value(spec, text)
        return out
