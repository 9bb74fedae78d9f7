"""Repeated judging (``RunSpec.repeat``): a judge task asked K times, each its own call and cache entry, made
into one result whose outputs keep every judgment's value (``votes``), combined by :mod:`evaluators.core.votes`.

The first judgment's cache key is the task's own, so a run judged once and again with ``--repeat 3`` asks
only the two new judgments; the others' keys add the repeat's number.
"""
from __future__ import annotations

import hashlib
from typing import Any

from evaluators.core.registry import MetricSpec
from evaluators.core.votes import combine
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
