"""The store's schema version (Alembic): checked when a store is opened, upgraded by ``db upgrade``.

Every change to the tables is an Alembic revision in ``migrations/versions`` (ARCHITECTURE.md says how to
add one). Opening a store costs one query and never imports Alembic:

- an empty database gets today's tables and is marked as at the newest revision (a new SQLite file still
  needs no set-up);
- a store at the newest revision opens;
- a store from before migrations, or at an older revision, is refused with what to run
  (``python -m evaluators db upgrade``), and one at a revision this code does not know (written by a newer
  version) with what to do instead. Nothing is changed in either case.
"""
from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table, inspect, select, text
from sqlalchemy.engine import Engine

from evaluators.core.errors import StoreVersionError
from evaluators.store.schema import SCHEMA_REVISION, Base

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Alembic's own bookkeeping table, as Alembic makes it.
VERSION = Table("alembic_version", MetaData(), Column("version_num", String(32), primary_key=True))
# Serializes schema changes on PostgreSQL (many workers and dashboards may open a new database at once;
# SQLite's equivalent is BEGIN IMMEDIATE, its write lock).
LOCK_ID = 0x65766C73  # "evls"


def where(engine: Engine) -> str:
    """The store as a person names it: the SQLite file, or the database (no user or password)."""
    url = engine.url
    if engine.dialect.name == "sqlite":
        return f"the store {url.database}"
    return f"the store {url.get_backend_name()}://{url.host or ''}{':' + str(url.port) if url.port else ''}/{url.database}"


def _revision(engine: Engine) -> tuple[str | None, bool]:
    """(the store's revision, whether it has any of our tables)."""
    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names())
        if VERSION.name not in names:
            return None, bool(names & set(Base.metadata.tables))
        return conn.execute(select(VERSION.c.version_num)).scalar(), True


def ensure_current(engine: Engine) -> None:
    """Create an empty store's tables, or check an existing store's revision (see the module's text).

    Raises:
        StoreVersionError: the store is older or newer than this code; nothing was changed.
    """
    try:
        with engine.connect() as conn:  # the common case: one query
            rev = conn.execute(select(VERSION.c.version_num)).scalar()
        if rev == SCHEMA_REVISION:
            return
    except Exception:  # noqa: BLE001 — no version table: an empty database or a store from before migrations
        pass
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_ID})
        names = set(inspect(conn).get_table_names())
        if engine.dialect.name == "sqlite" and _empty(names):  # SQLite's write lock, then a second look: the
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # driver begins only at the first insert, so two processes
            names = set(inspect(conn).get_table_names())  # both saw no tables (an older store is read unlocked)
        if _empty(names):
            Base.metadata.create_all(conn)
            VERSION.create(conn)
            conn.execute(VERSION.insert().values(version_num=SCHEMA_REVISION))
            return
        rev = conn.execute(select(VERSION.c.version_num)).scalar() if VERSION.name in names else None
    check(engine, rev)


def _empty(names: set[str]) -> bool:
    return VERSION.name not in names and not names & set(Base.metadata.tables)


def check(engine: Engine, rev: str | None) -> None:
    """Raise :class:`StoreVersionError` unless ``rev`` is this code's revision."""
    if rev == SCHEMA_REVISION:
        return
    run = "python -m evaluators db upgrade" + ("" if _is_default(engine) else " --db URL")
    if rev is None or rev in known_revisions():
        raise StoreVersionError(
            f"{where(engine)} was written by an older version of evaluators (schema {rev or 'before migrations'}, "
            f"this version needs {SCHEMA_REVISION}). Back it up, then upgrade it in place with `{run}`; "
            "nothing in it is lost.")
    raise StoreVersionError(
        f"{where(engine)} was upgraded by a newer version of evaluators (schema {rev}; this version knows up to "
        f"{SCHEMA_REVISION}). Install that version (or newer) here; an older one must not write to it.")


def _is_default(engine: Engine) -> bool:
    from evaluators.store.schema import default_url

    return str(engine.url) == default_url()


def known_revisions() -> set[str]:
    """Every revision in migrations/versions (Alembic is imported only here, on the way to an error or an upgrade)."""
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory(str(MIGRATIONS)).walk_revisions()}


def _config(conn):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def upgrade(engine: Engine, to: str = "head") -> tuple[str | None, str | None]:
    """Bring the store to ``to`` (the newest revision by default) in place, in one transaction where the
    database allows (PostgreSQL: under the schema lock). Returns (revision before, revision after)."""
    from alembic import command

    before, _ = _revision(engine)
    if before is not None and before not in known_revisions():
        check(engine, before)  # newer than this code: said, nothing done
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_ID})
        command.upgrade(_config(conn), to)
    return before, _revision(engine)[0]
