"""Monitoring rules' filters and limits: what a mapped trace carries for filters (``monitor_traces.facts``: model,
service, span names, attributes, errors, latency, tokens, cost, feedback), and per rule version its filter, hourly
cap, daily budget and the prices the budget is counted at (evaluators/store/monitor_rules.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("monitor_traces", sa.Column("facts", sa.JSON(), nullable=True))
    op.add_column("monitor_rules", sa.Column("filter", sa.Text(), nullable=True))
    op.add_column("monitor_rules", sa.Column("max_per_hour", sa.Integer(), nullable=True))
    op.add_column("monitor_rules", sa.Column("budget_per_day", sa.Float(), nullable=True))
    op.add_column("monitor_rules", sa.Column("prices", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("monitor_rules") as b:
        for c in ("prices", "budget_per_day", "max_per_hour", "filter"):
            b.drop_column(c)
    with op.batch_alter_table("monitor_traces") as b:
        b.drop_column("facts")
