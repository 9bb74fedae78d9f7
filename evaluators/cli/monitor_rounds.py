"""A round of monitor rules (``python -m evaluators monitor rule run``): each rule's traces decided, then its pending
ones judged through the engine (api.prepare_run and the runner, a layer above evaluators.monitor, so handed to it
from here)."""
from __future__ import annotations

from evaluators.cli.text import say


def rule_round(store, project: str | None, name: str | None, since: str | None = None, queued: bool = False) -> int:
    """Decide and judge for each rule asked for (``since``: also the stored traces that started at or after that time,
    a backfill; ``queued``: as a queue worker's job); returns how many rules there were."""
    from evaluators.monitor.claims import judge_pending
    from evaluators.monitor.rules import decide
    from evaluators.monitor.serve import _ns

    n = 0
    for proj in [project] if project else store.monitor_projects():
        for rule in [r for r in store.monitor_rules(proj) if name in (None, r["name"])]:
            n += 1
            decided = decide(store, proj, rule, _ns(since, "--since"))
            done = judge_pending(store, proj, rule, RuleEngine(store, queued))
            if decided or done["judged"] or done["failed"] or done["over_budget"]:
                over = (f", {done['over_budget']:,} over budget (the day's budget of ${done['budget']:.4f} reached: "
                        f"${done['spent']:.4f} spent before this round; judging goes on tomorrow, UTC)"
                        if done["over_budget"] else "")
                say(f"rule {rule['name']!r} v{rule['version']} of {proj!r}: {decided:,} traces decided; "
                    f"{done['judged']:,} judged, {done['failed']:,} failed{over}", flush=True)
        alert_round(store, proj)
    return n


def alert_round(store, project: str | None) -> None:
    """Evaluate the alert rules of ``project`` (None: every project's) over what was just judged, in event time
    (evaluators.monitor.alerting), and say what fired or resolved."""
    from evaluators.monitor.alerting import evaluate_alerts

    for proj in [project] if project else store.monitor_projects():
        for e in evaluate_alerts(store, proj):
            say(f"alert {e['rule']!r} of {proj!r} {e['change']} (#{e['id']}): {e['text']}; delivery: {e['delivery']}"
                + (f" ({e['delivery_error']})" if e["delivery_error"] else ""), flush=True)


def round_or_defer(store, project: str | None, name: str | None) -> int:
    """`monitor rule run --every`'s round: on PostgreSQL a job of each rule queued for the workers (deduplicated: one
    waits at most), elsewhere the round itself, here. Returns how many rules there were."""
    from evaluators.run.queue import uses_queue

    if uses_queue(store):
        from evaluators.monitor.queued import defer_rules

        n = defer_rules(store, project, name)
        # the workers' rounds evaluate the alerts after judging; here too, so that a project whose traffic stopped
        # (no round to judge anything) still gets its no-traffic alert (an alert rule is held by one process at once)
        alert_round(store, project)
        return n
    return rule_round(store, project, name)


def rule_job(store, project: str, rule: str) -> None:
    """A queue worker's job: one rule's round (its latest version), judged with this worker's own key."""
    rule_round(store, project, rule, queued=True)


def register_jobs() -> None:
    """Let this process's queue workers take the rules' rounds (run.queue cannot import the monitor, a layer up)."""
    from evaluators.monitor.queued import RULE_TASK
    from evaluators.run.queue import add_task

    add_task(RULE_TASK, rule_job)


class RuleEngine:
    """The engine's run over a rule's batch (api.prepare_run, then the runner: the judge client, cache, retries, rate
    limits), for :func:`evaluators.monitor.claims.judge_pending`. The judge's key is this process's: the variable the
    rule names, read from its own environment when the batch runs (never through the queue or the store).

    A queue worker (``queued``) sends that key to a judge given by URL only if it was started with that URL and that
    key (``worker --judge-base-url URL --judge-api-key-env VAR``), as it does for submitted runs: a rule is written
    in the shared store, and must not be able to send a worker's key to a server of its choosing."""

    def __init__(self, store, queued: bool = False):
        self.store, self.queued = store, queued

    def prepare(self, rows, rule) -> str:
        from evaluators.api import prepare_run
        from evaluators.monitor.rules import run_cost

        return prepare_run(self.store, rows, rule["metrics"], rule["judge"], resume=False, cost=run_cost(rule),
                           name=f"monitor · {rule['project']} · {rule['name']} v{rule['version']}")

    def run(self, run_id: str, rule) -> None:
        import os

        from evaluators.core.errors import UsageError
        from evaluators.run.runner import Runner

        key = None
        if rule["key_env"]:
            key = os.environ.get(rule["key_env"])
            if not key:
                raise UsageError(f"the rule's judge key variable {rule['key_env']} is not set here")
            url = ((rule["judge"] or {}).get("base_url") or "").rstrip("/")
            if self.queued and url:
                from evaluators.run.queue import URL_KEYS

                if URL_KEYS.get(url) != key:
                    raise UsageError(f"this worker sends {rule['key_env']} only to a judge URL it was started with "
                                     f"for it: python -m evaluators worker --judge-base-url {url} "
                                     f"--judge-api-key-env {rule['key_env']}")
        Runner(self.store, run_id, api_key=key, take_over=True).run()  # (this process holds the batch's claim)
