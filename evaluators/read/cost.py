"""A run's cost as people read it: per run and per metric, estimated before and spent after, the share of
prompt tokens the provider served from its prompt cache; the ``cost.*`` keys of ``metrics.json``."""
from __future__ import annotations

from typing import Any

from evaluators.run.budget import Tally, spec_prices, tally_billing
from evaluators.run.spec import RunSpec
from evaluators.store.store import Store


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def _tally_keys(prefix: str, t: Tally) -> dict[str, Any]:
    return {f"{prefix}.usd": _round(t.usd) if t.calls else 0.0, f"{prefix}.billed_calls": t.calls,
            f"{prefix}.prompt_tokens": t.prompt_tokens, f"{prefix}.cached_prompt_tokens": t.cached_tokens,
            f"{prefix}.completion_tokens": t.completion_tokens,
            f"{prefix}.cached_share": None if t.cached_share is None else round(t.cached_share, 4)}


def run_cost(store: Store, run_id: str) -> dict[str, Any]:
    """``cost.*`` of a run (empty for a run with no judge).

    Keys: ``cost.usd`` (None when a billed call's model has no price), ``cost.billed_calls``,
    ``cost.prompt_tokens``, ``cost.cached_prompt_tokens`` (the provider's own count, priced as cached),
    ``cost.completion_tokens``, ``cost.cached_share`` (cached / prompt tokens), ``cost.batch_calls``,
    ``cost.estimate_usd`` and ``cost.estimate_prompt_tokens`` (as estimated when the run was started, with
    ``cost.tokenizer``), ``cost.budget_usd``, ``cost.batch`` (the run used the Batch API), the price used
    (``cost.price.input`` ...), and the same per metric as ``cost.<metric>.usd`` ...
    """
    run = store.get_run(run_id)
    spec = RunSpec.from_dict(run["spec"])
    target = target_keys(spec.target)
    if spec.judge is None:
        return target
    price_of = spec_prices(spec)
    total, per = tally_billing(store.billing(run_id), price_of, spec.judge.model)
    est = spec.estimate or {}
    price = price_of(spec.judge.model)
    out: dict[str, Any] = {"cost.currency": "USD", **_tally_keys("cost", total), "cost.batch_calls": total.batch_calls,
                           "cost.batch": spec.batch, "cost.budget_usd": spec.budget,
                           "cost.estimate_usd": _round(est.get("usd")), "cost.estimate_prompt_tokens": est.get("prompt_tokens"),
                           "cost.tokenizer": est.get("tokenizer")}
    if price is not None:
        out.update({f"cost.price.{k}": v for k, v in price.to_dict().items()})
    by_metric_est = est.get("by_metric") or {}
    for name in spec.metrics:
        if not spec.metric(name).is_judge:  # as the run recorded it (your own metric's version too)
            continue
        out.update(_tally_keys(f"cost.{name}", per.get(name, Tally())))
        out[f"cost.{name}.estimate_usd"] = _round((by_metric_est.get(name) or {}).get("usd"))
    return {**out, **target}


TARGET_KEYS = ("model", "variant", "calls", "cached", "prompt_tokens", "completion_tokens", "latency_ms", "usd")


def target_keys(target: dict[str, Any] | None) -> dict[str, Any]:
    """``target.*``: what the model under test cost to write the answers (its calls, answers found in the cache,
    tokens, seconds of calls, USD when it has a price), apart from the judge's ``cost.*``."""
    if not target:
        return {}
    return {f"target.{k}": _round(target.get(k)) if k == "usd" else target.get(k) for k in TARGET_KEYS}


def kept_run_cost(store: Store, run_id: str) -> dict[str, Any]:
    """:func:`run_cost`, kept for an ended run in ``views/`` beside the store (one small file per state of the
    run and of its settings), so that a freshly started dashboard does not sum a big run's results again: on
    SQLite that pass reads every stored result (0.7 s for 600,000). Written when the run's views are prepared
    as it ends (:func:`evaluators.read.view.prepare_view`), else at the first read."""
    from evaluators.read.columns import kept_json

    return kept_json(store, run_id, "cost", lambda: run_cost(store, run_id))


def _usd(v: Any) -> str:
    return "no price given" if v is None else f"${v:,.4f}"


def target_line(cost: dict[str, Any]) -> list[str]:
    """The target's own line: its answers' calls, tokens, time and USD, apart from the judge's."""
    if "target.model" not in cost:
        return []
    return [f"answers by {cost['target.model']}" + (f" ({cost['target.variant']})" if cost.get("target.variant") else "")
            + f": {_usd(cost['target.usd'])} for {cost['target.calls'] or 0:,} calls ({cost['target.cached'] or 0:,} "
            f"answers from the cache; {cost['target.prompt_tokens'] or 0:,} prompt and {cost['target.completion_tokens'] or 0:,} "
            f"completion tokens, {(cost['target.latency_ms'] or 0) / 1000:.1f} s of calls), apart from the judge's"]


def cost_lines(cost: dict[str, Any], metrics: list[str]) -> list[str]:
    """The CLI summary's cost lines (and the dashboard's captions): per run, then per metric, then the target's."""
    if "cost.usd" not in cost:
        return target_line(cost)
    usd = _usd

    share = cost.get("cost.cached_share")
    lines = [f"cost: {usd(cost['cost.usd'])} for {cost['cost.billed_calls']:,} billed judge calls "
             f"({cost['cost.prompt_tokens']:,} prompt tokens, {cost['cost.cached_prompt_tokens']:,} of them cached by the "
             f"provider{'' if share is None else f' = {share:.1%}'}; {cost['cost.completion_tokens']:,} completion)"
             + (" through the Batch API" if cost.get("cost.batch") else "")]
    if cost.get("cost.estimate_usd") is not None:
        lines.append(f"  estimated before the run: {usd(cost['cost.estimate_usd'])} ({cost.get('cost.tokenizer')})")
    if cost.get("cost.budget_usd") is not None:
        lines.append(f"  budget: {usd(cost['cost.budget_usd'])}")
    for m in metrics:
        if f"cost.{m}.usd" in cost:
            lines.append(f"  {m}: {usd(cost[f'cost.{m}.usd'])} ({cost[f'cost.{m}.billed_calls']:,} calls"
                         + (f", estimated {usd(cost[f'cost.{m}.estimate_usd'])}" if cost.get(f"cost.{m}.estimate_usd")
                            is not None else "") + ")")
    return lines + target_line(cost)
