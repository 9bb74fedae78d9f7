"""The store's tables (SQLAlchemy): datasets and their records, runs, per-row results and the judge-call cache;
and ``Result``, one result as the engine passes it around. A change here is an Alembic revision too (migrate.py)."""
from __future__ import annotations

import datetime as dt
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column



# The Alembic revision these tables are (migrations/versions); a test checks it is the newest there.
SCHEMA_REVISION = "0012"
RUN_STATUSES = ("queued", "running", "completed", "failed", "cancelled")
# A worker reports twice a second; one silent this long has stopped.
HEARTBEAT_STALE = dt.timedelta(seconds=30)
# Dataset records (and results) read or written at a time on the paths that stream.
RECORD_CHUNK = 2000


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class DatasetRow(Base):
    __tablename__ = "datasets"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    source: Mapped[str] = mapped_column(String(300))
    content_hash: Mapped[str] = mapped_column(String(64), index=True)
    shape: Mapped[str] = mapped_column(String(20))
    detected: Mapped[str] = mapped_column(String(40))
    n_rows: Mapped[int] = mapped_column(Integer)
    columns: Mapped[list] = mapped_column(JSON)
    mapping: Mapped[dict] = mapped_column(JSON)
    row_numbers: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the signed-in user, if any
    archived_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # hidden from lists and pickers


class RecordRow(Base):
    __tablename__ = "dataset_records"
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[dict] = mapped_column(JSON)


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    spec: Mapped[dict] = mapped_column(JSON)
    spec_hash: Mapped[str] = mapped_column(String(32))
    out_dir: Mapped[str | None] = mapped_column(String(1000), nullable=True, index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # the judge asked us to wait (429 / rate-limit headers) until then; None when not waiting
    rate_limited_until: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    tasks_total: Mapped[int] = mapped_column(Integer, default=0)
    tasks_done: Mapped[int] = mapped_column(Integer, default=0)
    tasks_errored: Mapped[int] = mapped_column(Integer, default=0)
    judge_calls: Mapped[int] = mapped_column(Integer, default=0)
    cache_hits: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the signed-in user, if any
    archived_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # hidden from lists and pickers


class ChunkRow(Base):
    """A part of a queued run (rows ``start`` to ``stop``), done by one worker at a time (the job queue on
    PostgreSQL); the run's own progress is the sum of its chunks'."""

    __tablename__ = "run_chunks"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    start: Mapped[int] = mapped_column(Integer, primary_key=True)
    stop: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="queued")  # queued | running | completed | failed | cancelled
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)  # host:pid doing it
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    judge_key: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)  # workers sharing a judge
    paused_until: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # the judge asked this worker to wait
    pace: Mapped[float | None] = mapped_column(Float, nullable=True)  # calls/s it learned the judge allows
    tasks_total: Mapped[int] = mapped_column(Integer, default=0)
    tasks_done: Mapped[int] = mapped_column(Integer, default=0)
    tasks_errored: Mapped[int] = mapped_column(Integer, default=0)
    judge_calls: Mapped[int] = mapped_column(Integer, default=0)
    cache_hits: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class ResultRow(Base):
    __tablename__ = "results"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    row_idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(100), primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)  # 0 for single-turn rows
    status: Mapped[str] = mapped_column(String(10))  # ok | error | skipped
    value: Mapped[float | None] = mapped_column(Float, nullable=True)  # the primary output
    outputs: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    raw: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    meta: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # metric signature, prompt sha, model
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class ReviewRow(Base):
    """A person's verdict on one row's metric, once per reviewer (given again, it replaces theirs)."""

    __tablename__ = "reviews"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    row_idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(100), primary_key=True)
    reviewer: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)  # on the metric's scale; None: skipped
    agreed: Mapped[bool] = mapped_column(Boolean, default=False)  # given as "agree with the judge"
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    judge_value: Mapped[float | None] = mapped_column(Float, nullable=True)  # the judgment it answered
    judged_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # when that judgment was stored
    queue_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class QueueRow(Base):
    """A review queue: which rows of a run, for which metrics, given to whom."""

    __tablename__ = "review_queues"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    strategy: Mapped[str] = mapped_column(String(40))
    params: Mapped[dict] = mapped_column(JSON)  # seed, size, the metric stratified on...
    metrics: Mapped[list] = mapped_column(JSON)
    rows: Mapped[list] = mapped_column(JSON)  # row indices in review order
    strata: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # sampled queues: row -> stratum
    assignments: Mapped[dict] = mapped_column(JSON)  # reviewer -> row indices; "" -> anyone
    blind: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


class CacheRow(Base):
    __tablename__ = "judge_cache"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    reply: Mapped[str] = mapped_column(Text)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class BatchRow(Base):
    """A judge batch submitted to a provider's Batch API for a run: kept so that a killed CLI, a restarted
    dashboard or another worker polls it again rather than submitting its requests twice."""

    __tablename__ = "judge_batches"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer, default=1)  # 1, then retries of what failed or expired
    input_file_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    batch_id: Mapped[str | None] = mapped_column(String(200), nullable=True)  # None until the provider made it
    status: Mapped[str] = mapped_column(String(30), default="uploading")  # the provider's, or collected
    custom_ids: Mapped[list] = mapped_column(JSON)  # "row.metric.turn.repeat" of each request
    total: Mapped[int] = mapped_column(Integer, default=0)
    completed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    expires_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)  # by when the provider will have ended it
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


@dataclass
class Result:
    """One (row, metric, turn) outcome as the runner produces it."""

    row_idx: int
    metric: str
    turn: int
    status: str
    value: float | None = None
    outputs: dict | None = None
    reason: str | None = None
    raw: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    cached: bool = False
    meta: dict | None = None


def default_url() -> str:
    """``EVAL_DATABASE_URL``, else a SQLite file under ``$EVAL_HOME`` (default ``~/.evaldash``)."""
    url = os.environ.get("EVAL_DATABASE_URL")
    if url:
        return url
    home = Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash")
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'evals.db'}"


def new_id() -> str:
    return uuid.uuid4().hex[:12]

def _run_dict(r: RunRow) -> dict:
    return {c.name: getattr(r, c.name) for c in RunRow.__table__.columns}
