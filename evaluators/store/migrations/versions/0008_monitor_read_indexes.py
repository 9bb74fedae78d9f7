"""Indexes for the Monitoring page's reads on a project of a million traces (evaluators/read/monitor.py): the trace
list newest first and its time range (project, first_seen, trace_id), the traffic counts by state without reading
the rows (project, status, content, completeness), the traces with late spans (project, late, trace_id) and each
rule's decision counts and the traces of a rare decision (project, rule, rule_version, decision, trace_id).

Revision ID: 0008
Revises: 0006
Create Date: 2026-11-28
"""
from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None

INDEXES = (("ix_monitor_traces_recent", "monitor_traces", ["project", "first_seen", "trace_id"]),
           ("ix_monitor_traces_state", "monitor_traces", ["project", "status", "content", "completeness"]),
           ("ix_monitor_spans_late", "monitor_spans", ["project", "late", "trace_id"]),
           ("ix_monitor_decisions_rule", "monitor_decisions", ["project", "rule", "rule_version", "decision",
                                                                     "trace_id"]))


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        op.drop_index(name, table_name=table)
