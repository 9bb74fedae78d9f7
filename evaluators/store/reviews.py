"""The store's reviews: people's verdicts on a run's rows, and the queues that hand rows to reviewers.

A verdict is keyed by (run, row, metric, reviewer): given again it replaces the reviewer's own, and two
reviewers on the same row each keep theirs. Each is written in its own transaction the moment it is given.

Every verdict, from the Review page or a file (``review import``), passes :func:`verdict_problems` before it
is written: the same rule on SQLite and PostgreSQL (which refuses a NUL in text and a name over its column's
200 characters where SQLite stores anything).
"""
from __future__ import annotations

import datetime as dt
import math
import numbers
import unicodedata
from typing import Any, Iterable

from sqlalchemy import func, select

from evaluators.core.errors import UsageError
from evaluators.store.schema import QueueRow, ResultRow, ReviewRow, new_id, utcnow

REVIEW_FIELDS = ("row_idx", "metric", "reviewer", "value", "agreed", "note", "judge_value", "judged_at",
                 "queue_id", "created_at")
# A reviewer's name is a name (the Review page's field and the column take 200 characters); a note a few
# sentences (the Review page's field takes 2,000): a longer one is a mistake (a whole document pasted, a
# file's column shifted), and every open of the row would carry it.
REVIEWER_MAX_CHARS = 200
NOTE_MAX_CHARS = 2000
METRIC_MAX_CHARS = 100  # the column's width
_NOTE_CONTROLS_KEPT = "\t\n\r"  # a note may have lines; no other control character (NUL, escapes) is text


class BadVerdict(UsageError, ValueError):
    """A verdict the store refuses; ``field`` names what is wrong (a ValueError too, as before)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"field '{field}': {message}")


def shown(value: Any, limit: int = 60) -> str:
    """A value quoted in a message, cut to ``limit`` characters (a 20 MB note is not echoed back)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list", type(None): "null", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def _text_problem(value: Any, limit: int, controls_kept: str = "") -> str | None:
    """Why ``value`` is not acceptable text of at most ``limit`` characters, or None."""
    if not isinstance(value, str):
        return f"must be text, got {_kind(value)} ({shown(value)})"
    if len(value) > limit:
        return f"{len(value):,} characters; at most {limit:,} are accepted"
    for at, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if (cat == "Cc" and ch not in controls_kept) or cat == "Cs":
            what = "a lone surrogate" if cat == "Cs" else "a control character"
            return f"{what} (U+{ord(ch):04X}) at character {at + 1}; only printable text is accepted"
    return None


def reviewer_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a reviewer's name, or None: text, not blank, at most
    :data:`REVIEWER_MAX_CHARS` characters, no control character."""
    why = _text_problem(name, REVIEWER_MAX_CHARS)
    if why is None and not name.strip():
        why = "is blank; give the reviewer's name"
    return why


def note_problem(note: Any) -> str | None:
    """Why ``note`` cannot be a verdict's note, or None: none, or text of at most :data:`NOTE_MAX_CHARS`
    characters with no control character but tabs and line breaks."""
    return None if note is None else _text_problem(note, NOTE_MAX_CHARS, _NOTE_CONTROLS_KEPT)


def verdict_problems(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, why) of everything wrong with a verdict (a dict of :data:`REVIEW_FIELDS`); [] when it is fine.

    The one check of what a verdict may hold, whichever way it comes: the reviewer's name, the note (text or
    none), the metric's name, the row (a whole number) and the value (a finite number, not true/false; or none:
    skipped). Whether the value is on the metric's scale is the caller's (it knows the metric)."""
    out = []
    why = reviewer_problem(r.get("reviewer"))
    if why:
        out.append(("reviewer", why))
    why = note_problem(r.get("note"))
    if why:
        out.append(("note", why))
    why = _text_problem(r.get("metric"), METRIC_MAX_CHARS)
    if why:
        out.append(("metric", why))
    row = r.get("row_idx")
    if isinstance(row, bool) or not isinstance(row, numbers.Integral) or row < 0:
        out.append(("row_idx", f"must be a row's index (a whole number from 0), got {shown(row)}"))
    for field in ("value", "judge_value"):
        v = r.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)):
            out.append((field, f"must be a number, got {_kind(v)} ({shown(v)})"))
    return out


def check_verdict(r: dict[str, Any]) -> None:
    """Raise :class:`BadVerdict` for the first of :func:`verdict_problems`."""
    problems = verdict_problems(r)
    if problems:
        raise BadVerdict(*problems[0])


def _queue_dict(q: QueueRow) -> dict[str, Any]:
    return {c.name: getattr(q, c.name) for c in QueueRow.__table__.columns}


class ReviewsMixin:
    """Review reads and writes of :class:`evaluators.store.store.Store` (which provides ``session`` and
    ``_upsert``)."""

    def save_reviews(self, run_id: str, reviews: Iterable[dict[str, Any]]) -> int:
        """Store verdicts (each a dict of :data:`REVIEW_FIELDS`; ``row_idx``, ``metric`` and ``reviewer``
        required), replacing a reviewer's earlier verdict on the same row and metric; all or none. Of two
        verdicts with one key in ``reviews``, the later is kept.

        Returns:
            how many were written (verdicts with distinct keys).
        Raises:
            BadVerdict: one fails :func:`verdict_problems`; nothing is written.
        """
        rows = self._checked(run_id, reviews)
        if rows:
            with self.session() as s:
                self._upsert(s, ReviewRow, rows)
                s.commit()
        return len(rows)

    def import_reviews(self, run_id: str, reviews: Iterable[dict[str, Any]]) -> dict[str, int]:
        """:meth:`save_reviews`, but a verdict equal to the one stored (value, agreed, note) is left as it is,
        its time kept; all or none, in one transaction.

        Returns:
            ``{"new": ..., "changed": ..., "unchanged": ...}``: verdicts written for the first time, written
            over the reviewer's earlier one, and left as they were.
        """
        rows = self._checked(run_id, reviews)
        keys = ReviewRow.row_idx, ReviewRow.metric, ReviewRow.reviewer
        counts = {"new": 0, "changed": 0, "unchanged": 0}
        stored = {}
        # read, then write in a transaction of its own: SQLite cannot turn a read transaction into a write
        # one once another writer (a reviewer's verdict) has committed since (SQLITE_BUSY_SNAPSHOT)
        with self.session() as s:
            for metric in {r["metric"] for r in rows}:
                wanted = sorted({r["row_idx"] for r in rows if r["metric"] == metric})
                for k in range(0, len(wanted), 500):
                    for i, m, who, value, agreed, note in s.execute(select(
                            *keys, ReviewRow.value, ReviewRow.agreed, ReviewRow.note).where(
                            ReviewRow.run_id == run_id, ReviewRow.metric == metric,
                            ReviewRow.row_idx.in_(wanted[k:k + 500]))):
                        stored[(i, m, who)] = (value, bool(agreed), note)
        write = []
        for r in rows:
            before = stored.get((r["row_idx"], r["metric"], r["reviewer"]))
            if before == (r["value"], r["agreed"], r["note"]):
                counts["unchanged"] += 1
                continue
            counts["new" if before is None else "changed"] += 1
            write.append(r)
        if write:
            with self.session() as s:
                self._upsert(s, ReviewRow, write)
                s.commit()
        return counts

    def _checked(self, run_id: str, reviews: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows to write: each verdict checked, the later of two with one key kept (PostgreSQL refuses to
        update one row twice in one statement)."""
        now = utcnow()
        rows: dict[tuple, dict[str, Any]] = {}
        for r in reviews:
            rec = {k: r.get(k) for k in REVIEW_FIELDS}
            rec.update(run_id=run_id, agreed=bool(r.get("agreed")), created_at=r.get("created_at") or now)
            check_verdict(rec)
            rec["row_idx"] = int(rec["row_idx"])
            rows.pop((rec["row_idx"], rec["metric"], rec["reviewer"]), None)
            rows[(rec["row_idx"], rec["metric"], rec["reviewer"])] = rec
        return list(rows.values())

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
