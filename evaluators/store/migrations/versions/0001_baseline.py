"""Baseline: the store's schema as the code before migrations (main at 826eb69) made it.

A fresh database gets every table. A store written before migrations existed (it has tables but no
``alembic_version``) keeps its tables and rows: a table it lacks is created (reviews and review queues are
recent), and a nullable column it lacks (``created_by``, ``rate_limited_until``) is added, as that code did
in place when it opened an older store.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The tables as they were at this revision (frozen here: later revisions change them, not this file).
m = sa.MetaData()
sa.Table("datasets", m,
         sa.Column("id", sa.String(32), primary_key=True),
         sa.Column("name", sa.String(300), nullable=False),
         sa.Column("source", sa.String(300), nullable=False),
         sa.Column("content_hash", sa.String(64), nullable=False, index=True),
         sa.Column("shape", sa.String(20), nullable=False),
         sa.Column("detected", sa.String(40), nullable=False),
         sa.Column("n_rows", sa.Integer(), nullable=False),
         sa.Column("columns", sa.JSON(), nullable=False),
         sa.Column("mapping", sa.JSON(), nullable=False),
         sa.Column("row_numbers", sa.JSON(), nullable=False),
         sa.Column("created_at", sa.DateTime(), nullable=False),
         sa.Column("created_by", sa.String(200), nullable=True))
sa.Table("judge_cache", m,
         sa.Column("key", sa.String(64), primary_key=True),
         sa.Column("model", sa.String(200), nullable=False),
         sa.Column("reply", sa.Text(), nullable=False),
         sa.Column("prompt_tokens", sa.Integer(), nullable=True),
         sa.Column("completion_tokens", sa.Integer(), nullable=True),
         sa.Column("latency_ms", sa.Float(), nullable=True),
         sa.Column("created_at", sa.DateTime(), nullable=False))
sa.Table("dataset_records", m,
         sa.Column("dataset_id", sa.String(32), sa.ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True),
         sa.Column("idx", sa.Integer(), primary_key=True),
         sa.Column("data", sa.JSON(), nullable=False))
sa.Table("runs", m,
         sa.Column("id", sa.String(32), primary_key=True),
         sa.Column("dataset_id", sa.String(32), sa.ForeignKey("datasets.id"), nullable=False, index=True),
         sa.Column("name", sa.String(300), nullable=False),
         sa.Column("status", sa.String(20), nullable=False, index=True),
         sa.Column("spec", sa.JSON(), nullable=False),
         sa.Column("spec_hash", sa.String(32), nullable=False),
         sa.Column("out_dir", sa.String(1000), nullable=True, index=True),
         sa.Column("created_at", sa.DateTime(), nullable=False),
         sa.Column("started_at", sa.DateTime(), nullable=True),
         sa.Column("finished_at", sa.DateTime(), nullable=True),
         sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
         sa.Column("rate_limited_until", sa.DateTime(), nullable=True),
         sa.Column("cancel_requested", sa.Boolean(), nullable=False),
         *[sa.Column(c, sa.Integer(), nullable=False) for c in ("tasks_total", "tasks_done", "tasks_errored",
                                                                 "judge_calls", "cache_hits", "prompt_tokens",
                                                                 "completion_tokens")],
         sa.Column("error", sa.Text(), nullable=True),
         sa.Column("created_by", sa.String(200), nullable=True))
sa.Table("results", m,
         sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
         sa.Column("row_idx", sa.Integer(), primary_key=True),
         sa.Column("metric", sa.String(100), primary_key=True),
         sa.Column("turn", sa.Integer(), primary_key=True),
         sa.Column("status", sa.String(10), nullable=False),
         sa.Column("value", sa.Float(), nullable=True),
         sa.Column("outputs", sa.JSON(), nullable=True),
         sa.Column("reason", sa.Text(), nullable=True),
         sa.Column("raw", sa.Text(), nullable=True),
         sa.Column("error", sa.Text(), nullable=True),
         sa.Column("prompt_tokens", sa.Integer(), nullable=True),
         sa.Column("completion_tokens", sa.Integer(), nullable=True),
         sa.Column("latency_ms", sa.Float(), nullable=True),
         sa.Column("cached", sa.Boolean(), nullable=False),
         sa.Column("meta", sa.JSON(), nullable=True),
         sa.Column("created_at", sa.DateTime(), nullable=False))
sa.Table("review_queues", m,
         sa.Column("id", sa.String(32), primary_key=True),
         sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
         sa.Column("name", sa.String(300), nullable=False),
         sa.Column("strategy", sa.String(40), nullable=False),
         sa.Column("params", sa.JSON(), nullable=False),
         sa.Column("metrics", sa.JSON(), nullable=False),
         sa.Column("rows", sa.JSON(), nullable=False),
         sa.Column("strata", sa.JSON(), nullable=True),
         sa.Column("assignments", sa.JSON(), nullable=False),
         sa.Column("blind", sa.Boolean(), nullable=False),
         sa.Column("created_at", sa.DateTime(), nullable=False),
         sa.Column("created_by", sa.String(200), nullable=True))
sa.Table("reviews", m,
         sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
         sa.Column("row_idx", sa.Integer(), primary_key=True),
         sa.Column("metric", sa.String(100), primary_key=True),
         sa.Column("reviewer", sa.String(200), primary_key=True),
         sa.Column("value", sa.Float(), nullable=True),
         sa.Column("agreed", sa.Boolean(), nullable=False),
         sa.Column("note", sa.Text(), nullable=True),
         sa.Column("judge_value", sa.Float(), nullable=True),
         sa.Column("judged_at", sa.DateTime(), nullable=True),
         sa.Column("queue_id", sa.String(32), nullable=True, index=True),
         sa.Column("created_at", sa.DateTime(), nullable=False))


def upgrade() -> None:
    bind = op.get_bind()
    have = set(sa.inspect(bind).get_table_names())
    for table in m.sorted_tables:
        if table.name not in have:
            table.create(bind)
            continue
        cols = {c["name"] for c in sa.inspect(bind).get_columns(table.name)}
        missing = [c for c in table.columns if c.name not in cols]
        if missing:
            with op.batch_alter_table(table.name) as batch:
                for c in missing:  # only nullable columns were ever added after a table was first made
                    batch.add_column(sa.Column(c.name, c.type, nullable=True))


def downgrade() -> None:
    for table in reversed(m.sorted_tables):
        op.drop_table(table.name)
