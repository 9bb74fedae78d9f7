"""Monitoring's alerts (issue 32): alert rules and the alerts they raised (``python -m evaluators monitor alert``).

An alert rule watches one thing of a project: a monitor rule's metric's rate (``rate_above`` / ``rate_below``, the
CUSUM of evaluators.monitor.alerts, its carried state in ``state``), the share of sampled traces that were judged
(``judged_share_below``) or the traffic itself (``no_traffic_minutes``). Its webhook's secret is never stored: the
rule keeps ``secret_env``, the NAME of the variable that holds it, read where the alert is delivered. An event is one
alert, from ``fired_at`` to ``resolved_at`` in event time (the judged traces' own start times), with the rate it
reported, its 95% interval and n, its text, how its delivery went and who acknowledged it.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, func, or_,
                        select, update)
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.store.monitor_rules import MonitorDecisionRow
from evaluators.store.schema import Base, ResultRow, utcnow
from evaluators.store.traces import MonitorTraceRow

KINDS = ("rate_above", "rate_below", "judged_share_below", "no_traffic_minutes")
DELIVERY = ("delivered", "failed", "not configured")


class AlertRuleRow(Base):
    __tablename__ = "monitor_alert_rules"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(30))  # KINDS
    rule: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the monitor rule judging the metric
    metric: Mapped[str | None] = mapped_column(String(200), nullable=True)
    threshold: Mapped[float] = mapped_column(Float)  # a fraction (0.02), or minutes for no_traffic_minutes
    min_n: Mapped[int] = mapped_column(Integer, default=30)
    webhook_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    secret_env: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the NAME of the secret's variable
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    state: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # the carried statistic and cursor
    busy_until: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # a process evaluating it holds it till
    __table_args__ = (UniqueConstraint("project", "name", name="uq_monitor_alert_rules_name"),)


class AlertEventRow(Base):
    __tablename__ = "monitor_alert_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("monitor_alert_rules.id"))
    fired_ns: Mapped[int] = mapped_column(BigInteger)  # event time, ns since the epoch
    resolved_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    fired_at: Mapped[dt.datetime] = mapped_column()  # the same, as UTC times
    resolved_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    low: Mapped[float | None] = mapped_column(Float, nullable=True)
    high: Mapped[float | None] = mapped_column(Float, nullable=True)
    n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    delivery: Mapped[str] = mapped_column(String(20))  # DELIVERY
    delivery_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    acked_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    acked_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    __table_args__ = (Index("ix_monitor_alert_events_rule", "rule_id", "fired_ns"),)


def ns_time(ns: int | None) -> dt.datetime | None:
    """Nanoseconds since the epoch as a naive UTC time (the store's times)."""
    return None if ns is None else dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(ns) // 1000)


def _row(r) -> dict[str, Any]:
    return {c.name: getattr(r, c.name) for c in r.__table__.columns}


class MonitorAlertsMixin:
    """Alert rules' and alerts' reads and writes of :class:`evaluators.store.store.Store`."""

    def save_alert_rule(self, project: str, name: str, kind: str, threshold: float, *, metric: str | None = None,
                        rule: str | None = None, min_n: int = 30, webhook_url: str | None = None,
                        secret_env: str | None = None) -> int:
        """Add an alert rule, or change the one of that name (its statistic restarts if what it watches changed).
        Returns its id."""
        if self.monitor_project(project) is None:
            raise UsageError(f"no project {project!r} (monitor token create --project NAME makes one)")
        if kind not in KINDS:
            raise UsageError(f"an alert's kind is one of {', '.join(KINDS)}, not {kind!r}")
        if min_n < 1:
            raise UsageError(f"--min-n is a number of traces, 1 or more, not {min_n}")
        new = {"kind": kind, "metric": metric, "rule": rule, "threshold": float(threshold), "min_n": int(min_n),
               "webhook_url": webhook_url, "secret_env": secret_env}
        with self.session() as s:
            row = s.scalars(select(AlertRuleRow).where(AlertRuleRow.project == project,
                                                       AlertRuleRow.name == name)).first()
            if row is None:
                row = AlertRuleRow(project=project, name=name, created_at=utcnow(), **new)
                s.add(row)
            else:
                if any(getattr(row, k) != new[k] for k in ("kind", "metric", "rule", "threshold", "min_n")):
                    # another statistic: it starts afresh, and an alert the old one held open is closed, said so,
                    # at the last trace it had read (or where it fired)
                    last = (row.state or {}).get("last_ns")
                    for e in s.scalars(select(AlertEventRow).where(AlertEventRow.rule_id == row.id,
                                                                   AlertEventRow.resolved_ns.is_(None))):
                        e.resolved_ns = max(last or e.fired_ns, e.fired_ns)
                        e.resolved_at, e.text = ns_time(e.resolved_ns), e.text + " (closed: its rule changed)"
                    row.state = None
                for k, v in new.items():
                    setattr(row, k, v)
            s.commit()
            return row.id

    def alert_rules(self, project: str) -> list[dict[str, Any]]:
        """The project's alert rules, by name."""
        with self.session() as s:
            return [_row(r) for r in s.scalars(select(AlertRuleRow).where(AlertRuleRow.project == project)
                                               .order_by(AlertRuleRow.name))]

    def alert_rule(self, project: str, name: str) -> dict[str, Any] | None:
        return next((r for r in self.alert_rules(project) if r["name"] == name), None)

    def hold_alert_rule(self, rule_id: int, lease: dt.timedelta) -> dict[str, Any] | None:
        """Take an alert rule for one evaluation (processes judging one project's rules at once evaluate each alert
        rule one at a time: no alert fires twice); its row as it is now, or None while another holds it (a hold
        lapses after ``lease``, its process taken for dead)."""
        now = utcnow()
        a = AlertRuleRow
        with self.session() as s:
            took = s.execute(update(a).where(a.id == rule_id, or_(a.busy_until.is_(None), a.busy_until < now))
                             .values(busy_until=now + lease)).rowcount
            s.commit()
            return _row(s.get(a, rule_id)) if took else None

    def release_alert_rule(self, rule_id: int) -> None:
        with self.session() as s:
            s.execute(update(AlertRuleRow).where(AlertRuleRow.id == rule_id).values(busy_until=None))
            s.commit()

    def save_alert_state(self, rule_id: int, state: dict[str, Any]) -> None:
        with self.session() as s:
            s.get(AlertRuleRow, rule_id).state = state
            s.commit()

    def judged_scores(self, project: str, rule: str, metric: str, decided_since: dt.datetime | None,
                      ) -> list[dict[str, Any]]:
        """The metric's judged values of every version of a monitor rule, decided at or after ``decided_since``
        (None: all): trace_id, start_ns, value, decided_at; in event time (start_ns, then trace_id)."""
        t, d, r = MonitorTraceRow, MonitorDecisionRow, ResultRow
        q = (select(d.trace_id, t.start_ns, r.value, d.decided_at).select_from(d)
             .join(t, (t.project == d.project) & (t.trace_id == d.trace_id))
             .join(r, (r.run_id == d.run_id) & (r.row_idx == d.row_idx))
             .where(d.project == project, d.rule == rule, d.decision == "judged", r.metric == metric, r.turn == 0,
                    r.status == "ok", r.value.is_not(None), t.start_ns.is_not(None)))
        if decided_since is not None:
            q = q.where(d.decided_at >= decided_since)
        with self.session() as s:
            return [dict(x._mapping) for x in s.execute(q.order_by(t.start_ns, d.trace_id))]

    def decided_counts(self, project: str, rule: str, started_since_ns: int) -> dict[str, int]:
        """decision -> traces of every version of a monitor rule, for traces started at or after the time."""
        t, d = MonitorTraceRow, MonitorDecisionRow
        with self.session() as s:
            got = s.execute(select(d.decision, func.count()).join(t, (t.project == d.project) &
                                                                 (t.trace_id == d.trace_id))
                            .where(d.project == project, d.rule == rule, t.start_ns >= started_since_ns)
                            .group_by(d.decision)).all()
        return {k: int(n) for k, n in got}

    def last_trace_start(self, project: str) -> int | None:
        """The latest start (ns) of the project's traces, None if it has none."""
        t = MonitorTraceRow
        with self.session() as s:
            return s.scalar(select(func.max(t.start_ns)).where(t.project == project))

    def add_alert_event(self, rule_id: int, **values: Any) -> int:
        with self.session() as s:
            row = AlertEventRow(rule_id=rule_id, created_at=utcnow(), **values)
            s.add(row)
            s.commit()
            return row.id

    def update_alert_event(self, event_id: int, **values: Any) -> None:
        with self.session() as s:
            row = s.get(AlertEventRow, event_id)
            for k, v in values.items():
                setattr(row, k, v)
            s.commit()

    def alert_events(self, project: str, rule_id: int | None = None) -> list[dict[str, Any]]:
        """The project's alerts, newest first (by fired time): each event's columns with its rule's name, kind,
        metric and threshold."""
        e, a = AlertEventRow, AlertRuleRow
        q = (select(e, a.name, a.kind, a.metric, a.threshold).join(a, a.id == e.rule_id)
             .where(a.project == project).order_by(e.fired_ns.desc(), e.id.desc()))
        if rule_id is not None:
            q = q.where(e.rule_id == rule_id)
        with self.session() as s:
            return [{**_row(ev), "rule": name, "kind": kind, "metric": metric, "threshold": thr}
                    for ev, name, kind, metric, thr in s.execute(q)]

    def ack_alert(self, project: str, event_id: int, by: str) -> bool:
        """Mark a project's alert acknowledged by ``by`` (now); False if the project has no such alert."""
        if not (by or "").strip():
            raise UsageError("say who acknowledges the alert (--by NAME)")
        with self.session() as s:
            row = s.get(AlertEventRow, event_id)
            rule = None if row is None else s.get(AlertRuleRow, row.rule_id)
            if rule is None or rule.project != project:
                return False
            row.acked_by, row.acked_at = by.strip(), utcnow()
            s.commit()
            return True
