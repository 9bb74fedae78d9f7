"""Monitoring: a project's redaction (kinds, its own patterns, whether originals are kept, the secret its digests
are keyed with) and its conversations' quiet period; the redaction tokens of each trace or conversation
(store/monitor_redact.py); traces' kind (a conversation's row is one), the conversation a trace is a turn of, and
whether it came after its conversation was assembled (store/monitor_conversations.py).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("monitor_projects") as b:
        b.add_column(sa.Column("redact_kinds", sa.JSON(), nullable=True))
        b.add_column(sa.Column("redact_patterns", sa.JSON(), nullable=True))
        b.add_column(sa.Column("keep_original", sa.Boolean(), server_default=sa.false(), nullable=False))
        b.add_column(sa.Column("redact_secret", sa.String(64), nullable=True))
        b.add_column(sa.Column("conversation_quiet_seconds", sa.Float(), server_default="300.0", nullable=False))
    with op.batch_alter_table("monitor_traces") as b:
        b.add_column(sa.Column("kind", sa.String(20), server_default="trace", nullable=False))
        b.add_column(sa.Column("in_conversation", sa.String(32), nullable=True))
        b.add_column(sa.Column("late", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_index("ix_monitor_traces_turns", "monitor_traces", ["project", "late", "in_conversation",
                                                                  "conversation_key"])
    op.create_table(
        "monitor_redactions",
        sa.Column("project", sa.String(200), primary_key=True),
        sa.Column("scope", sa.String(80), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("label", sa.String(40), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("original", sa.Text(), nullable=True),
        sa.UniqueConstraint("project", "scope", "label", "number", name="uq_monitor_redactions_token"),
    )


def downgrade() -> None:
    op.drop_table("monitor_redactions")
    op.drop_index("ix_monitor_traces_turns", table_name="monitor_traces")
    with op.batch_alter_table("monitor_traces") as b:
        for name in ("late", "in_conversation", "kind"):
            b.drop_column(name)
    with op.batch_alter_table("monitor_projects") as b:
        for name in ("conversation_quiet_seconds", "redact_secret", "keep_original", "redact_patterns", "redact_kinds"):
            b.drop_column(name)
