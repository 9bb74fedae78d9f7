"""``python -m evaluators db upgrade|status``: the store's schema, upgraded in place.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

from evaluators.cli.text import say


def add_commands(sub) -> None:
    d = sub.add_parser("db", help="the store's schema: upgrade a store written by an older version, or show its version")
    ds = d.add_subparsers(dest="db_command", required=True)
    u = ds.add_parser("upgrade", help="upgrade the store in place to this version's schema (back it up first); "
                                      "nothing in it is lost")
    u.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    s = ds.add_parser("status", help="the store's schema version and this code's")
    s.add_argument("--db")

def cmd_db(a) -> int:
    from sqlalchemy import create_engine

    from evaluators.cli.common import EXIT_OK, EXIT_USAGE
    from evaluators.store import migrate
    from evaluators.store.schema import SCHEMA_REVISION, default_url

    engine = create_engine(a.db or default_url())
    try:
        if a.db_command == "status":
            rev, tables = migrate._revision(engine)
            state = "up to date" if rev == SCHEMA_REVISION else "needs `db upgrade`" if tables else "empty"
            if rev not in (None, SCHEMA_REVISION) and rev not in migrate.known_revisions():
                state = "newer than this version"
            say(f"{migrate.where(engine)}: schema {rev or ('before migrations' if tables else 'none')}; this "
                  f"version's: {SCHEMA_REVISION} ({state})")
            return EXIT_OK if state in ("up to date", "empty") else EXIT_USAGE
        before, after = migrate.upgrade(engine)
        if before == after:
            say(f"{migrate.where(engine)} is up to date (schema {after})")
        else:
            say(f"upgraded {migrate.where(engine)}: schema {before or 'before migrations'} -> {after}")
        return EXIT_OK
    finally:
        engine.dispose()


COMMANDS = {"db": cmd_db}
