"""Alembic's environment for the store: the database is the one the command was given (``db upgrade --db``,
set on the config by evaluators.store.migrate), else EVAL_DATABASE_URL or the default SQLite file; the
models' metadata (evaluators.store.schema) is what ``alembic revision --autogenerate`` compares against."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from evaluators.store.schema import Base, default_url

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # handed in by evaluators.store.migrate: its transaction and lock
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or default_url())
    with engine.connect() as conn:
        # render_as_batch: SQLite alters a table by copying it, which Alembic's batch mode does for us
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url") or default_url(), target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
