"""PostgreSQL's fast paths for the store's bulk writes: COPY (psycopg's ``cursor.copy``) instead of row-by-row
binds, into the table itself (a new dataset's records) or into a temporary table that one
``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` then merges (results and the judge cache: idempotent on their
keys, as every other path). Values are written as the ORM would store them: JSON columns as their JSON text
(``None`` as JSON ``null``, as SQLAlchemy's JSON type writes it), everything else as it is."""
from __future__ import annotations

import json
from typing import Any, Iterable

from sqlalchemy import JSON, Table

# Batches smaller than this go through the ordinary multi-row INSERT (a temporary table costs a few statements).
COPY_FROM = 64


def _driver(conn):
    """The psycopg connection under a SQLAlchemy connection (in its transaction)."""
    return conn.connection.driver_connection


def _encoders(table: Table, cols: list[str]):
    kinds = {c.name: isinstance(c.type, JSON) for c in table.columns}
    return [(n, kinds[n]) for n in cols]


def copy_rows(conn, table: Table, rows: Iterable[dict[str, Any]], cols: list[str] | None = None,
              into: str | None = None) -> int:
    """COPY ``rows`` (dicts by column name) into ``table`` (or the table named ``into``, of the same columns);
    returns how many."""
    cols = cols or [c.name for c in table.columns]
    enc = _encoders(table, cols)
    n = 0
    with _driver(conn).cursor() as cur:
        with cur.copy(f"COPY {into or table.name} ({', '.join(cols)}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row([json.dumps(r.get(name)) if is_json else r.get(name) for name, is_json in enc])
                n += 1
    return n


def copy_upsert(conn, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert or replace ``rows`` by ``table``'s primary key: COPY into a temporary table, then one merge.
    A key given twice keeps its last row (as the row-by-row paths do)."""
    keys = [c.name for c in table.primary_key.columns]
    last = {tuple(r[k] for k in keys): r for r in rows}
    cols = [c.name for c in table.columns]
    tmp = f"_incoming_{table.name}"
    with _driver(conn).cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} (LIKE {table.name}) ON COMMIT DELETE ROWS")
    copy_rows(conn, table, last.values(), cols, into=tmp)
    names = ", ".join(cols)
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in keys)
    with _driver(conn).cursor() as cur:
        cur.execute(f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {tmp} "
                    f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}")
        cur.execute(f"DELETE FROM {tmp}")  # (ON COMMIT empties it too; this keeps a later batch of the same
        # transaction from merging these rows again)
