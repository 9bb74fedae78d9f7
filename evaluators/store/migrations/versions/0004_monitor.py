"""Production traffic (``python -m evaluators monitor``): projects, ingest tokens (hashed), received spans and log
records, and the traces they make (evaluators/store/traces.py); rules and their decisions per trace
(evaluators/store/monitor_rules.py).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "monitor_projects",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("quiet_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "monitor_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("project", sa.String(200), sa.ForeignKey("monitor_projects.name"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("ix_monitor_tokens_project", "monitor_tokens", ["project"])
    op.create_table(
        "monitor_traces",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("trace_id", sa.String(32), primary_key=True),
        sa.Column("first_seen", sa.DateTime(), nullable=False),
        sa.Column("last_seen", sa.DateTime(), nullable=False),
        sa.Column("receipts", sa.Integer(), nullable=False),
        sa.Column("root_ended", sa.Boolean(), nullable=False),
        sa.Column("start_ns", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("completeness", sa.String(20), nullable=True),
        sa.Column("mapped_at", sa.DateTime(), nullable=True),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.Column("sources", sa.JSON(), nullable=True),
        sa.Column("content", sa.Boolean(), nullable=True),
        sa.Column("hint", sa.Text(), nullable=True),
        sa.Column("conversation_key", sa.String(300), nullable=True),
    )
    op.create_index("ix_monitor_traces_conversation_key", "monitor_traces", ["conversation_key"])
    op.create_index("ix_monitor_traces_due", "monitor_traces", ["status", "last_seen"])
    op.create_table(
        "monitor_spans",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("trace_id", sa.String(32), primary_key=True),
        sa.Column("span_id", sa.String(16), primary_key=True),
        sa.Column("parent_span_id", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("start_ns", sa.BigInteger(), nullable=False),
        sa.Column("end_ns", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("late", sa.Boolean(), nullable=False),
    )
    op.create_table(
        "monitor_logs",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("trace_id", sa.String(32), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("time_ns", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("late", sa.Boolean(), nullable=False),
    )
    _rules()


def _rules() -> None:
    op.create_table(
        "monitor_rules",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("sample_rate", sa.Float(), nullable=False),
        sa.Column("judge", sa.JSON(), nullable=True),
        sa.Column("key_env", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "monitor_decisions",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("trace_id", sa.String(32), primary_key=True),
        sa.Column("rule", sa.String(200), primary_key=True),
        sa.Column("rule_version", sa.Integer(), primary_key=True),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("row_idx", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("monitor_decisions")
    op.drop_table("monitor_rules")
    op.drop_table("monitor_logs")
    op.drop_table("monitor_spans")
    op.drop_index("ix_monitor_traces_due", table_name="monitor_traces")
    op.drop_index("ix_monitor_traces_conversation_key", table_name="monitor_traces")
    op.drop_table("monitor_traces")
    op.drop_index("ix_monitor_tokens_project", table_name="monitor_tokens")
    op.drop_table("monitor_tokens")
    op.drop_table("monitor_projects")
