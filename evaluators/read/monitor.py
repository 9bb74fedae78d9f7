"""What the Monitoring page reads of a project's production traces: its traffic, one page of its trace list and one
trace opened. Every figure is computed in the database; a page reads one page of rows, never the project's.

The list is newest first by arrival (``first_seen``: set when a trace's first span or record arrives, never null,
kept when more arrive) and pages by key (arrival, trace id), never by offset, on the index of migration 0008. A
filter that the index cannot answer (a state, a rule's decision, text in the query or response) is checked on at
most :data:`SCAN` traces a page, newest first: a page of a rare filter over a million traces costs what a page of a
common one does, and says how far back it looked (``looked_to``), the next page going on from there.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, exists, func, literal, or_, select, tuple_

from evaluators.store.monitor_rules import DECISIONS, MonitorDecisionRow
from evaluators.store.schema import ResultRow
from evaluators.store.traces import MonitorLogRow, MonitorSpanRow, MonitorTraceRow

PAGE = 50
SCAN = 10_000  # traces a filtered page looks through at most (bench/monitor_page.py: text, 0.1-0.3 s on SQLite)
STATES = ("open", "mapped", "no_content", "late")  # what the list's state filter offers
PREVIEW = 300  # characters of a query or response in the list
RARE = 20_000  # a decision of at most this many traces is read from its index first, not looked up trace by trace


@dataclass(frozen=True)
class TraceFilter:
    """What the list keeps: traces that arrived in [since, until), that started (their event time, ns) in
    [started_from, started_until) (a window of the traffic chart, whose bars count traces by start), in a state,
    with a decision of a rule (its latest version), holding ``text`` in their query or response (case-insensitive)."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    started_from: int | None = None
    started_until: int | None = None
    state: str | None = None
    rule: str | None = None
    rule_version: int | None = None
    decision: str | None = None
    text: str = ""
    model: str | None = None  # the slice of the page (evaluators.read.monitor_traffic.Slice), on the traces' columns
    service: str | None = None
    version: str | None = None
    span: str = ""  # a span of this name
    metric: str | None = None  # with score_at_most: a judged score of this metric at most that value
    score_at_most: float | None = None

    def residual(self) -> bool:
        """Whether the filter has a part the list's index cannot answer."""
        return bool(self.state or (self.rule and self.decision) or self.text.strip() or self.model or self.service
                    or self.version or self.span.strip() or (self.metric and self.score_at_most is not None))


def traffic(store, project: str) -> dict[str, Any]:
    """The project's traffic: ``traces`` (received, open, mapped, no content, no root, late, spans:
    ``store.trace_counts``) and ``rules``: each rule's latest version (name, version, metrics, sample rate) with
    its decisions' counts (every decision named, 0 where none)."""
    counts = store.decision_counts(project)
    rules = [{"name": r["name"], "version": r["version"], "metrics": list(r["metrics"]),
              "sample_rate": r["sample_rate"], "decisions": counts.get(r["name"], {k: 0 for k in DECISIONS})}
             for r in store.monitor_rules(project)]
    return {"traces": store.trace_counts(project), "rules": rules}


def _rare(s, project: str, f: TraceFilter) -> bool:
    """Whether at most :data:`RARE` traces have the filter's decision (counted on the index, at most RARE + 1)."""
    if not (f.rule and f.decision):
        return False
    d = MonitorDecisionRow
    some = (select(d.trace_id).where(d.project == project, d.rule == f.rule, d.rule_version == f.rule_version,
                                     d.decision == f.decision).limit(RARE + 1).subquery())
    return s.scalar(select(func.count()).select_from(some)) <= RARE


def _residual(t, project: str, f: TraceFilter, rare: bool) -> list:
    out = []
    if f.state == "open":
        out.append(t.status == "open")
    elif f.state == "mapped":
        out.append(t.status == "mapped")
    elif f.state == "no_content":
        out.append(and_(t.status == "mapped", t.content.is_(False)))
    elif f.state == "late":
        sp = MonitorSpanRow
        out.append(exists().where(sp.project == project, sp.trace_id == t.trace_id, sp.late.is_(True)))
    if f.rule and f.decision:
        d = MonitorDecisionRow
        of = (d.project == project, d.rule == f.rule, d.rule_version == f.rule_version, d.decision == f.decision)
        if rare:  # the few traces so decided, read once from the decisions' index, each trace checked in memory
            out.append(t.trace_id.in_(select(d.trace_id).where(*of)))
        else:  # most traces: each one looked up in the decisions' key
            out.append(exists().where(d.trace_id == t.trace_id, *of))
    for value, column in ((f.model, t.model), (f.service, t.service), (f.version, t.service_version)):
        if value is not None:
            out.append(column == value)
    if f.span.strip():  # a span of that name: looked up in the trace's own spans (their key starts with it)
        sp = MonitorSpanRow
        out.append(exists().where(sp.project == project, sp.trace_id == t.trace_id, sp.name == f.span.strip()))
    if f.metric and f.score_at_most is not None:  # a rule judged it, and the metric's score is at most the value
        d, r = MonitorDecisionRow, ResultRow
        out.append(exists().where(d.project == project, d.trace_id == t.trace_id, d.decision == "judged",
                                  r.run_id == d.run_id, r.row_idx == d.row_idx, r.metric == f.metric, r.turn == 0,
                                  r.status == "ok", r.value <= f.score_at_most))
    text = f.text.strip()
    if text:
        out.append(or_(t.fields["query"].as_string().icontains(text, autoescape=True),
                       t.fields["response"].as_string().icontains(text, autoescape=True)))
    return out


def trace_page(store, project: str, f: TraceFilter = TraceFilter(), before: tuple[dt.datetime, str] | None = None,
               limit: int = PAGE) -> dict[str, Any]:
    """One page of the project's traces, newest first.

    Args:
        before: the key (first_seen, trace_id) the page starts after (the ``next`` of the page before); None: the
            newest.
    Returns:
        ``rows`` (trace_id, first_seen, start_ns, status, content, completeness, query and response cut to
        :data:`PREVIEW` characters, model, and ``decisions``: rule -> decision of its latest version); ``next``:
        the key to ask the next page with, None at the end; ``looked_to``: with a filter the index cannot answer,
        the key of the oldest trace this page looked through when it stopped short of the end (None otherwise).
    """
    t = MonitorTraceRow
    key = tuple_(t.first_seen, t.trace_id)
    where = [t.project == project]
    if f.since is not None:
        where.append(t.first_seen >= f.since)
    if f.until is not None:
        where.append(t.first_seen < f.until)
    if f.started_from is not None:  # on the index of migration 0011 (project, start_ns)
        where.append(t.start_ns >= f.started_from)
    if f.started_until is not None:
        where.append(t.start_ns < f.started_until)
    if before is not None:
        where.append(key < tuple_(literal(before[0], t.first_seen.type), literal(before[1])))
    order = (t.first_seen.desc(), t.trace_id.desc())
    floor = None
    with store.session() as s:
        if f.residual():
            # the oldest trace of the SCAN newest: an index walk, no row read
            floor = s.execute(select(t.first_seen, t.trace_id).where(*where).order_by(*order)
                              .offset(SCAN - 1).limit(1)).first()
            if floor is not None:
                where.append(key >= tuple_(literal(floor[0], t.first_seen.type), literal(floor[1])))
            where += _residual(t, project, f, _rare(s, project, f))
        got = s.execute(select(t.trace_id, t.first_seen, t.start_ns, t.status, t.content, t.completeness,
                               t.fields["query"].as_string().label("query"),
                               t.fields["response"].as_string().label("response"),
                               t.fields["model"].as_string().label("model"))
                        .where(*where).order_by(*order).limit(limit + 1)).all()
    rows = [dict(r._mapping) for r in got[:limit]]
    for r in rows:
        for k in ("query", "response"):
            if r[k] and len(r[k]) > PREVIEW:
                r[k] = r[k][:PREVIEW] + "…"
    if len(got) > limit:
        nxt, looked = (rows[-1]["first_seen"], rows[-1]["trace_id"]), None
    elif floor is not None:
        nxt = looked = (floor[0], floor[1])
    else:
        nxt = looked = None
    _decisions_of(store, project, rows)
    return {"rows": rows, "next": nxt, "looked_to": looked}


def _decisions_of(store, project: str, rows: list[dict]) -> None:
    """Each row's ``decisions``: rule -> its latest version's decision of the trace (one query for the page)."""
    latest = {r["name"]: r["version"] for r in store.monitor_rules(project)}
    for r in rows:
        r["decisions"] = {}
    if not rows or not latest:
        return
    d = MonitorDecisionRow
    by_id = {r["trace_id"]: r for r in rows}
    with store.session() as s:
        got = s.execute(select(d.trace_id, d.rule, d.rule_version, d.decision).where(
            d.project == project, d.trace_id.in_(list(by_id)), d.rule.in_(list(latest)))).all()
    for tid, rule, version, decision in got:
        if latest.get(rule) == version:
            by_id[tid]["decisions"][rule] = decision


MAX_TRACE_RECORDS = 2_000  # spans, and log records, read for one trace's conversation view


def trace_telemetry(store, project: str, trace_id: str) -> tuple[list[dict], list[dict], bool]:
    """One trace's spans and log records as the receiver normalized them (``evaluators.monitor.otlp``), by start
    and time, for the trace view of its turns and tool calls; at most :data:`MAX_TRACE_RECORDS` of each (the
    third value: whether any were left out). Raw: what the app sent, before any redaction."""
    sp, lg = MonitorSpanRow, MonitorLogRow
    with store.session() as s:
        spans = s.execute(select(sp.data).where(sp.project == project, sp.trace_id == trace_id)
                          .order_by(sp.start_ns, sp.span_id).limit(MAX_TRACE_RECORDS + 1)).scalars().all()
        logs = s.execute(select(lg.data).where(lg.project == project, lg.trace_id == trace_id)
                         .order_by(lg.time_ns, lg.digest).limit(MAX_TRACE_RECORDS + 1)).scalars().all()
    cut = len(spans) > MAX_TRACE_RECORDS or len(logs) > MAX_TRACE_RECORDS
    return list(spans[:MAX_TRACE_RECORDS]), list(logs[:MAX_TRACE_RECORDS]), cut


def trace_detail(store, project: str, trace_id: str) -> dict[str, Any] | None:
    """One trace, opened: its row (``fields``, ``sources``, state, content and hint), its ``spans`` (name, start,
    duration in ms, status code and message, late) by start, and ``rules``: per rule of the project (latest
    version) its ``decision`` (None: not decided yet), ``error``, and for a judged trace its ``scores`` (metric,
    status, value, outputs, reason, error) read from the run and row the decision points to. None if the project
    has no such trace."""
    t, sp, d = MonitorTraceRow, MonitorSpanRow, MonitorDecisionRow
    with store.session() as s:
        row = s.execute(select(t.trace_id, t.first_seen, t.last_seen, t.start_ns, t.status, t.content, t.hint,
                               t.completeness, t.mapped_at, t.fields, t.sources, t.conversation_key)
                        .where(t.project == project, t.trace_id == trace_id)).first()
        if row is None:
            return None
        spans = s.execute(select(sp.span_id, sp.parent_span_id, sp.name, sp.start_ns, sp.end_ns, sp.late,
                                 sp.data["status_code"].as_integer().label("status_code"),
                                 sp.data["status_message"].as_string().label("status_message"))
                          .where(sp.project == project, sp.trace_id == trace_id)
                          .order_by(sp.start_ns, sp.span_id)).all()
        decided = s.execute(select(d.rule, d.rule_version, d.decision, d.error, d.run_id, d.row_idx, d.decided_at)
                            .where(d.project == project, d.trace_id == trace_id)).all()
    out = dict(row._mapping)
    out["spans"] = [{**dict(x._mapping), "duration_ms": max(0, (x.end_ns or 0) - (x.start_ns or 0)) / 1e6}
                    for x in spans]
    mine = {(x.rule, x.rule_version): x for x in decided}
    out["rules"] = []
    for rule in store.monitor_rules(project):
        x = mine.get((rule["name"], rule["version"]))
        entry = {"name": rule["name"], "version": rule["version"], "sample_rate": rule["sample_rate"],
                 "metrics": list(rule["metrics"]), "decision": None if x is None else x.decision,
                 "error": None if x is None else x.error, "decided_at": None if x is None else x.decided_at,
                 "scores": []}
        if x is not None and x.run_id and x.row_idx is not None:
            entry["scores"] = [{"metric": r.metric, "turn": r.turn, "status": r.status, "value": r.value,
                                "outputs": r.outputs, "reason": r.reason, "error": r.error}
                               for r in store.results_of_rows(x.run_id, [x.row_idx])]
        out["rules"].append(entry)
    return out
