"""Judging a rule's pending traces in claimed batches (the store's side: evaluators.store.monitor_claims).

Every process that judges (a queue worker's job on PostgreSQL, `monitor rule run` in-process on either store) goes
through here, so any number of them may work on one rule at once: each claims a batch of free pending traces,
makes it one run of the engine, binds the claim to the run, runs it, and turns its own traces from pending to
judged or failed. A batch whose worker died (its runner silent ``RUN_STALE``) is taken over and its run resumed:
what the dead worker stored stays, what it had in flight is asked again, and no trace is judged in two runs.
The engine is handed in from above (api is a layer higher): ``prepare(rows, rule) -> run id`` stores the batch's
run (with :func:`evaluators.monitor.rules.run_cost`: the rule's prices and what is left of its day's budget),
``run(run_id, rule)`` runs (or resumes) it to its end with this process's own key.

A batch holds traces of one shape: rows holding a conversation (a conversation's row, or a trace whose model call
had several turns) and single turns go in runs of their own (the engine takes a dataset of one shape; mixed, it
refused the whole batch). With a daily budget, a batch's run may spend what is left of the day's; once nothing is
left, the free pending traces are ``over_budget``, and so are those a run stopped at its budget did not reach.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from evaluators.monitor.rules import ROW_FIELDS, spent_today
from evaluators.run.budget import STOPPED_BUDGET
from evaluators.store.schema import utcnow

BATCH = 500  # traces a claim takes at most: several workers share a rule's backlog a batch at a time
# A batch's runner beats every 0.25 s (run.runner.FLUSH_SECONDS); silent this long, its worker is taken for dead.
# A job is given back once its worker's beat (every 1 s) is 6 s old (run.queue.STALLED), when its run's last beat
# is at least 5 s old: under that, so the job given back finds its run free; over the 0.25 s by a wide margin,
# so that a store slow to take a write does not make a live batch look dead.
RUN_STALE = dt.timedelta(seconds=4)
CLAIM_STALE = dt.timedelta(seconds=60)  # a claim not bound to its run this long: its worker died making the run


class Engine(Protocol):
    def prepare(self, rows: list[dict], rule: dict[str, Any]) -> str: ...

    def run(self, run_id: str, rule: dict[str, Any]) -> None: ...


def judge_pending(store, project: str, rule: dict[str, Any], engine: Engine, batch: int | None = None,
                  now: dt.datetime | None = None) -> dict[str, Any]:
    """Judge the rule version's pending traces: first the batches whose worker died, then free ones, a claimed
    batch at a time, until none is left (or the day's budget is spent).

    Returns:
        {"judged": n, "failed": m, "over_budget": k} written by this process, and with a budget "budget" and
        "spent" (USD today, before this round's calls); ``now``: the time whose UTC day the budget counts.
    """
    name, version = rule["name"], rule["version"]
    done: dict[str, Any] = {"judged": 0, "failed": 0, "over_budget": 0}
    budget = rule.get("budget_per_day")
    if budget is not None:
        done["budget"], done["spent"] = budget, spent_today(store, project, rule, now)
    for rid, finished in store.orphaned_claims(project, name, version, RUN_STALE):
        if finished or store.take_over_run(rid, RUN_STALE):
            _add(done, _run_and_settle(store, project, rule, engine, rid, run_it=not finished))
    while True:
        this = rule
        if budget is not None:
            left = budget - spent_today(store, project, rule, now)
            if left <= 0:  # (what another worker holds is its to end)
                _add(done, store.settle_free_pending(project, name, version, "over_budget"))
                return done
            this = {**rule, "budget_left": left}
        token, claimed = store.claim_pending(project, name, version, batch or BATCH, CLAIM_STALE)
        if not claimed:
            return done
        talks = [t for t in claimed if (t["fields"] or {}).get("conversation")]
        parts = [(token, claimed)]
        if talks and len(talks) < len(claimed):  # two shapes: the conversations under a claim of their own
            parts = [(token, [t for t in claimed if t not in talks]),
                     (store.split_claim(project, name, version, token, [t["trace_id"] for t in talks]), talks)]
        for tok, traces in parts:
            _judge_batch(store, project, this, engine, tok, traces, done)


def _judge_batch(store, project: str, rule: dict[str, Any], engine: Engine, token: str, claimed: list[dict],
                 done: dict[str, Any]) -> None:
    """One claimed batch of one shape as one run: made, bound to the claim, run, settled."""
    name, version = rule["name"], rule["version"]
    rows = [{k: t["fields"][k] for k in ROW_FIELDS if (t["fields"] or {}).get(k) not in (None, "", [])}
            for t in claimed]
    try:
        rid = engine.prepare(rows, rule)
    except Exception as e:  # noqa: BLE001 — the run could not be made (a metric the rows lack): each says why
        _add(done, store.settle_claimed(project, name, version, token, [
            {"trace_id": t["trace_id"], "decision": "failed", "error": str(e)} for t in claimed]))
        return
    if not store.bind_claim(project, name, version, token, rid, [t["trace_id"] for t in claimed]):
        store.update_run(rid, status="failed", error="its traces were claimed by another worker meanwhile")
        store.release_claim(project, name, version, token)
        return
    _add(done, _run_and_settle(store, project, rule, engine, rid, run_it=True))


def _run_and_settle(store, project: str, rule: dict[str, Any], engine: Engine, rid: str,
                    run_it: bool) -> dict[str, int]:
    """Run (or resume) a bound batch's run, then write each of its traces' outcome: failed where a result is an
    error or the row has none (the run ended first, or could not start: its error), judged otherwise."""
    error = None
    if run_it:
        try:
            engine.run(rid, rule)
        except Exception as e:  # noqa: BLE001 — the judge refused, the key is not set here: each trace says why
            error = str(e) or type(e).__name__
    run = store.get_run(rid)
    if run["finished_at"] is None:  # (it never started: it ends here, failed, with the reason)
        store.update_run(rid, status="failed", error=(error or "not run")[:2000], finished_at=utcnow())
    errors = store.run_row_errors(rid)
    ended = error or run["error"] or f"not judged: its run ended {run['status']}"
    # a run stopped at its budget leaves the calls it did not send unasked: their rows were not (wholly) judged
    stopped = run["status"] == "stopped" and (run.get("error") or "").startswith(STOPPED_BUDGET)
    got = store.rows_with_results(rid) if stopped else {}
    outcomes = []
    for tid, i in store.claimed_rows(project, rule["name"], rule["version"], rid):
        if stopped and not set(rule["metrics"]) <= got.get(i, set()):
            outcomes.append({"trace_id": tid, "decision": "over_budget"})
        elif i in errors and errors[i] is None:
            outcomes.append({"trace_id": tid, "decision": "judged"})
        else:
            outcomes.append({"trace_id": tid, "decision": "failed", "error": errors.get(i) or ended})
    return store.settle_claimed(project, rule["name"], rule["version"], rid, outcomes)


def _add(total: dict[str, Any], part: dict[str, int]) -> None:
    for k in ("judged", "failed", "over_budget"):
        total[k] += part.get(k, 0)
