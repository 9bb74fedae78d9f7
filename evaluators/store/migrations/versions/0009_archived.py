"""Archived runs and datasets: ``archived_at`` on both (None: shown in every list and picker; a time: hidden from
them by default, kept whole; the Runs page's "Show archived" lists them). Nullable: every stored row stays valid.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("runs", "datasets"):
        with op.batch_alter_table(table) as batch:  # SQLite: ADD COLUMN in place (a nullable column)
            batch.add_column(sa.Column("archived_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    for table in ("runs", "datasets"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("archived_at")
