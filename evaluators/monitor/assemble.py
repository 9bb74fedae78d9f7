"""Trace assembly: a trace is complete when its root span has ended and no span of it has come for its project's
quiet period; then its spans and log records are mapped (:func:`evaluators.monitor.mapping.map_trace`) to one row,
redacted (:mod:`evaluators.monitor.redact`) and stored with where each field came from; a conversation's traces make
a row of their own after its quiet period (:mod:`evaluators.monitor.conversations`). A trace whose root never comes is mapped as ``no_root`` after
``GIVE_UP_SECONDS`` of silence (a crashed app's traces are not kept open for ever).

Several receivers on one store may each run an assembler: a trace is stored mapped only while no span of it came
since it was read (``Store.save_mapped_trace``), and once.
"""
from __future__ import annotations

import datetime as dt
import threading

from evaluators.monitor.facts import trace_facts
from evaluators.monitor.conversations import assemble_conversations
from evaluators.monitor.mapping import map_trace
from evaluators.monitor.redact import redact_row
from evaluators.store.schema import utcnow

GIVE_UP_SECONDS = 600.0  # silence after which a trace without an ended root span is mapped as it is


def assemble_once(store, now: dt.datetime | None = None) -> int:
    """Map every trace that is due now. Returns how many were stored mapped."""
    now = now or utcnow()
    done = 0
    for project in store.monitor_projects():
        quiet = dt.timedelta(seconds=store.monitor_project(project)["quiet_seconds"])
        give_up = dt.timedelta(seconds=max(GIVE_UP_SECONDS, quiet.total_seconds()))
        while True:
            due = store.due_traces(project, now - quiet, now - give_up)
            stored = sum(_map_one(store, project, d) for d in due)
            done += stored
            if len(due) < 200 or not stored:  # a full page: more may be due (each mapped one leaves the list)
                break
        done += assemble_conversations(store, project, now)
    return done


def _map_one(store, project: str, due: dict) -> bool:
    spans, logs = store.trace_parts(project, due["trace_id"])
    completeness = "complete" if due["root_ended"] else "no_root"
    try:
        m = map_trace(spans, logs)
        kw = dict(fields=m.fields, sources=m.sources, content=m.content, hint=m.hint,
                  conversation_key=m.conversation_key)
    except Exception as e:  # noqa: BLE001 — a trace the mapping cannot read is kept, saying why, not retried for ever
        kw = dict(fields={}, sources={}, content=False, hint=f"the trace could not be mapped: {type(e).__name__}: {e}",
                  conversation_key=None)
        completeness = "unmapped"
    kw["facts"] = trace_facts(spans, logs, kw["fields"])  # what rules' filters read
    kw = redact_row(store, project, due["trace_id"], kw)  # before anything reaches a judge or the dashboard
    return store.save_mapped_trace(project, due["trace_id"], due["receipts"], completeness=completeness, **kw)


class Assembler(threading.Thread):
    """:func:`assemble_once` every ``interval`` seconds until :meth:`stop`; a failing store is tried again."""

    def __init__(self, store, interval: float = 1.0, on_error=None):
        super().__init__(name="monitor-assembler", daemon=True)
        self.store, self.interval, self.on_error = store, interval, on_error
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            try:
                assemble_once(self.store)
            except Exception as e:  # noqa: BLE001 — the store is down: the next round tries again
                if self.on_error:
                    self.on_error(e)

    def stop(self) -> None:
        self._halt.set()
