"""A run's Batch API batches (judge_batches) and the team's saved metrics (saved_metrics).

Both tables came to main beside the migrations (the judge-cost and your-own-metrics work), so a store written by
main in between already has them, made by its own start-up: each is created only where it is absent.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = set(sa.inspect(op.get_bind()).get_table_names())
    if "judge_batches" not in have:
        op.create_table(
            "judge_batches",
            sa.Column("id", sa.String(32), primary_key=True),
            sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
            sa.Column("round", sa.Integer(), nullable=False),
            sa.Column("input_file_id", sa.String(200), nullable=True),
            sa.Column("batch_id", sa.String(200), nullable=True),
            sa.Column("status", sa.String(30), nullable=False),
            sa.Column("custom_ids", sa.JSON(), nullable=False),
            sa.Column("total", sa.Integer(), nullable=False),
            sa.Column("completed", sa.Integer(), nullable=False),
            sa.Column("failed", sa.Integer(), nullable=False),
            sa.Column("expires_at", sa.DateTime(), nullable=True),
            sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.Column("updated_at", sa.DateTime(), nullable=False),
        )
        op.create_index("ix_judge_batches_run_id", "judge_batches", ["run_id"])
    if "saved_metrics" not in have:
        op.create_table(
            "saved_metrics",
            sa.Column("name", sa.String(63), primary_key=True),
            sa.Column("version", sa.Integer(), primary_key=True),
            sa.Column("format", sa.String(20), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("description", sa.Text(), nullable=False),
            sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.Column("created_by", sa.String(200), nullable=True),
        )


def downgrade() -> None:
    op.drop_table("saved_metrics")
    op.drop_index("ix_judge_batches_run_id", table_name="judge_batches")
    op.drop_table("judge_batches")
