"""Production traffic in the store (``python -m evaluators monitor``): projects, their ingest tokens, the spans and
log records received over OTLP, and the traces they make.

- A token is stored as its SHA-256 only (tokens are 256 random bits: no slower hash is needed against guessing);
  revoked, it stays as a record with ``revoked_at`` set.
- Spans are keyed by (project, trace, span) and log records by (project, trace, digest of the record), inserted
  ``ON CONFLICT DO NOTHING``: a sender sending a batch again (its receiver killed before replying) adds nothing.
- A trace row is touched by every receipt that carries one of its spans (``receipts`` counts them, in the same
  statement, which locks the row); the assembler maps a trace only while ``receipts`` is what it read, so a span
  that came meanwhile is either in the mapped row or marked ``late``, never lost between the two.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from typing import Any, Iterable, Iterator

from sqlalchemy import (JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, case, false, func,
                        select, update)
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.store.schema import Base, new_id, utcnow

DEFAULT_QUIET_SECONDS = 30.0
DEFAULT_CONVERSATION_QUIET = 300.0  # a conversation is assembled this long after its last turn was mapped
TRACE_KINDS = ("trace", "conversation")
TOKEN_PREFIX = "evm_"
TRACE_STATES = ("open", "mapped")  # open: waiting for its root span's end and a quiet period; mapped: a row


class MonitorProjectRow(Base):
    __tablename__ = "monitor_projects"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    # a trace is complete this long after its last span (its root span having ended)
    quiet_seconds: Mapped[float] = mapped_column(Float, default=DEFAULT_QUIET_SECONDS)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # redaction (evaluators/monitor/redact.py, store/monitor_redact.py) and conversations (monitor/conversations.py)
    redact_kinds: Mapped[list | None] = mapped_column(JSON, nullable=True)  # of email, phone, card
    redact_patterns: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # NAME -> RE2 pattern
    keep_original: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    redact_secret: Mapped[str | None] = mapped_column(String(64), nullable=True)  # keys the values' digests
    conversation_quiet_seconds: Mapped[float] = mapped_column(Float, default=DEFAULT_CONVERSATION_QUIET,
                                                              server_default=str(DEFAULT_CONVERSATION_QUIET))


class MonitorTokenRow(Base):
    __tablename__ = "monitor_tokens"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(ForeignKey("monitor_projects.name"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 hex of the token; never the token
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class MonitorTraceRow(Base):
    __tablename__ = "monitor_traces"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    first_seen: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_seen: Mapped[dt.datetime] = mapped_column(default=utcnow)
    receipts: Mapped[int] = mapped_column(Integer, default=1)  # requests that carried its spans or logs
    root_ended: Mapped[bool] = mapped_column(Boolean, default=False)
    start_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # its earliest span's start
    status: Mapped[str] = mapped_column(String(20), default="open")  # TRACE_STATES
    completeness: Mapped[str | None] = mapped_column(String(20), nullable=True)  # complete | no_root (gave up waiting)
    mapped_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    fields: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # the row, under the dataset's field names
    sources: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # field -> where it came from
    content: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # False: GenAI spans, no content captured
    hint: Mapped[str | None] = mapped_column(Text, nullable=True)  # what to set in the app to capture content
    conversation_key: Mapped[str | None] = mapped_column(String(300), nullable=True, index=True)
    facts: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # what rules' filters read (monitor.facts)
    # TRACE_KINDS: a conversation's row has a derived id (store/monitor_conversations.py); a trace assembled into
    # one names it; a trace of a conversation already assembled is kept, marked late, and not added to it
    kind: Mapped[str] = mapped_column(String(20), default="trace", server_default="trace")
    in_conversation: Mapped[str | None] = mapped_column(String(32), nullable=True)
    late: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # the facts the Monitoring page counts over time, as columns (migration 0011; ``fact_columns``): a million
    # traces' windows are read from one covering index, not from each trace's JSON
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    service: Mapped[str | None] = mapped_column(String(200), nullable=True)
    service_version: Mapped[str | None] = mapped_column(String(200), nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    error: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    __table_args__ = (Index("ix_monitor_traces_due", "status", "last_seen"),
                      Index("ix_monitor_traces_turns", "project", "late", "in_conversation", "conversation_key"),
                      # the Monitoring page (migration 0008): its list newest first, its counts by state
                      Index("ix_monitor_traces_recent", "project", "first_seen", "trace_id"),
                      # (0011: with kind and late, so the counts of traces by state and of late turns are read
                      # from the index alone)
                      Index("ix_monitor_traces_state", "project", "kind", "status", "content", "completeness", "late"),
                      # its reads over time (migration 0011): a range of a project's traces by their start, with
                      # what the traffic's windows and slices read (an index-only scan on SQLite)
                      Index("ix_monitor_traces_time", "project", "start_ns", "kind", "model", "service",
                            "service_version", "latency_ms", "tokens", "error"))


def fact_columns(facts: dict | None) -> dict[str, Any]:
    """The columns a trace's facts fill (``evaluators.monitor.facts``): model, service, the resource's
    ``service.version``, latency, tokens and error; None where the facts have none (or are not of the kind)."""
    facts = facts or {}

    def text(v) -> str | None:
        return v[:200] if isinstance(v, str) else None

    def number(v) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    tokens = number(facts.get("tokens"))
    return {"model": text(facts.get("model")), "service": text(facts.get("service_name")),
            "service_version": text((facts.get("attributes") or {}).get("service.version")),
            "latency_ms": number(facts.get("latency_ms")), "tokens": None if tokens is None else int(tokens),
            "error": facts.get("error") if isinstance(facts.get("error"), bool) else None}


class MonitorSpanRow(Base):
    __tablename__ = "monitor_spans"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    parent_span_id: Mapped[str] = mapped_column(String(16), default="")
    name: Mapped[str] = mapped_column(Text, default="")
    start_ns: Mapped[int] = mapped_column(BigInteger, default=0)
    end_ns: Mapped[int] = mapped_column(BigInteger, default=0)
    data: Mapped[dict] = mapped_column(JSON)  # the normalized span (evaluators.monitor.otlp)
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    late: Mapped[bool] = mapped_column(Boolean, default=False)  # came after its trace was mapped
    __table_args__ = (Index("ix_monitor_spans_late", "project", "late", "trace_id"),)  # the traces with late spans


class MonitorLogRow(Base):
    __tablename__ = "monitor_logs"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "" for a record of no trace
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA-256 of the record: sent twice, kept once
    time_ns: Mapped[int] = mapped_column(BigInteger, default=0)
    data: Mapped[dict] = mapped_column(JSON)  # the normalized log record
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    late: Mapped[bool] = mapped_column(Boolean, default=False)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class TracesMixin:
    """Monitoring's reads and writes of :class:`evaluators.store.store.Store` (which provides ``session`` and
    ``engine``)."""

    # ------------------------------------------------------------ projects and tokens
    def monitor_project(self, name: str) -> dict[str, Any] | None:
        with self.session() as s:
            p = s.get(MonitorProjectRow, name)
            return None if p is None else {"name": p.name, "quiet_seconds": p.quiet_seconds, "created_at": p.created_at,
                                           "conversation_quiet_seconds": p.conversation_quiet_seconds,
                                           "redact": list(p.redact_kinds or []),
                                           "redact_patterns": dict(p.redact_patterns or {}),
                                           "keep_original": bool(p.keep_original)}

    def monitor_projects(self) -> list[str]:
        with self.session() as s:
            return list(s.scalars(select(MonitorProjectRow.name).order_by(MonitorProjectRow.name)))

    def ensure_monitor_project(self, name: str, quiet_seconds: float | None = None) -> None:
        """Make the project if it is new; set its quiet period when one is given."""
        name = (name or "").strip()
        if not name or len(name) > 200:
            raise UsageError("a project needs a name of 1 to 200 characters")
        if quiet_seconds is not None and not quiet_seconds >= 0:
            raise UsageError(f"--quiet-seconds must be 0 or more, not {quiet_seconds}")
        with self.session() as s:
            p = s.get(MonitorProjectRow, name)
            if p is None:
                s.add(MonitorProjectRow(name=name, quiet_seconds=DEFAULT_QUIET_SECONDS if quiet_seconds is None
                                        else quiet_seconds))
            elif quiet_seconds is not None:
                p.quiet_seconds = quiet_seconds
            s.commit()

    def create_ingest_token(self, project: str, created_by: str | None = None) -> tuple[str, str]:
        """A new token for ``project`` (made if new). Returns (its id, the token): the token is shown once, only
        its hash is kept."""
        self.ensure_monitor_project(project)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        tid = new_id()
        with self.session() as s:
            s.add(MonitorTokenRow(id=tid, project=project.strip(), token_hash=token_hash(token), created_by=created_by))
            s.commit()
        return tid, token

    def revoke_ingest_token(self, token_or_id: str) -> dict[str, Any] | None:
        """Revoke a token given as itself or its id. Returns the token's record (id, project), None if unknown."""
        key = (token_or_id or "").strip()
        with self.session() as s:
            row = s.scalars(select(MonitorTokenRow).where(
                (MonitorTokenRow.id == key) | (MonitorTokenRow.token_hash == token_hash(key)))).first()
            if row is None:
                return None
            if row.revoked_at is None:
                row.revoked_at = utcnow()
            s.commit()
            return {"id": row.id, "project": row.project, "revoked_at": row.revoked_at}

    def ingest_tokens(self, project: str | None = None) -> list[dict[str, Any]]:
        """Tokens' records (never the tokens), oldest first."""
        q = select(MonitorTokenRow.id, MonitorTokenRow.project, MonitorTokenRow.created_at, MonitorTokenRow.created_by,
                   MonitorTokenRow.revoked_at).order_by(MonitorTokenRow.created_at)
        if project is not None:
            q = q.where(MonitorTokenRow.project == project)
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def token_project(self, token: str) -> str | None:
        """The project a valid (known, unrevoked) token names, else None."""
        if not token:
            return None
        with self.session() as s:
            return s.scalars(select(MonitorTokenRow.project).where(MonitorTokenRow.token_hash == token_hash(token),
                                                                   MonitorTokenRow.revoked_at.is_(None))).first()

    # ------------------------------------------------------------ receiving
    def receive_telemetry(self, project: str, spans: Iterable[dict], logs: Iterable[dict] = ()) -> None:
        """Store one request's spans and log records, all in one transaction: committed when this returns.

        Each trace they belong to is made or touched (last seen now, one receipt more, its root's end noted);
        spans and records of a trace already mapped are kept and marked late. Sent again, nothing is added."""
        spans, logs = list(spans), list(logs)
        now = utcnow()
        touched: dict[str, dict] = {}
        for sp in spans:
            t = touched.setdefault(sp["trace_id"], {"root_ended": False, "start_ns": None})
            if not sp.get("parent_span_id") and sp.get("end_ns"):
                t["root_ended"] = True
            start = sp.get("start_ns") or None
            if start is not None and (t["start_ns"] is None or start < t["start_ns"]):
                t["start_ns"] = start
        for lg in logs:
            if lg.get("trace_id"):
                touched.setdefault(lg["trace_id"], {"root_ended": False, "start_ns": None})
        with self.engine.begin() as conn:
            mapped = self._touch_traces(conn, project, touched, now)
            self._insert_new(conn, MonitorSpanRow.__table__, [
                {"project": project, "trace_id": sp["trace_id"], "span_id": sp["span_id"],
                 "parent_span_id": sp.get("parent_span_id") or "", "name": sp.get("name") or "",
                 "start_ns": sp.get("start_ns") or 0, "end_ns": sp.get("end_ns") or 0, "data": sp,
                 "received_at": now, "late": sp["trace_id"] in mapped} for sp in spans])
            self._insert_new(conn, MonitorLogRow.__table__, [
                {"project": project, "trace_id": lg.get("trace_id") or "", "digest": _digest(lg),
                 "time_ns": lg.get("time_ns") or 0, "data": lg, "received_at": now,
                 "late": (lg.get("trace_id") or "") in mapped} for lg in logs])

    def _insert_new(self, conn, table, rows: list[dict]) -> None:
        """``INSERT ... ON CONFLICT DO NOTHING`` of ``rows``; on SQLite through the driver's executemany, each value
        made by its column type's own bind processor (SQLAlchemy's per-row parameter handling was half a 512-span
        request's write); on PostgreSQL, from ``pgfast.COPY_FROM`` rows, COPY into a staging table and one
        ``INSERT ... SELECT`` (a key given twice keeps its first row on every path)."""
        if not rows:
            return
        from evaluators.store import pgfast

        if self.engine.dialect.name == "postgresql" and len(rows) >= pgfast.COPY_FROM:
            pgfast.copy_insert_new(conn, table, rows)
            return
        if self.engine.dialect.name != "sqlite":
            conn.execute(self._insert_ignore(table), rows)
            return
        dialect, cols = self.engine.dialect, list(table.columns)
        procs = [c.type.dialect_impl(dialect).bind_processor(dialect) for c in cols]
        sql = (f"INSERT INTO {table.name} ({', '.join(c.name for c in cols)}) VALUES ({', '.join('?' for _ in cols)}) "
               "ON CONFLICT DO NOTHING")
        conn.exec_driver_sql(sql, [tuple(v if f is None else f(v) for f, v in zip(procs, (r[c.name] for c in cols)))
                                   for r in rows])

    def _dialect_insert(self, table):
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _insert_ignore(self, table):
        return self._dialect_insert(table).on_conflict_do_nothing()

    def _touch_traces(self, conn, project: str, touched: dict[str, dict], now: dt.datetime) -> set[str]:
        """Upsert the traces' rows in one statement (in trace-id order, so two receivers lock rows in the same
        order); returns the ids of those already mapped (read under the row's lock, so after any mapping)."""
        if not touched:
            return set()
        t = MonitorTraceRow.__table__
        rows = [{"project": project, "trace_id": tid, "first_seen": now, "last_seen": now, "receipts": 1,
                 "root_ended": v["root_ended"], "start_ns": v["start_ns"], "status": "open"}
                for tid, v in sorted(touched.items())]
        stmt, params = self._dialect_insert(t), rows
        if self.engine.dialect.name == "postgresql":
            stmt, params = stmt.from_select(list(rows[0]), self._unnested(t, rows)), None
        ex = stmt.excluded
        # one statement for any number of rows (SQLAlchemy's insertmanyvalues batches it, RETURNING included), so
        # it is compiled once: a VALUES list of each batch's length was compiled anew each time (0.1 s a batch)
        stmt = stmt.on_conflict_do_update(index_elements=["project", "trace_id"], set_={
            "last_seen": ex.last_seen, "receipts": t.c.receipts + 1,
            "root_ended": t.c.root_ended | ex.root_ended,
            "start_ns": case((t.c.start_ns.is_(None), ex.start_ns), (ex.start_ns.is_(None), t.c.start_ns),
                             (ex.start_ns < t.c.start_ns, ex.start_ns), else_=t.c.start_ns)})
        rows = conn.execute(stmt.returning(t.c.trace_id, t.c.status), params).all()
        return {r.trace_id for r in rows if r.status == "mapped"}

    @staticmethod
    def _unnested(t, rows: list[dict]):
        """PostgreSQL: ``rows`` (of the same keys) as a SELECT from their columns as arrays, unnested, in trace-id
        order: one short statement whose text psycopg parses once and the server prepares, where
        insertmanyvalues' VALUES list of a request's 128 traces was parsed anew by psycopg (a third of a 512-span
        request's write in the receiver's process)."""
        from sqlalchemy import ARRAY, bindparam, literal

        varying = ("trace_id", "root_ended", "start_ns")
        u = func.unnest(*(bindparam(k, [r[k] for r in rows], type_=ARRAY(t.c[k].type)) for k in varying)
                        ).table_valued(*varying).render_derived("incoming")
        return select(*(u.c[k] if k in varying else literal(v, t.c[k].type) for k, v in rows[0].items())
                      ).order_by(u.c.trace_id)

    # ------------------------------------------------------------ assembling
    def due_traces(self, project: str, quiet_before: dt.datetime, give_up_before: dt.datetime,
                   limit: int = 200) -> list[dict[str, Any]]:
        """Open traces of ``project`` silent since before ``quiet_before`` whose root span has ended, or silent
        since before ``give_up_before`` whatever their root: (trace_id, receipts, root_ended), oldest first."""
        t = MonitorTraceRow
        q = (select(t.trace_id, t.receipts, t.root_ended).where(
            t.status == "open", t.project == project,
            ((t.last_seen < quiet_before) & t.root_ended) | (t.last_seen < give_up_before))
             .order_by(t.last_seen).limit(limit))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def trace_parts(self, project: str, trace_id: str) -> tuple[list[dict], list[dict]]:
        """A trace's spans (by start) and log records (by time), as received."""
        with self.session() as s:
            spans = s.scalars(select(MonitorSpanRow.data).where(MonitorSpanRow.project == project,
                                                                MonitorSpanRow.trace_id == trace_id)
                              .order_by(MonitorSpanRow.start_ns, MonitorSpanRow.span_id)).all()
            logs = s.scalars(select(MonitorLogRow.data).where(MonitorLogRow.project == project,
                                                              MonitorLogRow.trace_id == trace_id)
                             .order_by(MonitorLogRow.time_ns, MonitorLogRow.digest)).all()
        return list(spans), list(logs)

    def save_mapped_trace(self, project: str, trace_id: str, receipts: int, *, fields: dict, sources: dict,
                          content: bool, hint: str, conversation_key: str | None, completeness: str,
                          facts: dict | None = None) -> bool:
        """Store a trace's row, if no span of it came since it was read (``receipts`` unchanged). Returns
        whether it was stored (else the trace stays open and is mapped again after its next quiet period)."""
        t = MonitorTraceRow
        with self.engine.begin() as conn:
            n = conn.execute(update(t).where(t.project == project, t.trace_id == trace_id, t.status == "open",
                                             t.receipts == receipts)
                             .values(status="mapped", mapped_at=utcnow(), fields=fields, sources=sources,
                                     content=content, hint=hint, conversation_key=conversation_key,
                                     completeness=completeness, facts=facts, **fact_columns(facts))).rowcount
        return n == 1

    # ------------------------------------------------------------ reading
    def trace_counts(self, project: str) -> dict[str, int]:
        """How many traces the project has, by state: open (waiting for the end of their root span or their quiet
        period), mapped (a row: with content, no content, no root) and with late spans; where the project has
        conversations, how many (``conversations``: rows of their own, not counted as traces) and how many traces
        came after their conversation was assembled (``late_turns``)."""
        t = MonitorTraceRow
        with self.session() as s:
            rows = s.execute(select(t.status, t.content, t.completeness, func.count())
                             .where(t.project == project, t.kind == "trace")
                             .group_by(t.status, t.content, t.completeness)).all()
            talks = s.execute(select(t.kind, func.count()).where(t.project == project, (t.kind == "conversation")
                                                                 | t.late).group_by(t.kind)).all()
            late = s.scalar(select(func.count(func.distinct(MonitorSpanRow.trace_id))).where(
                MonitorSpanRow.project == project, MonitorSpanRow.late == True))  # noqa: E712 (indexed)
            spans = s.scalar(select(func.count()).select_from(MonitorSpanRow).where(MonitorSpanRow.project == project))
        out = {"traces": 0, "open": 0, "mapped": 0, "no_content": 0, "no_root": 0, "late": int(late or 0),
               "spans": int(spans or 0)}
        for status, content, completeness, n in rows:
            out["traces"] += n
            out[status] = out.get(status, 0) + n
            if status == "mapped" and content is False:
                out["no_content"] += n
            if completeness == "no_root":
                out["no_root"] += n
        if talks:  # (said only where there are conversations: each a row of its own, and late turns left out)
            got = dict(talks)
            out.update(conversations=int(got.get("conversation", 0)), late_turns=int(got.get("trace", 0)))
        return out

    def iter_mapped_traces(self, project: str, since_ns: int | None = None, until_ns: int | None = None,
                           chunk: int = 500) -> Iterator[dict[str, Any]]:
        """The project's mapped traces in start order (``since_ns`` <= start < ``until_ns``), ``chunk`` at a time."""
        t = MonitorTraceRow
        cols = (t.trace_id, t.start_ns, t.fields, t.sources, t.content, t.hint, t.completeness, t.conversation_key,
                t.first_seen, t.kind, t.late)
        after: tuple[int, str] | None = None
        while True:
            q = select(*cols).where(t.project == project, t.status == "mapped")
            if since_ns is not None:
                q = q.where(t.start_ns >= since_ns)
            if until_ns is not None:
                q = q.where(t.start_ns < until_ns)
            if after is not None:
                q = q.where((func.coalesce(t.start_ns, 0) > after[0])
                            | ((func.coalesce(t.start_ns, 0) == after[0]) & (t.trace_id > after[1])))
            q = q.order_by(func.coalesce(t.start_ns, 0), t.trace_id).limit(chunk)
            with self.session() as s:
                rows = [dict(r._mapping) for r in s.execute(q)]
            yield from rows
            if len(rows) < chunk:
                return
            after = (rows[-1]["start_ns"] or 0, rows[-1]["trace_id"])
