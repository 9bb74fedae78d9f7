"""Run chunks: a queued run's parts (rows start..stop), each done by one worker of the job queue at a time.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_chunks",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("start", sa.Integer(), primary_key=True),
        sa.Column("stop", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("worker", sa.String(200), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
        sa.Column("judge_key", sa.String(64), nullable=True),
        sa.Column("paused_until", sa.DateTime(), nullable=True),
        sa.Column("pace", sa.Float(), nullable=True),
        *[sa.Column(c, sa.Integer(), nullable=False) for c in ("tasks_total", "tasks_done", "tasks_errored",
                                                                "judge_calls", "cache_hits", "prompt_tokens",
                                                                "completion_tokens")],
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index("ix_run_chunks_judge_key", "run_chunks", ["judge_key"])


def downgrade() -> None:
    op.drop_index("ix_run_chunks_judge_key", table_name="run_chunks")
    op.drop_table("run_chunks")
