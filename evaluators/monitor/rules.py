"""Judging production traces by rules (``python -m evaluators monitor rule``).

Sampling is a pure function of the trace id: a trace is sampled by a rule when :func:`sample_point` of its id
falls under the rule's rate. Every rule of every project uses the same point, so two rules at 10% judge the same
traces (their scores compare row by row) and a rule at 20% judges a superset of one at 10%.

Each mapped trace gets a decision per rule version (:mod:`evaluators.store.monitor_rules`), the first that applies,
in this order: ``filtered_out`` (the rule's filter, :mod:`evaluators.monitor.filters`, is false on the trace's
facts), ``sampled_out``, ``no_content`` (sampled, but the app captured no content to judge), ``over_hourly_cap``
(the rule already admitted its ``max_per_hour`` traces in an hour around this one's arrival), else ``pending``.
Judging then makes it ``judged`` (its scores in the engine's run and row), ``failed`` (the error) or
``over_budget`` (the rule's judge calls of the day, UTC, reached its ``budget_per_day``). Judging goes through the
engine that exists (the judge client, its cache, retries, rate limits and a run's budget), in claimed batches
(:func:`evaluators.monitor.claims.judge_pending`), the engine handed in from above.

A rule version decides the traces mapped after it was made; ``since`` (``rule run --since``) adds the older
stored traces that started at or after a time (a backfill).
"""
from __future__ import annotations

import bisect
import datetime as dt
import hashlib
from typing import Any, Callable

from evaluators.monitor.filters import matches, parse_filter
from evaluators.run.budget import spec_prices, tally_billing
from evaluators.run.spec import RunSpec
from evaluators.store.schema import utcnow

# The fields of a mapped trace a judge may read (the dataset's canonical names), passed to the engine as a row.
ROW_FIELDS = ("query", "response", "context", "conversation", "tool_calls", "tool_definitions", "ground_truth")
HOUR = dt.timedelta(hours=1)


def sample_point(trace_id: str) -> float:
    """Where a trace falls in [0, 1): SHA-256 of its hex id, so ids that are not random (a counter) spread too."""
    return int.from_bytes(hashlib.sha256(trace_id.lower().encode()).digest()[:8], "big") / 2**64


def has_content(t: dict[str, Any]) -> bool:
    return t["content"] is not False and bool((t["fields"] or {}).get("response"))


def _cap_admits(times: list[dt.datetime], at: dt.datetime, cap: int) -> bool:
    """Whether one more trace arriving ``at`` keeps every hour-long window (x - 1 h, x] holding it within ``cap``
    admitted traces. Only the windows ending at ``at`` or at an admitted arrival in the hour after it can hold the
    most (traces decided out of order, a backfill, have later ones already admitted)."""
    ends = [at] + times[bisect.bisect_right(times, at):bisect.bisect_left(times, at + HOUR)]
    return all(bisect.bisect_right(times, x) - bisect.bisect_right(times, x - HOUR) + 1 <= cap for x in ends)


def decide(store, project: str, rule: dict[str, Any], since_ns: int | None = None) -> int:
    """Give every trace this rule version is to decide (mapped since the version was made; with ``since_ns``,
    also the older ones that started at or after it, in nanoseconds since the epoch) its first decision.
    Returns how many."""
    todo = store.undecided_traces(project, rule["name"], rule["version"], rule["created_at"], since_ns)
    tree = parse_filter(rule["filter"]) if rule.get("filter") else None
    cap = rule.get("max_per_hour")
    admitted: list[tuple] = []
    if cap is not None and todo:
        admitted = store.admitted_times(project, rule["name"], min(t["mapped_at"] for t in todo) - HOUR,
                                        max(t["mapped_at"] for t in todo) + HOUR)
    times, counted = [a for a, _ in admitted], {tid for _, tid in admitted}  # (another version's count too)
    out = []
    for t in todo:
        if tree is not None and not matches(tree, t["facts"]):
            decision = "filtered_out"
        elif sample_point(t["trace_id"]) >= rule["sample_rate"]:
            decision = "sampled_out"
        elif not has_content(t):
            decision = "no_content"
        elif cap is not None and t["trace_id"] not in counted and not _cap_admits(times, t["mapped_at"], cap):
            decision = "over_hourly_cap"
        else:
            decision = "pending"
            if cap is not None and t["trace_id"] not in counted:
                bisect.insort(times, t["mapped_at"])
                counted.add(t["trace_id"])
        out.append({"trace_id": t["trace_id"], "decision": decision})
    store.add_first_decisions(project, rule["name"], rule["version"], out)  # (one decided at once elsewhere stays)
    return len(out)


def add_rule(store, project: str, name: str, metrics: list[str], sample_rate: float, judge: dict[str, Any],
             key_env: str | None = None, *, filter: str | None = None, max_per_hour: int | None = None,
             budget_per_day: float | None = None, prices: dict | None = None) -> int:
    """Check then store a rule (``monitor rule add`` and the Monitoring page's form): each metric known, the filter
    readable (refused saying where), a daily budget only with the judge model's price (``prices``, snapshotted
    from the operator's prices.toml or given). Returns its version (a changed rule is a new one)."""
    from evaluators.core.errors import UsageError
    from evaluators.core.registry import get_metric
    from evaluators.judge.prices import price_for

    metrics = [m.strip() for m in metrics if m.strip()]
    for m in metrics:
        get_metric(m)  # an unknown metric is refused now, not when the rule runs
    if filter is not None and filter.strip():
        parse_filter(filter)
    else:
        filter = None
    model = (judge or {}).get("model")
    if budget_per_day is not None and price_for(model, prices) is None:
        raise UsageError(f"--budget-per-day needs the price of the judge model '{model}': give --price "
                         "INPUT,CACHED,OUTPUT or list it in prices.toml")
    return store.add_monitor_rule(project, name.strip(), metrics, sample_rate, judge, key_env or None, filter=filter,
                                  max_per_hour=max_per_hour, budget_per_day=budget_per_day, prices=prices)


def day_start(now: dt.datetime | None = None) -> dt.datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def spent_today(store, project: str, rule: dict[str, Any], now: dt.datetime | None = None) -> float:
    """USD the rule's judge calls cost since the UTC day began (its runs made since, every version's), counted as
    a run's cost is (:func:`evaluators.run.budget.tally_billing` at the run's prices). A run whose calls have no
    price counts as past any budget: a budget that cannot be counted stops judging."""
    total = 0.0
    for run in store.rule_runs_since(project, rule["name"], day_start(now)):
        spec = RunSpec.from_dict(run["spec"])
        spent, _ = tally_billing(store.billing(run["id"]), spec_prices(spec), spec.judge.model if spec.judge else None)
        total += float("inf") if spent.usd is None else spent.usd
    return total


def run_cost(rule: dict[str, Any]) -> dict[str, Any]:
    """The engine's ``cost`` settings for a round of the rule (``prepare_run``'s): its prices and what is left of
    its day's budget (``budget_left``, set by :func:`evaluators.monitor.claims.judge_pending`)."""
    return {"prices": rule.get("prices") or {}, "budget": rule.get("budget_left")}


FORECAST_SAMPLE = 2000  # the latest traces a forecast reads for the filter's share and the content's
FORECAST_ROWS = 50  # of which it renders this many judge prompts (the engine's estimate) for tokens a trace


def forecast(store, project: str, rule: dict[str, Any], estimate: Callable[[list[dict], dict], dict],
             traces_per_hour: float | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """What a rule would cost a day: traces a day (the last day's, or ``traces_per_hour`` x 24) x the sample rate x
    the filter's share and the share with content (over the latest traces) x USD a judged trace (the engine's
    estimate over some of them: prompts counted with the judge model's tokenizer, at the rule's or the operator's
    price); then held to the hourly cap and the daily budget.

    Args:
        estimate: (rows, rule) -> ``api.estimate_run``'s dict for those rows (handed in from above).
    Returns:
        traces_per_day, measured_from ("last day" or "given"), sample_rate, filter_share, content_share (None
        where no trace to measure), judged_per_day, capped_by ("hourly cap" or None), calls_per_trace,
        tokens_per_trace, usd_per_trace, usd_per_day (None without a price or a trace to measure), budget_per_day,
        why (what could not be worked out, or "").
    """
    now = now or utcnow()
    day = store.mapped_traces_since(project, now - dt.timedelta(days=1), FORECAST_SAMPLE)
    sample = day["traces"] or store.mapped_traces_since(project, None, FORECAST_SAMPLE)["traces"]
    given = traces_per_hour is not None
    out: dict[str, Any] = {"traces_per_day": traces_per_hour * 24 if given else day["count"],
                           "measured_from": "given" if given else "last day", "sample_rate": rule["sample_rate"],
                           "budget_per_day": rule.get("budget_per_day"), "why": ""}
    tree = parse_filter(rule["filter"]) if rule.get("filter") else None
    kept = [t for t in sample if tree is None or matches(tree, t["facts"])]
    eligible = [t for t in kept if t["content"] is not False]
    out["filter_share"] = (len(kept) / len(sample) if sample else None) if tree is not None else 1.0
    out["content_share"] = len(eligible) / len(kept) if kept else None
    judged = out["traces_per_day"] * rule["sample_rate"] * (out["filter_share"] or 0) * (out["content_share"] or 0)
    out["capped_by"] = None
    if rule.get("max_per_hour") is not None and judged > 24 * rule["max_per_hour"]:
        judged, out["capped_by"] = 24 * rule["max_per_hour"], "hourly cap"
    out["judged_per_day"] = judged
    out.update(calls_per_trace=None, tokens_per_trace=None, usd_per_trace=None, usd_per_day=None)
    rows = [r for r in store.trace_rows(project, [t["trace_id"] for t in eligible[:FORECAST_ROWS]])]
    rows = [{k: f[k] for k in ROW_FIELDS if f.get(k) not in (None, "", [])} for f in rows]
    if not rows:
        out["why"] = "no stored trace with content matches the rule: nothing to measure a judge prompt on"
        return out
    try:
        est = estimate(rows, rule)
    except Exception as e:  # noqa: BLE001 — said, not raised: the rule is still added
        out["why"] = f"the engine's estimate failed: {e}"
        return out
    calls = est["judge_calls"] + est["cached"]
    if not est["judge_calls"]:
        out["why"] = "every prompt of the traces measured is in the judge's cache: no prompt size to go by"
        return out
    per_call = est["prompt_tokens"] / est["judge_calls"]
    out["calls_per_trace"] = calls / len(rows)
    out["tokens_per_trace"] = out["calls_per_trace"] * (per_call + est["completion_tokens"] / est["judge_calls"])
    if est["usd"] is None:
        out["why"] = "no price for the judge model (give --price or list it in prices.toml)"
        return out
    out["usd_per_trace"] = est["usd"] / est["judge_calls"] * out["calls_per_trace"]
    out["usd_per_day"] = judged * out["usd_per_trace"]
    return out
