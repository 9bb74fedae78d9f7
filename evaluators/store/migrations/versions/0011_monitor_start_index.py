"""An index for the Monitoring page's reads over time (issue 32): a project's traces by their own start time
(project, start_ns), so a series, the traffic per window, the slice pickers and the deploys of a range start from
that range's traces rather than from every judged decision of the rule (bench/RESULTS.md: the last day by 5 min on
a week of 1,000,000 traces).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""
from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_monitor_traces_start", "monitor_traces", ["project", "start_ns"])


def downgrade() -> None:
    op.drop_index("ix_monitor_traces_start", table_name="monitor_traces")
