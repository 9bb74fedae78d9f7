"""The Monitoring page's reads over time (issue 32): the facts it counts per window (model, service, the resource's
``service.version``, latency, tokens, error) as columns of ``monitor_traces``, filled from each stored trace's
``facts`` here and by ``store.traces.fact_columns`` when a trace is mapped; and one index by a project's traces'
start time carrying them, so the traffic, the slices and the deploys read a range of one index rather than each
trace's JSON; and each decision's trace's start copied into ``monitor_decisions.start_ns`` (by the store when a
decision is stored), indexed by rule, so a window's decisions and judged traces are found without visiting every
trace (bench/RESULTS.md: a week of 1,000,000 traces).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = (("model", sa.String(200)), ("service", sa.String(200)), ("service_version", sa.String(200)),
           ("latency_ms", sa.Float()), ("tokens", sa.BigInteger()), ("error", sa.Boolean()))
STATE = ["project", "kind", "status", "content", "completeness", "late"]
INDEX = ["project", "start_ns", "kind", "model", "service", "service_version", "latency_ms", "tokens", "error"]
# each column from the facts, as fact_columns reads them (a text, a number, a boolean; NULL otherwise)
FILL = {
    "sqlite": """UPDATE monitor_traces SET
        model = CASE WHEN json_type(facts, '$.model') = 'text' THEN substr(json_extract(facts, '$.model'), 1, 200) END,
        service = CASE WHEN json_type(facts, '$.service_name') = 'text'
                       THEN substr(json_extract(facts, '$.service_name'), 1, 200) END,
        service_version = CASE WHEN json_type(facts, '$.attributes."service.version"') = 'text'
                               THEN substr(json_extract(facts, '$.attributes."service.version"'), 1, 200) END,
        latency_ms = CASE WHEN json_type(facts, '$.latency_ms') IN ('integer', 'real')
                          THEN json_extract(facts, '$.latency_ms') END,
        tokens = CASE WHEN json_type(facts, '$.tokens') IN ('integer', 'real')
                      THEN CAST(json_extract(facts, '$.tokens') AS INTEGER) END,
        error = CASE json_type(facts, '$.error') WHEN 'true' THEN 1 WHEN 'false' THEN 0 END
        WHERE facts IS NOT NULL AND json_valid(facts)""",
    "postgresql": """UPDATE monitor_traces SET
        model = CASE WHEN json_typeof(facts->'model') = 'string' THEN left(facts->>'model', 200) END,
        service = CASE WHEN json_typeof(facts->'service_name') = 'string' THEN left(facts->>'service_name', 200) END,
        service_version = CASE WHEN json_typeof(facts#>'{attributes,service.version}') = 'string'
                               THEN left(facts#>>'{attributes,service.version}', 200) END,
        latency_ms = CASE WHEN json_typeof(facts->'latency_ms') = 'number' THEN (facts->>'latency_ms')::float END,
        tokens = CASE WHEN json_typeof(facts->'tokens') = 'number' THEN (facts->>'tokens')::float::bigint END,
        error = CASE WHEN json_typeof(facts->'error') = 'boolean' THEN (facts->>'error')::boolean END
        WHERE facts IS NOT NULL AND json_typeof(facts) = 'object'""",
}


DECISION_START = """UPDATE monitor_decisions SET start_ns = (SELECT t.start_ns FROM monitor_traces t
    WHERE t.project = monitor_decisions.project AND t.trace_id = monitor_decisions.trace_id)"""


def upgrade() -> None:
    with op.batch_alter_table("monitor_traces") as batch:  # SQLite: ADD COLUMN in place (nullable columns)
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    op.execute(FILL[op.get_bind().dialect.name])
    op.create_index("ix_monitor_traces_time", "monitor_traces", INDEX)
    # the traffic counts' index (0008) with kind and late: counts by state of traces only, and of late turns, read
    # from the index alone (they visited every trace's row: 0.7 s and 0.6 s on a million)
    op.drop_index("ix_monitor_traces_state", table_name="monitor_traces")
    op.create_index("ix_monitor_traces_state", "monitor_traces", STATE)
    with op.batch_alter_table("monitor_decisions") as batch:
        batch.add_column(sa.Column("start_ns", sa.BigInteger(), nullable=True))
    op.execute(DECISION_START)
    op.create_index("ix_monitor_decisions_time", "monitor_decisions", ["project", "rule", "start_ns", "decision"])


def downgrade() -> None:
    op.drop_index("ix_monitor_traces_state", table_name="monitor_traces")
    op.create_index("ix_monitor_traces_state", "monitor_traces", ["project", "status", "content", "completeness"])
    op.drop_index("ix_monitor_decisions_time", table_name="monitor_decisions")
    with op.batch_alter_table("monitor_decisions") as batch:
        batch.drop_column("start_ns")
    op.drop_index("ix_monitor_traces_time", table_name="monitor_traces")
    with op.batch_alter_table("monitor_traces") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
