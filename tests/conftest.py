"""Shared fixtures: a real loopback judge server, a real store, the samples and ../shared.

``--store sqlite`` (the default) gives each test a SQLite file under its ``EVAL_HOME``; ``--store postgresql``
gives each test a fresh database on the session's PostgreSQL server (tests.pg) as ``EVAL_DATABASE_URL``, which
CLI subprocesses, dashboards and workers inherit. Markers: ``both_stores`` (run on each store),
``sqlite_only(reason)`` (about SQLite itself: skipped, saying why, in the PostgreSQL pass), ``no_store`` (never
opens a store: deselected in the PostgreSQL pass; in the SQLite pass any store it opens fails the test).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluators.judge.config import JudgeConfig
from evaluators.store.store import Store
from tests.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "data" / "rag_single_turn.jsonl"
CONVERSATIONS = ROOT / "data" / "support_conversations.jsonl"
SHARED = ROOT.parent / "shared"


@pytest.fixture
def judge_server():
    with JudgeServer() as s:
        yield s


STORES = ("sqlite", "postgresql")
# The pass's default store (--store) and, in the PostgreSQL pass, the server and each EVAL_HOME's database.
PASS: dict = {"store": "sqlite", "server": None, "homes": {}, "servers": [], "pg_copies": True}
# sqlite_only reasons shared by several tests
DETACHED_WORKER = ("a run's detached worker process (its pid, its environment, killing it): on PostgreSQL the "
                   "dashboard's runs go to the job queue's workers instead (run.workers._enqueue; the queue is tested in test_queue.py)")
TYPED_KEY_REASON = ("a key typed in the dashboard reaches the run's detached worker: on PostgreSQL runs go to the team's "
                    'queue workers, which by design refuse a typed key (run.workers._enqueue)')
# What a no_store test's EVAL_DATABASE_URL is in the SQLite pass: nothing listens there (port 9, discard).
UNREACHABLE = "postgresql+psycopg://no-store@127.0.0.1:9/no_store_test_opened_a_store"


def pytest_addoption(parser):
    parser.addoption("--store", choices=STORES, default="sqlite",
                     help="every test's default store: a SQLite file (default) or a fresh database on a PostgreSQL "
                          "server the session starts (tests marked no_store are deselected, sqlite_only skipped)")
    parser.addoption("--no-pg-copies", action="store_true",
                     help="SQLite pass: the both_stores tests run only on SQLite (scripts/test.sh, whose PostgreSQL "
                          "pass runs them on PostgreSQL)")


def pytest_configure(config):
    PASS["store"] = config.getoption("store")
    PASS["pg_copies"] = not config.getoption("no_pg_copies")
    config.addinivalue_line("markers", "both_stores: run the test on SQLite and on a real PostgreSQL server "
                            "(the store_url / store fixtures are parametrized; the PostgreSQL pass runs only the latter)")
    config.addinivalue_line("markers", "sqlite_only(reason): the test is about SQLite itself; skipped, with the "
                            "reason, in the PostgreSQL pass (--store postgresql)")
    config.addinivalue_line("markers", "no_store: the module never opens a store (checked in the SQLite pass: "
                            "Store() raises); deselected in the PostgreSQL pass")
    config.addinivalue_line("markers", "timing: measures a rate the code sustains against a judge server in "
                            "another process (its own SQLite file); scripts/test.sh runs these alone first, as a "
                            "machine busy with the two passes would slow both sides")
    config.addinivalue_line("markers", "chromium: drives Debian's Chromium (set on every test that takes the "
                            "browser fixture or is marked tests.browser.needs_chromium): `-m chromium` runs "
                            "the browser tests alone")


def pytest_generate_tests(metafunc):
    """Tests marked ``both_stores`` (or in a module so marked) run once per store: SQLite and PostgreSQL (only the
    PostgreSQL copy in the PostgreSQL pass, whose SQLite copy ran in the SQLite pass)."""
    if metafunc.definition.get_closest_marker("both_stores") and "store_url" in metafunc.fixturenames:
        stores = (STORES if PASS["pg_copies"] else ("sqlite",)) if PASS["store"] == "sqlite" else ("postgresql",)
        metafunc.parametrize("store_url", stores, indirect=True)


# The longest test files (seconds, measured 2026-11-25 on either store), handed to the workers first, the rest
# after in their usual order (scripts/test.sh passes --no-loadscope-reorder, else xdist hands out the files
# with the most tests first and leaves these few-test, long browser files to the end, on one busy worker).
LONGEST_FIRST = ("test_monitor_queue.py", "test_monitor_rule_limits.py", "test_faults.py", "test_dashboard_security.py", "test_dashboard_walk.py", "test_newuser_browser.py",
                 "test_dashboard_e2e.py", "test_runner.py", "test_exports_download.py", "test_review_browser.py",
                 "test_results_browser.py", "test_cli.py", "test_hostile.py", "test_scale.py", "test_sign_in.py",
                 "test_safety_dashboard.py", "test_rows_browser.py", "test_cost_dashboard.py", "test_metric_browser.py",
                 "test_surprises_browser.py", "test_wildbench_dashboard.py", "test_review_cli.py",
                 "test_sign_in_config.py", "test_exports_stream.py", "test_monitor_app.py", "test_runs_browser.py",
                 "test_upia_browser.py", "test_monitor_page_browser.py", "test_smaller_browser.py", "test_queue.py",
                 "test_queue_cost.py", "test_monitor_redact.py", "test_runs_page.py", "test_monitor_receiver.py")


def pytest_collection_modifyitems(config, items):
    from tests.browser import CHROMIUM_REASON

    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests keep their order

    for item in items:
        if "browser" in item.fixturenames or any(m.kwargs.get("reason") == CHROMIUM_REASON
                                                 for m in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.chromium)
        mark = item.get_closest_marker("sqlite_only")
        if mark and not (mark.args or mark.kwargs.get("reason")):
            raise pytest.UsageError(f"{item.nodeid}: sqlite_only needs a reason")
    if PASS["store"] != "postgresql":
        if not PASS["pg_copies"]:  # the PostgreSQL pass that follows runs the tests of PostgreSQL itself
            _deselect(config, items, lambda item: "postgres" in item.fixturenames)
        return
    for item in items:
        mark = item.get_closest_marker("sqlite_only")
        if mark:
            item.add_marker(pytest.mark.skip(reason="sqlite_only: " + (mark.args[0] if mark.args else mark.kwargs["reason"])))
    _deselect(config, items, lambda item: item.get_closest_marker("no_store") is not None)


def _deselect(config, items: list, drop) -> None:
    """Take the items ``drop(item)`` is true of out of the session, reported as deselected."""
    kept, dropped = [], []
    for item in items:
        (dropped if drop(item) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _start_postgres():
    from tests.pg import PostgresServer, pg_bin

    if pg_bin() is None:
        pytest.skip("PostgreSQL binaries absent (/usr/lib/postgresql/*/bin): install Debian's postgresql package "
                    "(scripts/setup.sh --dev does) to run the PostgreSQL half of the store tests")
    server = PostgresServer()
    PASS["servers"].append(server)  # each test's databases are dropped when it ends (_isolated_home)
    return server


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (tests.pg); the tests that need it skip, saying why, without its binaries.
    In the PostgreSQL pass it is the one that holds every test's default store."""
    if PASS["server"] is not None:
        yield PASS["server"]
        return
    with _start_postgres() as pg:
        yield pg


@pytest.fixture(scope="session", autouse=True)
def _postgres_pass():
    """In the PostgreSQL pass, the server of every test's (and every module dashboard's) default store."""
    if PASS["store"] != "postgresql":
        yield
        return
    with _start_postgres() as pg:
        PASS["server"] = pg
        try:
            yield
        finally:
            PASS["server"] = None


def home_url(home: Path) -> str:
    """The store a dashboard, CLI or worker whose ``EVAL_HOME`` is ``home`` uses in this pass: the SQLite file under
    ``home``, or (PostgreSQL pass) a database of its own, made the first time ``home`` is asked for."""
    if PASS["store"] != "postgresql":
        return f"sqlite:///{Path(home) / 'evals.db'}"
    key = str(Path(home))
    if key not in PASS["homes"]:
        PASS["homes"][key] = PASS["server"].new_database()
    return PASS["homes"][key]


def start_queue_worker(url: str):
    """PostgreSQL pass: ``python -m evaluators worker`` on the store at ``url`` (runs started from a dashboard on
    PostgreSQL go to the job queue, run.queue, done by such workers); None in the SQLite pass (runs are the
    dashboard's own child processes there). Stop it with :func:`stop_queue_worker`."""
    import subprocess
    import sys

    if PASS["store"] != "postgresql":
        return None
    env = env_for_subprocess(EVAL_DATABASE_URL=url)
    if os.environ.get("PYTHONPATH"):  # what the test installed for the workers (as a team installs it on theirs)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ["PYTHONPATH"]])
    return subprocess.Popen([sys.executable, "-m", "evaluators", "worker"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)


def stop_queue_worker(proc) -> None:
    import subprocess

    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def queue_worker(_isolated_home):
    """For a test that starts runs from the dashboard: in the PostgreSQL pass a queue worker on its store."""
    proc = start_queue_worker(os.environ.get("EVAL_DATABASE_URL", ""))
    yield proc
    stop_queue_worker(proc)


def env_for_home(home: Path, **extra: str) -> dict[str, str]:
    """A subprocess's environment with ``EVAL_HOME=home`` and, in the PostgreSQL pass, that home's own database."""
    store = {"EVAL_DATABASE_URL": home_url(home)} if PASS["store"] == "postgresql" else {}
    return env_for_subprocess(EVAL_HOME=str(home), **store, **extra)


def default_store(home: Path) -> Store:
    """The store a dashboard or CLI with ``EVAL_HOME=home`` wrote to (see :func:`home_url`)."""
    return Store(home_url(home))


def default_store_made(home: Path) -> bool:
    """Whether anything opened the default store of ``home``: its SQLite file exists, or its database has tables."""
    url = home_url(home)
    if url.startswith("sqlite"):
        return (Path(home) / "evals.db").exists()
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return bool(sa.inspect(c).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture
def store_url(request, tmp_path, _isolated_home) -> str:
    """The store's URL: a SQLite file in the test's folder, or (``both_stores``) a fresh PostgreSQL database; in
    the PostgreSQL pass, the test's default store (its ``EVAL_DATABASE_URL``)."""
    if PASS["store"] == "postgresql":
        return os.environ["EVAL_DATABASE_URL"]
    if getattr(request, "param", "sqlite") == "postgresql":
        return request.getfixturevalue("postgres").new_database()
    return f"sqlite:///{tmp_path / 'evals.db'}"


def store_url_in(folder: Path, name: str) -> str:
    """A new empty store's URL: a SQLite file ``name.db`` in ``folder``, or (PostgreSQL pass) a fresh database."""
    if PASS["store"] == "postgresql":
        return PASS["server"].new_database()
    return f"sqlite:///{Path(folder) / (name + '.db')}"


@pytest.fixture
def new_store_url(tmp_path, _isolated_home):
    """``new_store_url(name)``: another empty store of the test (:func:`store_url_in` its folder)."""
    return lambda name: store_url_in(tmp_path, name)


@pytest.fixture
def store(store_url) -> Store:
    return Store(store_url)


@pytest.fixture
def judge_config(judge_server) -> JudgeConfig:
    """A judge pointed at the loopback server, with fast retries so fault tests stay quick."""
    return JudgeConfig(model="test-judge", provider="compatible", base_url=judge_server.url,
                       timeout=2.0, max_retries=3, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture(autouse=True)
def _isolated_home(request, tmp_path, monkeypatch):
    # No test may touch the user's ~/.evaldash store; subprocesses inherit this.
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "evalhome"))
    monkeypatch.delenv("EVAL_DATABASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if request.node.get_closest_marker("no_store"):
        # the marker may not lie: a store opened here or in a subprocess fails the test
        monkeypatch.setenv("EVAL_DATABASE_URL", UNREACHABLE)

        def refuse(self, url=None):
            raise AssertionError(f"a test marked no_store opened a store ({url or 'the default one'})")
        monkeypatch.setattr(Store, "__init__", refuse)
    elif PASS["store"] == "postgresql":
        monkeypatch.setenv("EVAL_DATABASE_URL", home_url(tmp_path / "evalhome"))
    made = {id(pg): len(pg.made) for pg in PASS["servers"]}
    yield
    # the databases made during the test (a module's dashboard made its own before): dropped, so that a
    # PostgreSQL pass's cluster holds a few, not hundreds
    for pg in [pg for pg in PASS["servers"] if pg.dir.exists()]:
        gone = set(pg.drop_since(made.get(id(pg), 0)))
        for key in [k for k, url in PASS["homes"].items() if url in gone]:
            del PASS["homes"][key]


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


def wait_for_run(store: Store, run_id: str, timeout: float = 60) -> dict:
    """Poll the store until a run ends (a worker process reports only there)."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        run = store.get_run(run_id)
        if run["status"] in ("completed", "failed", "cancelled"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish in {timeout} s")


def app_pages() -> list[tuple[str, str]]:
    """(page file, URL path) of every page app.py's st.navigation serves, read from app.py itself (its PAGES
    and HOME), so a page added there is tested with the others; the default page's path is "" (served at "/")."""
    import ast

    assigned = {t.id: node.value for node in ast.parse((ROOT / "app.py").read_text()).body
                if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    pages, home = ast.literal_eval(assigned["PAGES"]), ast.literal_eval(assigned["HOME"])
    return [(file, "" if path == home else path) for file, _title, _icon, path in pages]


def env_for_subprocess(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


@pytest.fixture
def browser():
    """Debian's headless Chromium through Playwright (never a downloaded browser)."""
    from tests.browser import ARGS, CHROMIUM

    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def fresh_caches():
    """Streamlit's caches emptied before a dashboard test: the store is a cache_resource, and without
    this a test would read the previous test's database. Dashboard test modules use it for every test."""
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    yield


@pytest.fixture
def forget_custom_metrics():
    """The metrics a test registered from files or code (a user's metric, a scan's label judges) gone after it:
    the registry is the process's, and a later test in the same worker listing every metric must not meet them."""
    from evaluators.core import registry

    yield
    for name in [n for n, s in registry._REGISTRY.items() if s.definition is not None]:
        registry._REGISTRY.pop(name)


@pytest.fixture
def home_store(tmp_path, _isolated_home) -> Store:
    """The dashboard's store (EVAL_HOME is set per test above; in the PostgreSQL pass, its EVAL_DATABASE_URL)."""
    return default_store(tmp_path / "evalhome")


@pytest.fixture
def recorder():
    """A loopback "proxy" that records any outbound HTTP(S) a dashboard server attempts (tests.browser.Recorder)."""
    from tests.browser import Recorder

    r = Recorder()
    yield r
    r.close()

