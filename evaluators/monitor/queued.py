"""Rule rounds as jobs of the queue (PostgreSQL store: evaluators.run.queue), taken by any
``python -m evaluators worker``: the receiver (``monitor serve --judge-every S``) and ``monitor rule run --every S``
only queue one job per rule each round, and the workers decide and judge (the CLI registers the task, since the
engine is a layer above). A rule has at most one job waiting (the queueing lock), however many receivers queue it;
two jobs of one rule at work at once (one given again after its worker stopped, the next round's) share its traces
through the claims of evaluators.monitor.claims, so neither judges a trace the other has.
"""
from __future__ import annotations

import json
import threading

RULE_TASK = "evaluators.monitor_rule"


def rule_jobs(store, project: str | None = None, name: str | None = None) -> list[tuple[str, str, dict]]:
    """A job (task, queueing lock, args) for each rule asked for (every project's without ``project``)."""
    return [(RULE_TASK, f"{RULE_TASK}:{json.dumps([proj, rule['name']])}", {"project": proj, "rule": rule["name"]})
            for proj in ([project] if project else store.monitor_projects())
            for rule in store.monitor_rules(proj) if name in (None, rule["name"])]


def defer_rules(store, project: str | None = None, name: str | None = None) -> int:
    """Queue a round of each rule asked for (unless one waits already). Returns how many rules there were."""
    from evaluators.run.queue import defer_jobs, forget_succeeded

    jobs = rule_jobs(store, project, name)
    if jobs:
        defer_jobs(store, jobs)
        forget_succeeded(store, RULE_TASK)  # (a round's outcome is in its decisions: its job is kept no longer)
    return len(jobs)


class Deferrer(threading.Thread):
    """:func:`defer_rules` every ``interval`` seconds until :meth:`stop` (the receiver's, on PostgreSQL)."""

    def __init__(self, store, interval: float, on_error=None):
        super().__init__(name="monitor-rule-deferrer", daemon=True)
        self.store, self.interval, self.on_error = store, interval, on_error
        self._halt = threading.Event()

    def run(self) -> None:
        while True:
            try:
                defer_rules(self.store)
            except Exception as e:  # noqa: BLE001 — the store is down: the next round tries again
                if self.on_error:
                    self.on_error(e)
            if self._halt.wait(self.interval):
                return

    def stop(self) -> None:
        self._halt.set()
