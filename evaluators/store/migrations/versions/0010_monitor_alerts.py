"""Alerts (issue 32): alert rules (a project's rate, judged share or traffic watched, its webhook and the NAME of the
variable holding the webhook's secret, never the secret; the statistic it carries from round to round) and the
alerts they raised (fired and resolved in event time, the rate with its interval and n, the text, the delivery, who
acknowledged it); an index on decisions by the time they were decided, what alerts read each round.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "monitor_alert_rules",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("rule", sa.String(200), nullable=True),
        sa.Column("metric", sa.String(200), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("min_n", sa.Integer(), nullable=False),
        sa.Column("webhook_url", sa.Text(), nullable=True),
        sa.Column("secret_env", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.Column("busy_until", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("project", "name", name="uq_monitor_alert_rules_name"),
    )
    op.create_table(
        "monitor_alert_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("rule_id", sa.Integer(), sa.ForeignKey("monitor_alert_rules.id"), nullable=False),
        sa.Column("fired_ns", sa.BigInteger(), nullable=False),
        sa.Column("resolved_ns", sa.BigInteger(), nullable=True),
        sa.Column("fired_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.Column("rate", sa.Float(), nullable=True),
        sa.Column("low", sa.Float(), nullable=True),
        sa.Column("high", sa.Float(), nullable=True),
        sa.Column("n", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("delivery", sa.String(20), nullable=False),
        sa.Column("delivery_error", sa.Text(), nullable=True),
        sa.Column("acked_by", sa.String(200), nullable=True),
        sa.Column("acked_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_monitor_alert_events_rule", "monitor_alert_events", ["rule_id", "fired_ns"])
    op.create_index("ix_monitor_decisions_decided", "monitor_decisions", ["project", "rule", "decided_at"])


def downgrade() -> None:
    op.drop_index("ix_monitor_decisions_decided", table_name="monitor_decisions")
    op.drop_table("monitor_alert_events")
    op.drop_table("monitor_alert_rules")
