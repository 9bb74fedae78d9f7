"""Claims on a rule's pending traces (evaluators.monitor.claims), so that processes sharing a store (queue workers
on several machines, a `monitor rule run` beside them) never judge one trace twice for a rule version.

A pending decision is free while its ``run_id`` is empty. A worker claims a batch of free ones with one conditional
UPDATE (``claim:`` and a token of its own in ``run_id``; run ids are 12 hex characters, never with a colon), makes
the batch's run, then binds the claim to it (``run_id`` the run, ``row_idx`` the trace's row) in one transaction,
and at the end turns each of its decisions from pending to judged or failed, again only where it is still its own.
A claim whose worker died is taken back: a token never bound after ``stale`` (the worker died making its run), a
run whose heartbeat stopped (the runner beats every fraction of a second) by taking the run over and resuming it.
"""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import select, update

from evaluators.store.monitor_rules import MonitorDecisionRow
from evaluators.store.schema import ResultRow, RunRow, utcnow
from evaluators.store.traces import MonitorTraceRow

CLAIM = "claim:"


class MonitorClaimsMixin:
    """Claims' reads and writes of :class:`evaluators.store.store.Store` (decisions: MonitorRulesMixin)."""

    def add_first_decisions(self, project: str, rule: str, version: int, decisions: list[dict[str, Any]]) -> None:
        """Store decisions of traces that have none of this rule version yet; a trace decided meanwhile (by another
        process deciding at once) keeps its decision, and a claim on it, untouched."""
        if not decisions:
            return
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        now = utcnow()
        with self.session() as s:
            starts = self.trace_starts(s, project, [x["trace_id"] for x in decisions])
            rows = [{"project": project, "rule": rule, "rule_version": version, "trace_id": x["trace_id"],
                     "decision": x["decision"], "error": x.get("error"), "decided_at": now,
                     "start_ns": starts.get(x["trace_id"])} for x in decisions]
            s.execute(insert(MonitorDecisionRow.__table__).on_conflict_do_nothing(), rows)
            s.commit()

    def _pending(self, project: str, rule: str, version: int) -> tuple:
        d = MonitorDecisionRow
        return d.project == project, d.rule == rule, d.rule_version == version, d.decision == "pending"

    def claim_pending(self, project: str, rule: str, version: int, limit: int,
                      stale: dt.timedelta) -> tuple[str, list[dict[str, Any]]]:
        """Claim up to ``limit`` free pending traces (first by trace id). Returns (the claim's token, the traces
        claimed: trace_id and fields, by trace id)."""
        d, t = MonitorDecisionRow, MonitorTraceRow
        token, now = CLAIM + uuid.uuid4().hex[:24], utcnow()
        free = (*self._pending(project, rule, version),
                d.run_id.is_(None) | (d.run_id.startswith(CLAIM) & (d.decided_at < now - stale)))
        pick = select(d.trace_id).where(*free).order_by(d.trace_id).limit(limit)
        if self.engine.dialect.name == "postgresql":  # claimers at once take different traces, not wait on each other
            pick = pick.with_for_update(skip_locked=True)
        with self.session() as s:
            # picked first, then updated (a LIMIT subquery inside the UPDATE may run again as rows change under it,
            # and take more than the limit); the UPDATE checks again that each row is free as it writes it
            ids = list(s.scalars(pick))
            s.execute(update(d).where(*free, d.trace_id.in_(ids))
                      .values(run_id=token, row_idx=None, decided_at=now).execution_options(synchronize_session=False))
            s.commit()
            got = s.execute(select(t.trace_id, t.fields).join(d, (d.project == t.project) & (d.trace_id == t.trace_id))
                            .where(*self._pending(project, rule, version), d.run_id == token).order_by(t.trace_id))
            return token, [dict(r._mapping) for r in got]

    def bind_claim(self, project: str, rule: str, version: int, token: str, run_id: str, order: list[str]) -> bool:
        """Make a claim the run's: each trace's decision names the run and its row (its place in ``order``), and
        the run has a heartbeat (so nobody takes it over before its runner starts). All or nothing: False (and
        nothing changed) when some trace is no longer under the token (its claim went stale and was taken)."""
        d = MonitorDecisionRow
        where = self._pending(project, rule, version)
        with self.session() as s:
            n = s.execute(update(d).where(*where, d.run_id == token).values(run_id=run_id)
                          .execution_options(synchronize_session=False)).rowcount
            if n != len(order):
                s.rollback()
                return False
            for i, tid in enumerate(order):
                s.execute(update(d).where(*where, d.run_id == run_id, d.trace_id == tid).values(row_idx=i)
                          .execution_options(synchronize_session=False))
            s.execute(update(RunRow).where(RunRow.id == run_id).values(heartbeat_at=utcnow()))
            s.commit()
            return True

    def release_claim(self, project: str, rule: str, version: int, claim: str) -> None:
        """Free what is still pending under a token or run (the batch could not be made)."""
        d = MonitorDecisionRow
        with self.session() as s:
            s.execute(update(d).where(*self._pending(project, rule, version), d.run_id == claim)
                      .values(run_id=None, row_idx=None).execution_options(synchronize_session=False))
            s.commit()

    def orphaned_claims(self, project: str, rule: str, version: int, stale: dt.timedelta) -> list[tuple[str, bool]]:
        """(run id, whether it has finished) of the runs holding pending traces of this rule version whose runner
        is silent ``stale`` or has finished (its worker died before it wrote the decisions)."""
        d, r = MonitorDecisionRow, RunRow
        q = (select(r.id, r.finished_at.is_not(None)).join(d, d.run_id == r.id)
             .where(*self._pending(project, rule, version),
                    r.finished_at.is_not(None) | r.heartbeat_at.is_(None) | (r.heartbeat_at < utcnow() - stale))
             .distinct())
        with self.session() as s:
            return [(rid, bool(done)) for rid, done in s.execute(q)]

    def take_over_run(self, run_id: str, stale: dt.timedelta) -> bool:
        """Take an unfinished run whose runner is silent ``stale`` (one conditional UPDATE: one taker wins)."""
        now = utcnow()
        with self.session() as s:
            n = s.execute(update(RunRow).where(RunRow.id == run_id, RunRow.finished_at.is_(None),
                                               RunRow.heartbeat_at.is_(None) | (RunRow.heartbeat_at < now - stale))
                          .values(heartbeat_at=now)).rowcount
            s.commit()
            return n == 1

    def claimed_rows(self, project: str, rule: str, version: int, run_id: str) -> list[tuple[str, int]]:
        """(trace id, row) of the traces still pending under a run, by row."""
        d = MonitorDecisionRow
        with self.session() as s:
            return [tuple(x) for x in s.execute(select(d.trace_id, d.row_idx).where(
                *self._pending(project, rule, version), d.run_id == run_id).order_by(d.row_idx))]

    def run_row_errors(self, run_id: str) -> dict[int, str | None]:
        """Each row of a run that has results: its first error, or None when none of them is one."""
        out: dict[int, str | None] = {}
        with self.session() as s:
            for i, status, error in s.execute(select(ResultRow.row_idx, ResultRow.status, ResultRow.error)
                                              .where(ResultRow.run_id == run_id)):
                if status == "error":
                    out[i] = out.get(i) or error or "error"
                else:
                    out.setdefault(i, None)
        return out

    def settle_claimed(self, project: str, rule: str, version: int, run_id: str,
                       outcomes: list[dict[str, Any]]) -> dict[str, int]:
        """Turn decisions from pending to ``judged`` / ``failed`` (trace_id, decision, error), only those still
        pending under this run: a trace never gets two outcomes. Returns how many of each were written."""
        d, now = MonitorDecisionRow, utcnow()
        done = {"judged": 0, "failed": 0, "over_budget": 0}
        with self.session() as s:
            for x in outcomes:
                done[x["decision"]] += s.execute(update(d).where(
                    *self._pending(project, rule, version), d.run_id == run_id, d.trace_id == x["trace_id"])
                    .values(decision=x["decision"], error=x.get("error"), decided_at=now)
                    .execution_options(synchronize_session=False)).rowcount
            s.commit()
        return done

    def split_claim(self, project: str, rule: str, version: int, token: str, trace_ids: list[str]) -> str:
        """Move some of a claim's traces under a claim of their own (a batch of two shapes is two runs). Returns
        the new token; what is no longer under ``token`` stays where it is (bind_claim then refuses the new one)."""
        d, new = MonitorDecisionRow, CLAIM + uuid.uuid4().hex[:24]
        with self.session() as s:
            s.execute(update(d).where(*self._pending(project, rule, version), d.run_id == token,
                                      d.trace_id.in_(trace_ids)).values(run_id=new)
                      .execution_options(synchronize_session=False))
            s.commit()
        return new

    def settle_free_pending(self, project: str, rule: str, version: int, decision: str) -> dict[str, int]:
        """Give the pending traces nobody holds (no claim, or a claim gone stale is not counted here) ``decision``
        (the day's budget spent: ``over_budget``). Returns {decision: how many}."""
        d = MonitorDecisionRow
        with self.session() as s:
            n = s.execute(update(d).where(*self._pending(project, rule, version), d.run_id.is_(None))
                          .values(decision=decision, decided_at=utcnow())
                          .execution_options(synchronize_session=False)).rowcount
            s.commit()
        return {decision: n}
