"""Monitoring's rules and their decisions (``python -m evaluators monitor rule``): a rule names metrics, a judge and
a sample rate for a project; a changed rule is a new version. Every mapped trace gets one decision per rule
version, stored: ``sampled_out``, ``no_content``, ``pending``, then ``judged`` (its scores in the run ``run_id``,
row ``row_idx``) or ``failed`` (with the error)."""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Float, Index, Integer, String, Text, func, select
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.store.schema import Base, utcnow
from evaluators.store.traces import MonitorTraceRow

DECISIONS = ("sampled_out", "no_content", "pending", "judged", "failed")


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
    # counts, and the traces of a rare decision (migration 0008)
    __table_args__ = (Index("ix_monitor_decisions_rule", "project", "rule", "rule_version", "decision", "trace_id"),)


RULE_FIELDS = ("metrics", "sample_rate", "judge", "key_env")


class MonitorRulesMixin:
    """Rules' and decisions' reads and writes of :class:`evaluators.store.store.Store`."""

    def add_monitor_rule(self, project: str, name: str, metrics: list[str], sample_rate: float,
                         judge: dict | None, key_env: str | None = None) -> int:
        """Store a rule; the same settings as its latest version keep that version, others make the next.
        Returns the version."""
        if self.monitor_project(project) is None:
            raise UsageError(f"no project {project!r} (monitor token create --project NAME makes one)")
        if not 0 <= sample_rate <= 1:
            raise UsageError(f"--sample-rate is a share from 0 to 1, not {sample_rate}")
        if not metrics:
            raise UsageError("a rule needs at least one metric (--metrics)")
        new = {"metrics": list(metrics), "sample_rate": float(sample_rate), "judge": judge, "key_env": key_env}
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

    def undecided_traces(self, project: str, rule: str, version: int) -> list[dict[str, Any]]:
        """Mapped traces with no decision of this rule version: trace_id, content, fields."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        decided = select(d.trace_id).where(d.project == project, d.rule == rule, d.rule_version == version)
        q = (select(t.trace_id, t.content, t.fields).where(t.project == project, t.status == "mapped",
                                                         t.trace_id.not_in(decided)).order_by(t.trace_id))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def pending_traces(self, project: str, rule: str, version: int) -> list[dict[str, Any]]:
        """Traces this rule version is to judge: trace_id, fields."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        q = (select(t.trace_id, t.fields).join(d, (d.project == t.project) & (d.trace_id == t.trace_id))
             .where(d.project == project, d.rule == rule, d.rule_version == version, d.decision == "pending")
             .order_by(t.trace_id))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def save_decisions(self, project: str, rule: str, version: int, decisions: list[dict[str, Any]]) -> None:
        """Store decisions (trace_id, decision, and error / run_id / row_idx where they apply), replacing any."""
        now = utcnow()
        rows = [{"project": project, "rule": rule, "rule_version": version, "trace_id": x["trace_id"],
                 "decision": x["decision"], "error": x.get("error"), "run_id": x.get("run_id"),
                 "row_idx": x.get("row_idx"), "decided_at": now} for x in decisions]
        with self.session() as s:
            self._upsert(s, MonitorDecisionRow, rows)
            s.commit()

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
