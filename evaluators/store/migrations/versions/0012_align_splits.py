"""Alignment's splits: ``align_splits`` assigns each reviewed (run, row, metric) once to train, dev or test (with
the human verdict it was dealt in and the seed), never reassigned; ``align_test_uses`` counts the decisions each
metric's test split was used for; ``align_promotions`` says where each saved metric version alignment promoted came
from (store/align_splits.py).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "align_splits",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("row_idx", sa.Integer(), primary_key=True),
        sa.Column("metric", sa.String(100), primary_key=True),
        sa.Column("split", sa.String(5), nullable=False),
        sa.Column("stratum", sa.String(20), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "align_test_uses",
        sa.Column("metric", sa.String(100), primary_key=True),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "align_promotions",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("align_promotions")
    op.drop_table("align_test_uses")
    op.drop_table("align_splits")
