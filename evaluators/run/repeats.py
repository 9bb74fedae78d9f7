"""Repeated judging and juries (``RunSpec.repeat``, ``RunSpec.jury``): a judge task asked K times of each
judge, each judgment its own call and cache entry, made into one result whose outputs keep every judgment's
value (``votes``; a jury's also ``jurors``), combined by :mod:`evaluators.core.votes`.

The run judge's first judgment keeps the task's own cache key, so a run judged once and again with
``--repeat 3`` asks only the two new judgments; the others' keys add the repeat's number; another juror's
start from its own key (its model and settings are in it).
"""
from __future__ import annotations

import hashlib
from typing import Any

from evaluators.core.registry import MetricSpec
from evaluators.core.votes import combine
from evaluators.judge.config import JudgeConfig
from evaluators.judge.templates import Template
from evaluators.run.planning import cache_key
from evaluators.store.schema import Result


def repeat_keys(key: str, k: int) -> list[str]:
    """The K cache keys of a task asked K times: its own, then one per further judgment."""
    return [key] + [hashlib.sha256(f"{key}#repeat{r}".encode()).hexdigest() for r in range(1, k)]


def combined_result(spec: "MetricSpec", results: list[Result]) -> Result:
    """One task's K results (all "ok") as one: combined outputs and value, the judgments' replies one after
    the other, tokens summed, the slowest call's latency, cached only when every judgment was."""
    first = results[0]
    spec_outputs = [r.outputs or {} for r in results]
    outputs, reason = combine(spec, spec_outputs, [r.reason for r in results])
    value = outputs.get(spec.primary)
    raw = "\n\n".join(f"--- judgment {k + 1} of {len(results)} ---\n{r.raw or ''}" for k, r in enumerate(results))
    meta: dict[str, Any] = {**(first.meta or {}), "repeat": len(results)}
    return Result(first.row_idx, first.metric, first.turn, "ok", value=None if value is None else float(value),
                  outputs=outputs, reason=reason, raw=raw,
                  prompt_tokens=sum(r.prompt_tokens or 0 for r in results) or None,
                  completion_tokens=sum(r.completion_tokens or 0 for r in results) or None,
                  latency_ms=max((r.latency_ms or 0 for r in results), default=None),
                  cached=all(r.cached for r in results), meta=meta)


def task_keys(key: str, template: Template, messages: list[dict], jurors: list[JudgeConfig],
              k: int) -> list[tuple[int, str]]:
    """(juror, cache key) of each judgment of one task: K per juror, the run's judge first."""
    out = []
    for j, juror in enumerate(jurors):
        base = key if j == 0 else cache_key(template, messages, juror)
        out += [(j, x) for x in repeat_keys(base, k)]
    return out


def jury_result(spec: MetricSpec, results: list[Result], jurors: list[int], names: list[str]) -> Result:
    """Every judgment of a task (all "ok"; ``jurors[i]`` gave ``results[i]``) as one result: each juror's
    judgments combined, then the jurors' values (their median; a label's majority) when there are several."""
    per = [[r for r, j in zip(results, jurors) if j == n] for n in range(len(names))]
    each = [rs[0] if len(rs) == 1 else combined_result(spec, rs) for rs in per]
    if len(each) == 1:
        return each[0]
    outputs, reason = combine(spec, [r.outputs or {} for r in each], [r.reason for r in each], jurors=names)
    value = outputs.get(spec.primary)
    first = each[0]
    raw = "\n\n".join(f"=== judge {name} ===\n{r.raw or ''}" for name, r in zip(names, each))
    return Result(first.row_idx, first.metric, first.turn, "ok", value=None if value is None else float(value),
                  outputs=outputs, reason=reason, raw=raw,
                  prompt_tokens=sum(r.prompt_tokens or 0 for r in each) or None,
                  completion_tokens=sum(r.completion_tokens or 0 for r in each) or None,
                  latency_ms=max((r.latency_ms or 0 for r in each), default=None),
                  cached=all(r.cached for r in each), meta={**(first.meta or {}), "jury": names})
