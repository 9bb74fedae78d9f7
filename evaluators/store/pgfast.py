"""PostgreSQL's fast paths for the store's bulk writes: COPY (psycopg's ``cursor.copy``) instead of row-by-row
binds, into the table itself (a new dataset's records) or into a temporary table that one
``INSERT ... SELECT ... ON CONFLICT`` then merges: ``DO UPDATE`` for results and the judge cache, ``DO NOTHING``
for the monitor's spans and log records (idempotent on their keys, as every other path). Values are written as
the ORM would store them: JSON columns as their JSON text (``None`` as JSON ``null``, as SQLAlchemy's JSON type
writes it), everything else as it is."""
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
    sets = ", ".join(f"{c.name} = excluded.{c.name}" for c in table.columns if c.name not in keys)
    _merge(conn, table, last.values(), f"DO UPDATE SET {sets}")


def copy_insert_new(conn, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert the ``rows`` whose primary key is not stored yet, leave the others as stored (``ON CONFLICT DO
    NOTHING``): COPY into a temporary table, then one ``INSERT ... SELECT``. A key given twice keeps its first row,
    as a multi-row ``INSERT ... ON CONFLICT DO NOTHING`` does (the staging table has no key, and a SELECT's
    order is not promised, so the duplicates are dropped here)."""
    keys = [c.name for c in table.primary_key.columns]
    first: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        first.setdefault(tuple(r[k] for k in keys), r)
    _merge(conn, table, first.values(), "DO NOTHING")


def _merge(conn, table: Table, rows: Iterable[dict[str, Any]], action: str) -> None:
    """COPY ``rows`` (one per key) into ``table``'s temporary twin, then ``INSERT ... SELECT ... ON CONFLICT (its
    key) <action>``, in the caller's transaction."""
    keys = ", ".join(c.name for c in table.primary_key.columns)
    cols = [c.name for c in table.columns]
    tmp = f"_incoming_{table.name}"
    with _driver(conn).cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} (LIKE {table.name}) ON COMMIT DELETE ROWS")
    copy_rows(conn, table, rows, cols, into=tmp)
    names = ", ".join(cols)
    with _driver(conn).cursor() as cur:
        cur.execute(f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {tmp} ON CONFLICT ({keys}) {action}")
        cur.execute(f"DELETE FROM {tmp}")  # (ON COMMIT empties it too; this keeps a later batch of the same
        # transaction from merging these rows again)


def stream(engine, sql: str, params: tuple, chunk: int) -> Iterable[list[tuple]]:
    """Rows of ``sql`` in lists of up to ``chunk``, from a server-side cursor (never the whole result in memory).
    JSON values come back parsed, by psycopg."""
    raw = engine.raw_connection()
    try:
        with raw.driver_connection.cursor(name="evaluators_stream") as cur:
            cur.itersize = chunk
            cur.execute(sql, params)
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    break
                yield rows
        raw.driver_connection.rollback()  # (read only: ends the cursor's transaction)
    finally:
        raw.close()


def run_outcomes(engine, run_id: str, metrics: list[str], keys: list[str], chunk: int) -> Iterable[list[tuple]]:
    """Store.run_outcomes on PostgreSQL: each output read in the database (``outputs -> key``), so no row's
    whole ``outputs`` is parsed in Python; true/false come back as 1/0, as on SQLite."""
    cols = "".join(", outputs -> %s" for _ in keys)
    sql = (f"SELECT row_idx, metric, turn, status, value{cols} FROM results WHERE run_id = %s "
           f"AND metric = ANY(%s)")
    for rows in stream(engine, sql, (*keys, run_id, list(metrics)), chunk):
        yield [r[:5] + tuple(int(v) if isinstance(v, bool) else v for v in r[5:]) for r in rows]


def dataset_texts(engine, dataset_id: str, columns: list[str | None]) -> Iterable[tuple]:
    """Store.dataset_texts on PostgreSQL: ``(idx, record[c0], ...)`` read in the database (``data -> c``)."""
    cols = "".join(", NULL" if c is None else ", data -> %s" for c in columns)
    sql = f"SELECT idx{cols} FROM dataset_records WHERE dataset_id = %s ORDER BY idx"
    for rows in stream(engine, sql, (*[c for c in columns if c is not None], dataset_id), 5000):
        yield from rows
