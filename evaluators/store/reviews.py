"""The store's reviews: people's verdicts on a run's rows, and the queues that hand rows to reviewers.

A verdict is keyed by (run, row, metric, reviewer): given again it replaces the reviewer's own, and two
reviewers on the same row each keep theirs. Each is written in its own transaction the moment it is given.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable

from sqlalchemy import func, select

from evaluators.store.schema import QueueRow, ResultRow, ReviewRow, new_id, utcnow

REVIEW_FIELDS = ("row_idx", "metric", "reviewer", "value", "agreed", "note", "judge_value", "judged_at",
                 "queue_id", "created_at")


def _queue_dict(q: QueueRow) -> dict[str, Any]:
    return {c.name: getattr(q, c.name) for c in QueueRow.__table__.columns}


class ReviewsMixin:
    """Review reads and writes of :class:`evaluators.store.store.Store` (which provides ``session`` and
    ``_upsert``)."""

    def save_reviews(self, run_id: str, reviews: Iterable[dict[str, Any]]) -> int:
        """Store verdicts (each a dict of :data:`REVIEW_FIELDS`; ``row_idx``, ``metric`` and ``reviewer``
        required), replacing a reviewer's earlier verdict on the same row and metric; all or none.

        Returns:
            how many were written.
        """
        now = utcnow()
        rows = []
        for r in reviews:
            rec = {k: r.get(k) for k in REVIEW_FIELDS}
            rec.update(run_id=run_id, agreed=bool(r.get("agreed")), created_at=r.get("created_at") or now)
            if not str(rec["reviewer"] or "").strip():
                raise ValueError("a verdict needs a reviewer")
            rows.append(rec)
        if rows:
            with self.session() as s:
                self._upsert(s, ReviewRow, rows)
                s.commit()
        return len(rows)

    def save_review(self, run_id: str, row_idx: int, metric: str, reviewer: str, value: float | None, *,
                    agreed: bool = False, note: str | None = None, judge_value: float | None = None,
                    judged_at: dt.datetime | None = None, queue_id: str | None = None) -> None:
        """One verdict, written at once (see :meth:`save_reviews`)."""
        self.save_reviews(run_id, [dict(row_idx=int(row_idx), metric=metric, reviewer=reviewer, value=value,
                                        agreed=agreed, note=note or None, judge_value=judge_value,
                                        judged_at=judged_at, queue_id=queue_id)])

    def reviews(self, run_id: str, metric: str | None = None, rows: Iterable[int] | None = None,
                reviewer: str | None = None) -> list[dict[str, Any]]:
        """A run's verdicts (optionally of one metric, some rows, one reviewer), by row, metric, reviewer."""
        # plain rows, not ORM objects: the Results page asks on every open, and building objects (and, the
        # first time in a process, the mapper's loading code) cost more than the query
        q = select(*(ReviewRow.__table__.c[k] for k in REVIEW_FIELDS)).where(ReviewRow.run_id == run_id)
        if metric is not None:
            q = q.where(ReviewRow.metric == metric)
        if reviewer is not None:
            q = q.where(ReviewRow.reviewer == reviewer)
        if rows is not None:
            wanted = sorted({int(i) for i in rows})
            out: list[dict[str, Any]] = []
            with self.session() as s:
                for k in range(0, len(wanted), 500):
                    out += [dict(r) for r in s.execute(q.where(ReviewRow.row_idx.in_(wanted[k:k + 500]))).mappings()]
            return sorted(out, key=lambda r: (r["row_idx"], r["metric"], r["reviewer"]))
        with self.session() as s:
            return [dict(r) for r in s.execute(
                q.order_by(ReviewRow.row_idx, ReviewRow.metric, ReviewRow.reviewer)).mappings()]

    def review_state(self, run_id: str) -> tuple[int, dt.datetime | None]:
        """How many verdicts a run has and when the latest was given: what changes whenever a verdict does."""
        with self.session() as s:
            n, latest = s.execute(select(func.count(), func.max(ReviewRow.created_at))
                                  .where(ReviewRow.run_id == run_id)).one()
        return int(n), latest

    def reviewed_rows(self, run_id: str) -> dict[int, int]:
        """Row index -> how many verdicts it has (any metric, any reviewer)."""
        with self.session() as s:
            return {int(i): int(n) for i, n in s.execute(
                select(ReviewRow.row_idx, func.count()).where(ReviewRow.run_id == run_id, ReviewRow.value.is_not(None))
                .group_by(ReviewRow.row_idx))}

    def judged_times(self, run_id: str, metric: str, rows: Iterable[int]) -> dict[int, dt.datetime]:
        """Row index -> when its current judgment of ``metric`` was stored (its latest turn)."""
        wanted = sorted({int(i) for i in rows})
        out: dict[int, dt.datetime] = {}
        with self.session() as s:
            for k in range(0, len(wanted), 500):
                for i, at in s.execute(select(ResultRow.row_idx, func.max(ResultRow.created_at)).where(
                        ResultRow.run_id == run_id, ResultRow.metric == metric,
                        ResultRow.row_idx.in_(wanted[k:k + 500])).group_by(ResultRow.row_idx)):
                    out[int(i)] = at
        return out

    # ------------------------------------------------------------ queues
    def create_queue(self, run_id: str, name: str, strategy: str, metrics: list[str], rows: list[int],
                     assignments: dict[str, list[int]], *, params: dict | None = None,
                     strata: dict[str, str] | None = None, blind: bool = True, created_by: str | None = None) -> str:
        qid = new_id()
        with self.session() as s:
            s.add(QueueRow(id=qid, run_id=run_id, name=name, strategy=strategy, params=params or {},
                           metrics=list(metrics), rows=[int(i) for i in rows], strata=strata,
                           assignments={k: [int(i) for i in v] for k, v in assignments.items()}, blind=blind,
                           created_by=created_by))
            s.commit()
        return qid

    def queues(self, run_id: str) -> list[dict[str, Any]]:
        """A run's review queues, newest first."""
        with self.session() as s:
            return [_queue_dict(q) for q in s.scalars(
                select(QueueRow).where(QueueRow.run_id == run_id).order_by(QueueRow.created_at.desc()))]

    def get_queue(self, queue_id: str) -> dict[str, Any]:
        with self.session() as s:
            q = s.get(QueueRow, queue_id)
            if q is None:
                raise KeyError(f"no review queue {queue_id}")
            return _queue_dict(q)
