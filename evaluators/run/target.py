"""Answers from a target (issue 36): a file of questions only (an OpenAI Evals file's ``input`` and ``ideal``, queries
with their ground truth) answered by the model or prompt under test, then judged as any dataset.

Each answer is asked once: it is kept in the store's call cache under the exact request and the target's identity
(model, URL, sampling, system prompt, prompt template), written as it arrives, so a run killed half-way asks the
target only for what it had not answered, and the same questions, target and prompt give the same answers again
without a call. The target's tokens and latency are counted apart from the judge's. A reply is bounded like a
judge's (the judge client's size and time limits).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from evaluators.core.asyncrun import run_to_end
from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig

QUESTION_FIELDS = ("query", "context", "ground_truth")  # what a target's default prompt and a template may read


def target_messages(system: str | None, history: list[dict], context: Any) -> list[dict]:
    """An application's request: its system prompt and the row's reference documents as one system message,
    then the conversation so far (one implementation, for the attack sets' targets too)."""
    from evaluators.data.dataset import render_context

    sys_parts = [system] if system else []
    if context:
        sys_parts.append("Reference documents:\n" + render_context(context))
    msgs = [{"role": "system", "content": "\n\n".join(sys_parts)}] if sys_parts else []
    return msgs + [{"role": m["role"], "content": m.get("content") or ""} for m in history
                   if m.get("role") in ("user", "assistant", "system")]


@dataclass(frozen=True)
class Target:
    """The model under test: an OpenAI-compatible endpoint (``config``: model, URL, sampling; no key), an optional
    system prompt, and an optional prompt template (its text: ``[system]`` / ``[user]`` sections, ``{{ query }}``,
    ``{{ context }}``, ``{{ ground_truth }}`` placeholders), ``name`` saying which variant it is."""

    config: JudgeConfig
    system: str | None = None
    prompt: str | None = None
    name: str = ""

    def identity(self) -> dict[str, Any]:
        """What decides an answer (the cache key's part beside the request): not the key, timeouts or concurrency."""
        return {"target": self.config.identity(), "system": self.system,
                "prompt_sha": hashlib.sha256(self.prompt.encode()).hexdigest() if self.prompt else None}

    def messages(self, values: Mapping[str, Any]) -> list[dict]:
        """The request for one row (``values``: its fields)."""
        if self.prompt is None:
            return target_messages(self.system, [{"role": "user", "content": str(values.get("query") or "")}],
                                   values.get("context"))
        from evaluators.judge.templates import parse_template

        msgs = parse_template(self.prompt, "the target's prompt", bounded=True).render(
            {k: v if isinstance(v, str) or v is None else json.dumps(v, ensure_ascii=False) for k, v in values.items()})
        return ([{"role": "system", "content": self.system}] if self.system else []) + msgs


@dataclass
class TargetUsage:
    """What answering cost, apart from the judge: calls made, answers found in the cache, tokens, time."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    usd: float | None = None  # with a price: what the calls cost
    failed: dict[int, str] = field(default_factory=dict)  # row index -> the error

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "cached": self.cached, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "latency_ms": round(self.latency_ms, 1),
                "usd": None if self.usd is None else round(self.usd, 6), "failed_rows": len(self.failed)}


def question_rows(path: str | Path, column_mapping: Mapping[str, str] | None = None) -> tuple[list[dict], dict]:
    """A file's rows as they are, and which columns hold the question, its context and the expected answer
    (detected as for any dataset, ``column_mapping`` overriding). A file with no question column is refused."""
    from evaluators.core.errors import ProblemCollector
    from evaluators.data.dataset import FORMATS
    from evaluators.data.mapping import detect_mapping
    from evaluators.data.reading import read_records

    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise UsageError(f"{p}: unknown file type; use .jsonl, .json, .csv or .parquet")
    problems = ProblemCollector(p.name)
    try:
        records, _ = read_records(p.read_bytes(), p.name, fmt, problems)
    except OSError as e:
        raise UsageError(f"{p}: cannot read it ({e.strerror or e})") from None
    problems.raise_if_any()  # an unreadable row is named (file, row), never left out silently
    columns = list(dict.fromkeys(c for r in records for c in r))
    mapping, _ = detect_mapping(columns, records[:20])
    mapping = {f: c for f, c in {**mapping, **dict(column_mapping or {})}.items() if f in QUESTION_FIELDS}
    if "query" not in mapping:
        raise UsageError(f"{p}: no question column found among {', '.join(columns)}: map one (--map query=COLUMN)")
    for f, c in mapping.items():
        if c not in columns:
            raise UsageError(f"{p}: no column '{c}' to map to {f}; columns are {', '.join(columns)}")
    return records, mapping


def answer_rows(store, records: list[dict], mapping: Mapping[str, str], target: Target, api_key: str | None = None,
                on_progress: Callable[[int, int], None] | None = None, price: Any = None,
                budget: float | None = None) -> TargetUsage:
    """Put the target's answer to every row in its ``response`` (in place), each asked once (the store's call
    cache). A row the target could not answer keeps no answer and is in ``failed``; the others are kept.

    With ``price`` (a :class:`evaluators.judge.prices.Price`) the calls' cost is summed; with ``budget`` too (USD)
    a call that could take it past the budget is not sent (calls in flight counted at their estimate: the
    prompt's characters / 4 and the whole ``max_tokens``), and its row is in ``failed`` saying so."""
    requests = [target.messages({f: rec.get(c) for f, c in mapping.items()}) for rec in records]
    replies, usage = ask_requests(store, requests, target, api_key, on_progress, price, budget)
    for rec, reply in zip(records, replies):
        if reply is not None:
            rec["response"] = reply
    return usage


def request_key(messages: list[dict], identity: Mapping[str, Any]) -> str:
    """The call cache's key of one request to a target: the messages and what decides the answer (a
    :meth:`Target.identity`, or a Python callable's name)."""
    blob = json.dumps([messages, identity, "target"], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def ask_requests(store, requests: list[list[dict]], target: Target, api_key: str | None = None,
                 on_progress: Callable[[int, int], None] | None = None, price: Any = None,
                 budget: float | None = None, usable: Callable[[str], bool] | None = None
                 ) -> tuple[list[str | None], TargetUsage]:
    """The target's reply to each request (chat messages, sent as they are), each asked once: found in the store's
    call cache, else asked (``target.config.concurrency`` at once) and kept as it arrives. A request the target
    could not answer has None and its error in ``usage.failed`` (``price``, ``budget``: as :func:`answer_rows`);
    so does a reply that is not ``usable`` (an attacker's empty message), which is not cached: asked again next
    time."""
    from evaluators.judge.client import JudgeClient, JudgeError

    keys = [request_key(msgs, target.identity()) for msgs in requests]
    hits = store.cache_get_many(list(dict.fromkeys(keys)))
    usage = TargetUsage(usd=0.0 if price is not None else None)
    replies: list[str | None] = [None] * len(requests)
    in_flight = [0.0]
    todo = []
    for i, (msgs, key) in enumerate(zip(requests, keys)):
        if key in hits and (usable is None or usable(hits[key].reply)):
            replies[i] = hits[key].reply
            usage.cached += 1
        else:
            todo.append((i, msgs, key))
    total, done = len(requests), [usage.cached]

    async def run() -> None:
        client = JudgeClient(target.config, api_key or "unused")
        sem = asyncio.Semaphore(max(1, target.config.concurrency))

        async def ask(i: int, msgs: list[dict], key: str) -> None:
            async with sem:
                est = 0.0
                if price is not None and budget is not None:
                    est = price.cost(len(json.dumps(msgs, ensure_ascii=False)) // 4, target.config.max_tokens)
                    if usage.usd + in_flight[0] + est > budget:
                        usage.failed[i] = (f"budget: this answer could take the target's calls past the budget of "
                                           f"${budget:.4f} (spent ${usage.usd:.4f})")
                        return
                in_flight[0] += est
                try:
                    reply = await client.complete(msgs)
                except JudgeError as e:
                    usage.failed[i] = str(e)
                    return
                finally:
                    in_flight[0] -= est
            replies[i] = reply.text
            if price is not None:
                usage.usd += price.cost(reply.prompt_tokens or 0, reply.completion_tokens or 0)
            usage.calls += 1
            usage.prompt_tokens += reply.prompt_tokens or 0
            usage.completion_tokens += reply.completion_tokens or 0
            usage.latency_ms += reply.latency_ms or 0.0
            if usable is not None and not usable(reply.text):  # (paid for, but neither used nor kept)
                replies[i], usage.failed[i] = None, "an unusable reply (empty)"
                return
            # kept at once, so that a run killed after this answer never asks for it again
            await asyncio.to_thread(store.write_results, "", [], [dict(
                key=key, model=target.config.model, reply=reply.text, prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens, latency_ms=reply.latency_ms)])
            done[0] += 1
            if on_progress:
                on_progress(done[0], total)

        try:
            await asyncio.gather(*(ask(*t) for t in todo))
        finally:
            await client.aclose()

    if todo:
        run_to_end(run())  # (also from inside a running event loop: a notebook, the dashboard)
    return replies, usage


def call_rows(records: list[dict], fn: Callable[..., Any], where: str = "the target") -> None:
    """Answer each row with a Python function, as the Azure SDK's ``target``: called with the row's columns its
    parameters name (all of them for ``**kwargs``); the keys of the dict it returns become columns
    ``target.<key>`` (in place). Not cached: a function's answers are whatever it returns today."""
    import inspect

    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for i, rec in enumerate(records):
        try:
            got = fn(**(rec if takes_all else {k: v for k, v in rec.items() if k in params}))
        except Exception as e:  # noqa: BLE001 — the user's code: its failure named by row, not a traceback
            raise UsageError(f"{where} failed on row {i + 1}: {type(e).__name__}: {e}") from None
        if not isinstance(got, Mapping):
            raise UsageError(f"{where} returned {type(got).__name__} for row {i + 1}: it must return a dict "
                             "(its keys become columns target.<key>)")
        rec.update({f"target.{k}": v for k, v in got.items()})


def load_callback(ref: str) -> Callable[..., Any]:
    """``module:function`` (the module importable from the working directory or the path) -> the function."""
    import importlib
    import sys

    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise UsageError(f"--target-callback {ref!r}: give MODULE:FUNCTION, e.g. my_app:answer")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the working directory, as `python -m` would have it
    try:
        fn = getattr(importlib.import_module(module), name)
    except Exception as e:  # noqa: BLE001 — an import error of the user's module, said in one line
        raise UsageError(f"--target-callback {ref}: cannot load it ({type(e).__name__}: {e})") from None
    if not callable(fn):
        raise UsageError(f"--target-callback {ref}: {name} is not a function")
    return fn


def target_facts(target: Target, usage: TargetUsage, experiment: str | None = None) -> dict[str, Any]:
    """What a run keeps of the target that wrote its answers (:attr:`evaluators.run.spec.RunSpec.target`): never
    its key."""
    return {"model": target.config.model, "base_url": target.config.base_url, "variant": target.name or None,
            "experiment": experiment, "system": target.system, "identity": target.identity(), **usage.as_dict()}
