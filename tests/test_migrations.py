"""The store's schema under Alembic: a store written before migrations (tests/fixtures/pre_alembic_store.db, made
by the code at 826eb69 with make_pre_alembic_store.py) upgrades in place with `db upgrade`, every row kept; an
older or newer store is refused by the CLI and the dashboard with what to do; a new store needs no set-up and
has the schema the migrations make."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest
import sqlalchemy as sa

from evaluators.core.errors import StoreVersionError
from evaluators.read.results import open_results
from evaluators.store import migrate
from evaluators.store.schema import SCHEMA_REVISION, Base
from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, default_store, env_for_subprocess
from tests.procs import wait_until

FIXTURE = ROOT / "tests" / "fixtures" / "pre_alembic_store.db"
TABLES = ("datasets", "dataset_records", "runs", "results", "reviews", "review_queues", "judge_cache")
ADDED = {"archived_at"}  # columns later revisions add (0009): NULL in every upgraded row (checked below), not dumped


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "evaluators", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env or env_for_subprocess(), timeout=120)


def dump(db) -> dict[str, list]:
    """Every row of every table, in key order (raw SQLite: not through the code under test)."""
    with sqlite3.connect(db) as c:
        out = {}
        for t in TABLES:
            cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})") if r[1] not in ADDED]
            out[t] = c.execute(f"SELECT {', '.join(cols)} FROM {t} ORDER BY {', '.join(cols[:2])}").fetchall()
        return out


@pytest.mark.sqlite_only("upgrades a SQLite file from before migrations (the committed fixture is a SQLite file)")
def test_a_store_from_before_migrations_is_refused_then_upgraded_in_place_with_every_row(tmp_path):
    db = tmp_path / "evals.db"
    shutil.copy(FIXTURE, db)
    before = dump(db)
    assert len(before["results"]) == 124 and len(before["reviews"]) == 2 and len(before["judge_cache"]) == 62
    url = f"sqlite:///{db}"
    p = cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o", "--db", url)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "older version" in p.stderr and "python -m evaluators db upgrade" in p.stderr
    assert dump(db) == before and not (tmp_path / "o").exists()  # refused: nothing written
    p = cli("db", "upgrade", "--db", url)
    assert p.returncode == 0, p.stderr
    assert f"before migrations -> {SCHEMA_REVISION}" in p.stdout
    assert dump(db) == before  # every row of every table, as it was
    store = Store(url)  # opens now
    judged = next(r for r in store.list_runs() if "coherence" in r["spec"]["metrics"])
    res = open_results(store, judged["id"])
    assert res.metrics()["coherence.scored_rows"] == 31
    assert {(r["reviewer"], r["value"]) for r in store.reviews(judged["id"])} == {("ann", 4.0), ("bob", 0.0)}
    assert cli("db", "upgrade", "--db", url).stdout.strip().endswith(f"is up to date (schema {SCHEMA_REVISION})")
    assert cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o", "--db", url).returncode == 0


def test_a_store_from_a_newer_version_is_refused_by_the_cli_and_the_dashboard(tmp_path, monkeypatch, fresh_caches):
    from tests.apptest import app

    home = tmp_path / "evalhome"
    engine = default_store(home).engine  # the dashboard's and the CLI's store: SQLite, or the PostgreSQL pass's
    with engine.begin() as c:
        c.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dfeed'"))
    p = cli("db", "upgrade")
    assert p.returncode == 2 and "newer version" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o")
    assert p.returncode == 2 and "newer version" in p.stderr and "f00dfeed" in p.stderr, p.stderr
    at = app(allow_errors=True)  # (app.py opens the store before any page runs)
    assert len(at.error) == 1 and "newer version of evaluators" in at.error[0].value
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE alembic_version"))  # as a store from before migrations
    engine.dispose()
    at = app(allow_errors=True)
    assert len(at.error) == 1 and "python -m evaluators db upgrade" in at.error[0].value


def test_the_newest_migration_is_the_revision_the_code_writes():
    from alembic.script import ScriptDirectory

    assert ScriptDirectory(str(migrate.MIGRATIONS)).get_heads() == [SCHEMA_REVISION]


@pytest.mark.both_stores
def test_a_new_store_has_exactly_the_schema_the_migrations_make(store_url, tmp_path):
    """Store() on an empty database (create_all, then stamped) and `db upgrade` on another (the migrations
    run) end with the same tables, columns, keys and indexes, and both match the models."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    Store(store_url)
    other = (f"sqlite:///{tmp_path / 'migrated.db'}" if store_url.startswith("sqlite")
             else store_url.rsplit("/", 1)[0] + "/" + _new_pg_database(store_url))
    assert cli("db", "upgrade", "--db", other).returncode == 0
    for url in (store_url, other):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            assert diff == [], (url, diff)
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == SCHEMA_REVISION
        engine.dispose()


OPEN_AT = """
import sys, time
from pathlib import Path
from evaluators.store.store import Store
folder = Path(sys.argv[2])
(folder / sys.argv[3]).touch()  # imported and ready
while not (folder / "go").exists():
    time.sleep(0.001)
Store(sys.argv[1])
"""


def test_processes_opening_one_new_store_at_once_all_open_it(new_store_url, tmp_path):
    """A dashboard, a CLI run and a worker may open a new store at the same instant: each finds the tables
    or makes them, and none fails. (On SQLite all four looked before any wrote, and three failed with
    "table ... already exists" or "written by an older version", in 20 tries out of 20.)"""
    for attempt in range(3):
        url = new_store_url(f"at-once-{attempt}")
        gate = tmp_path / f"gate-{attempt}"
        gate.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, url, str(gate), f"ready-{i}"], cwd=ROOT,
                                  env=env_for_subprocess(), stderr=subprocess.PIPE, text=True) for i in range(4)]
        wait_until(lambda: len(list(gate.glob("ready-*"))) == 4, what="four processes ready", timeout=60)
        (gate / "go").touch()  # all four go together
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, errors
        assert Store(url).list_datasets() == []


def _new_pg_database(url: str) -> str:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE migrated_by_alembic"))
    engine.dispose()
    return "migrated_by_alembic"


@pytest.mark.both_stores
def test_an_older_store_lacking_recent_tables_and_columns_is_brought_up(store_url):
    """A store from before the reviews and the ``created_by`` columns (as older code left it) gets them from
    `db upgrade`, its rows kept; before that, opening it is refused."""
    from alembic.script import ScriptDirectory

    baseline = ScriptDirectory(str(migrate.MIGRATIONS)).get_revision("0001").module.m
    engine = sa.create_engine(store_url)
    old = sa.MetaData()
    for t in baseline.sorted_tables:
        if t.name not in ("reviews", "review_queues"):
            t.to_metadata(old)
    old.tables["runs"]._columns.remove(old.tables["runs"].c.created_by)
    old.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO datasets VALUES ('d', 'n', 's', 'h', 'single', 'c', 1, '[]', '{}', '[]', "
                             "'2024-01-01 00:00:00', NULL)"))
    with pytest.raises(StoreVersionError, match="older version"):
        Store(store_url)
    assert migrate.upgrade(engine) == (None, SCHEMA_REVISION)
    store = Store(store_url)
    assert [d["id"] for d in store.list_datasets()] == ["d"]
    rid = store.create_run("d", {"metrics": []}, "x", "r", created_by="ann")
    assert store.get_run(rid)["created_by"] == "ann" and store.reviews(rid) == []
    engine.dispose()


@pytest.mark.sqlite_only("upgrades a SQLite file from before migrations (the committed fixture is a SQLite file)")
def test_a_store_main_wrote_between_with_batches_and_saved_metrics_upgrades_keeping_them(tmp_path):
    """A store written before migrations by a main that already had judge_batches and saved_metrics (made by its
    own start-up): db upgrade keeps their rows and every other table's, and adds what is missing."""
    db = tmp_path / "evals.db"
    shutil.copy(FIXTURE, db)
    with sqlite3.connect(db) as c:  # the two tables as that main's start-up made them, each with a row
        c.execute("CREATE TABLE saved_metrics (name VARCHAR(63) NOT NULL, version INTEGER NOT NULL, format "
                  "VARCHAR(20) NOT NULL, text TEXT NOT NULL, description TEXT NOT NULL, created_at DATETIME NOT NULL, "
                  "created_by VARCHAR(200), PRIMARY KEY (name, version))")
        c.execute("INSERT INTO saved_metrics VALUES ('politeness', 1, 'template', 'the text', 'polite?', "
                  "'2026-11-24 20:00:00.000000', 'ann')")
        c.execute("CREATE TABLE judge_batches (id VARCHAR(32) NOT NULL PRIMARY KEY, run_id VARCHAR(32) NOT NULL "
                  "REFERENCES runs (id) ON DELETE CASCADE, round INTEGER NOT NULL, input_file_id VARCHAR(200), "
                  "batch_id VARCHAR(200), status VARCHAR(30) NOT NULL, custom_ids JSON NOT NULL, total INTEGER NOT "
                  "NULL, completed INTEGER NOT NULL, failed INTEGER NOT NULL, expires_at DATETIME, created_at "
                  "DATETIME NOT NULL, updated_at DATETIME NOT NULL)")
        run_id = c.execute("SELECT id FROM runs LIMIT 1").fetchone()[0]
        c.execute("INSERT INTO judge_batches VALUES ('b1', ?, 1, 'file-1', 'batch-1', 'in_progress', '[\"0.coherence.0.0\"]', "
                  "1, 0, 0, NULL, '2026-11-24 20:00:00.000000', '2026-11-24 20:00:00.000000')", (run_id,))
    before = dump(db)
    p = cli("db", "upgrade", "--db", f"sqlite:///{db}")
    assert p.returncode == 0, p.stderr
    assert dump(db) == before
    with sqlite3.connect(db) as c:
        assert [c.execute(f"SELECT count(*) FROM {t} WHERE archived_at IS NOT NULL").fetchone()[0]
                for t in ("runs", "datasets")] == [0, 0]
        assert c.execute("SELECT name, version, created_by FROM saved_metrics").fetchall() == [("politeness", 1, "ann")]
        assert c.execute("SELECT id, batch_id, status FROM judge_batches").fetchall() == [("b1", "batch-1", "in_progress")]
        assert c.execute("SELECT version_num FROM alembic_version").fetchone()[0] == SCHEMA_REVISION
    store = Store(f"sqlite:///{db}")
    assert store.saved_metric("politeness")["text"] == "the text"
