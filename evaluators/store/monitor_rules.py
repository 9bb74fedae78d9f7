"""Monitoring's rules and their decisions (``python -m evaluators monitor rule``): a rule names metrics, a judge and
a sample rate for a project, and maybe a filter, an hourly cap and a daily budget; a changed rule is a new version.
Every mapped trace gets one decision per rule version, stored (:data:`DECISIONS`; evaluators/monitor/rules.py says
when each is given): ``judged`` ones keep their scores' run ``run_id`` and row ``row_idx``, ``failed`` ones the
error."""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, String, Text, func, or_, select
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.store.schema import Base, ResultRow, RunRow, utcnow
from evaluators.store.traces import MonitorTraceRow

DECISIONS = ("filtered_out", "sampled_out", "over_hourly_cap", "over_budget", "no_content", "pending", "judged",
             "failed")
ADMITTED = ("pending", "judged", "failed")  # decisions that count against a rule's hourly cap


class MonitorRuleRow(Base):
    __tablename__ = "monitor_rules"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    metrics: Mapped[list] = mapped_column(JSON)
    sample_rate: Mapped[float] = mapped_column(Float)
    judge: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # JudgeConfig.for_storage(): never a key
    key_env: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the NAME of the key's variable
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    filter: Mapped[str | None] = mapped_column(Text, nullable=True)  # evaluators.monitor.filters' expression
    max_per_hour: Mapped[int | None] = mapped_column(Integer, nullable=True)  # traces judged in any hour, at most
    budget_per_day: Mapped[float | None] = mapped_column(Float, nullable=True)  # USD of judge calls a UTC day
    prices: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # model -> price, the budget's (as a run's)


class MonitorDecisionRow(Base):
    __tablename__ = "monitor_decisions"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    rule: Mapped[str] = mapped_column(String(200), primary_key=True)
    rule_version: Mapped[int] = mapped_column(Integer, primary_key=True)
    decision: Mapped[str] = mapped_column(String(20))  # DECISIONS
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    row_idx: Mapped[int | None] = mapped_column(Integer, nullable=True)
    decided_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # the trace's start (its monitor_traces.start_ns, copied when the decision is stored: migration 0011), so a
    # window's decisions are counted from this table's index alone
    start_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # counts, and the traces of a rare decision (migration 0008)
    __table_args__ = (Index("ix_monitor_decisions_rule", "project", "rule", "rule_version", "decision", "trace_id"),
                      # what alerts read each round: a rule's decisions since the last (migration 0010)
                      Index("ix_monitor_decisions_decided", "project", "rule", "decided_at"),
                      # a rule's decisions by their traces' start, for the reads over time (migration 0011)
                      Index("ix_monitor_decisions_time", "project", "rule", "start_ns", "decision"))


RULE_FIELDS = ("metrics", "sample_rate", "judge", "key_env", "filter", "max_per_hour", "budget_per_day", "prices")


class MonitorRulesMixin:
    """Rules' and decisions' reads and writes of :class:`evaluators.store.store.Store`."""

    def add_monitor_rule(self, project: str, name: str, metrics: list[str], sample_rate: float,
                         judge: dict | None, key_env: str | None = None, *, filter: str | None = None,
                         max_per_hour: int | None = None, budget_per_day: float | None = None,
                         prices: dict | None = None) -> int:
        """Store a rule; the same settings as its latest version keep that version, others make the next.
        ``filter`` is stored as given (evaluators.monitor.rules checks it first). Returns the version."""
        if self.monitor_project(project) is None:
            raise UsageError(f"no project {project!r} (monitor token create --project NAME makes one)")
        if not 0 <= sample_rate <= 1:
            raise UsageError(f"--sample-rate is a share from 0 to 1, not {sample_rate}")
        if not metrics:
            raise UsageError("a rule needs at least one metric (--metrics)")
        if max_per_hour is not None and not (isinstance(max_per_hour, int) and max_per_hour >= 0):
            raise UsageError(f"--max-per-hour is a number of traces, 0 or more, not {max_per_hour}")
        if budget_per_day is not None and not 0 <= budget_per_day < float("inf"):
            raise UsageError(f"--budget-per-day is USD, 0 or more, not {budget_per_day}")
        new = {"metrics": list(metrics), "sample_rate": float(sample_rate), "judge": judge, "key_env": key_env,
               "filter": filter, "max_per_hour": max_per_hour,
               "budget_per_day": None if budget_per_day is None else float(budget_per_day), "prices": prices or None}
        latest = self.monitor_rule(project, name)
        if latest is not None and all(latest[k] == new[k] for k in RULE_FIELDS):
            return latest["version"]
        version = (latest["version"] + 1) if latest else 1
        with self.session() as s:
            s.add(MonitorRuleRow(project=project, name=name, version=version, **new))
            s.commit()
        return version

    def monitor_rule(self, project: str, name: str) -> dict[str, Any] | None:
        """A rule's latest version."""
        with self.session() as s:
            r = s.scalars(select(MonitorRuleRow).where(MonitorRuleRow.project == project, MonitorRuleRow.name == name)
                          .order_by(MonitorRuleRow.version.desc())).first()
            return None if r is None else {c.name: getattr(r, c.name) for c in MonitorRuleRow.__table__.columns}

    def monitor_rules(self, project: str) -> list[dict[str, Any]]:
        """The latest version of each of the project's rules, by name."""
        with self.session() as s:
            names = s.scalars(select(MonitorRuleRow.name).where(MonitorRuleRow.project == project).distinct()).all()
        return [self.monitor_rule(project, n) for n in sorted(names)]

    def undecided_traces(self, project: str, rule: str, version: int, mapped_since: dt.datetime | None = None,
                         started_since_ns: int | None = None) -> list[dict[str, Any]]:
        """Mapped traces with no decision of this rule version, mapped at or after ``mapped_since`` (when given)
        or started at or after ``started_since_ns``: trace_id, content, fields, facts, mapped_at; in order of
        arrival (mapped_at, then trace_id)."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        decided = select(d.trace_id).where(d.project == project, d.rule == rule, d.rule_version == version)
        q = select(t.trace_id, t.content, t.fields, t.facts, t.mapped_at).where(
            t.project == project, t.status == "mapped", t.trace_id.not_in(decided))
        if mapped_since is not None:
            q = q.where(or_(t.mapped_at >= mapped_since, *([t.start_ns >= started_since_ns]
                                                           if started_since_ns is not None else [])))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q.order_by(t.mapped_at, t.trace_id))]

    def admitted_times(self, project: str, rule: str, lo: dt.datetime, hi: dt.datetime) -> list[tuple]:
        """The traces that any version of the rule admitted to judging (pending, judged, failed) mapped in
        [lo, hi]: (mapped_at, trace_id), sorted, each trace once: what its hourly cap counts."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        q = (select(t.trace_id, t.mapped_at).join(d, (d.project == t.project) & (d.trace_id == t.trace_id))
             .where(d.project == project, d.rule == rule, d.decision.in_(ADMITTED), t.mapped_at >= lo,
                    t.mapped_at <= hi).distinct())  # a trace two versions admitted counts once
        with self.session() as s:
            return sorted((r.mapped_at, r.trace_id) for r in s.execute(q))

    def rule_runs_since(self, project: str, rule: str, since: dt.datetime) -> list[dict[str, Any]]:
        """The runs that any version of the rule judged traces in, created at or after ``since``: id, spec."""
        d = MonitorDecisionRow
        ids = select(d.run_id).where(d.project == project, d.rule == rule, d.run_id.is_not(None)).distinct()
        with self.session() as s:
            return [{"id": r.id, "spec": r.spec} for r in s.execute(
                select(RunRow.id, RunRow.spec).where(RunRow.id.in_(ids), RunRow.created_at >= since))]

    def rows_with_results(self, run_id: str) -> dict[int, set[str]]:
        """row -> the metrics it has a result of, in a run (a run stopped at its budget leaves some without)."""
        out: dict[int, set[str]] = {}
        with self.session() as s:
            for i, m in s.execute(select(ResultRow.row_idx, ResultRow.metric).where(ResultRow.run_id == run_id)
                                  .distinct()):
                out.setdefault(i, set()).add(m)
        return out

    def mapped_traces_since(self, project: str, since: dt.datetime | None, limit: int) -> dict[str, Any]:
        """How many traces were mapped at or after ``since`` (every one: None), and the latest ``limit`` of them:
        trace_id, content, facts."""
        t = MonitorTraceRow
        where = [t.project == project, t.status == "mapped"] + ([t.mapped_at >= since] if since is not None else [])
        with self.session() as s:
            n = s.scalar(select(func.count()).select_from(t).where(*where))
            rows = s.execute(select(t.trace_id, t.content, t.facts).where(*where)
                             .order_by(t.mapped_at.desc(), t.trace_id).limit(limit)).all()
        return {"count": int(n or 0), "traces": [dict(r._mapping) for r in rows]}

    def trace_rows(self, project: str, trace_ids: list[str]) -> list[dict[str, Any]]:
        """The mapped fields of these traces, in that order."""
        t = MonitorTraceRow
        with self.session() as s:
            got = dict(s.execute(select(t.trace_id, t.fields).where(t.project == project,
                                                                    t.trace_id.in_(trace_ids))).all())
        return [got[i] or {} for i in trace_ids if i in got]

    def pending_traces(self, project: str, rule: str, version: int) -> list[dict[str, Any]]:
        """Traces this rule version is to judge: trace_id, fields; in order of arrival (as decided)."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        q = (select(t.trace_id, t.fields).join(d, (d.project == t.project) & (d.trace_id == t.trace_id))
             .where(d.project == project, d.rule == rule, d.rule_version == version, d.decision == "pending")
             .order_by(t.mapped_at, t.trace_id))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def save_decisions(self, project: str, rule: str, version: int, decisions: list[dict[str, Any]]) -> None:
        """Store decisions (trace_id, decision, and error / run_id / row_idx where they apply), replacing any."""
        now = utcnow()
        with self.session() as s:
            starts = self.trace_starts(s, project, [x["trace_id"] for x in decisions])
            rows = [{"project": project, "rule": rule, "rule_version": version, "trace_id": x["trace_id"],
                     "decision": x["decision"], "error": x.get("error"), "run_id": x.get("run_id"),
                     "row_idx": x.get("row_idx"), "decided_at": now, "start_ns": starts.get(x["trace_id"])}
                    for x in decisions]
            self._upsert(s, MonitorDecisionRow, rows)
            s.commit()

    @staticmethod
    def trace_starts(s, project: str, trace_ids: list[str]) -> dict[str, int]:
        """trace_id -> its start_ns (the traces that have one), read 500 ids at a time."""
        t, out = MonitorTraceRow, {}
        ids = list(dict.fromkeys(trace_ids))
        for k in range(0, len(ids), 500):
            out.update({tid: start for tid, start in s.execute(select(t.trace_id, t.start_ns).where(
                t.project == project, t.trace_id.in_(ids[k:k + 500]), t.start_ns.is_not(None)))})
        return out

    def decision_counts(self, project: str) -> dict[str, dict[str, int]]:
        """rule -> decision -> traces, for each rule's latest version (every decision named, 0 where none)."""
        out = {}
        for rule in self.monitor_rules(project):
            d = MonitorDecisionRow
            with self.session() as s:
                got = dict(s.execute(select(d.decision, func.count()).where(
                    d.project == project, d.rule == rule["name"], d.rule_version == rule["version"])
                    .group_by(d.decision)).all())
            out[rule["name"]] = {k: int(got.get(k, 0)) for k in DECISIONS}
        return out

    def decisions(self, project: str, rule: str, version: int) -> dict[str, dict[str, Any]]:
        """trace_id -> its decision (decision, error, run_id, row_idx) of a rule version."""
        d = MonitorDecisionRow
        with self.session() as s:
            rows = s.execute(select(d.trace_id, d.decision, d.error, d.run_id, d.row_idx).where(
                d.project == project, d.rule == rule, d.rule_version == version)).all()
        return {r.trace_id: dict(r._mapping) for r in rows}
