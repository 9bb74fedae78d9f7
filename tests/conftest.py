"""Shared fixtures: a real loopback judge server, a real SQLite store, the samples and ../shared."""
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


def pytest_configure(config):
    config.addinivalue_line("markers", "both_stores: run the test on SQLite and on a real PostgreSQL server "
                            "(the store_url / store fixtures are parametrized)")


def pytest_generate_tests(metafunc):
    """Tests marked ``both_stores`` (or in a module so marked) run once per store: SQLite and PostgreSQL."""
    if metafunc.definition.get_closest_marker("both_stores") and "store_url" in metafunc.fixturenames:
        metafunc.parametrize("store_url", STORES, indirect=True)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (tests.pg); the tests that need it skip, saying why, without its binaries."""
    from tests.pg import PostgresServer, pg_bin

    if pg_bin() is None:
        pytest.skip("PostgreSQL binaries absent (/usr/lib/postgresql/*/bin): install Debian's postgresql package "
                    "(scripts/setup.sh --dev does) to run the PostgreSQL half of the store tests")
    with PostgresServer() as pg:
        yield pg


@pytest.fixture
def store_url(request, tmp_path) -> str:
    """The store's URL: a SQLite file in the test's folder, or (``both_stores``) a fresh PostgreSQL database."""
    if getattr(request, "param", "sqlite") == "postgresql":
        return request.getfixturevalue("postgres").new_database()
    return f"sqlite:///{tmp_path / 'evals.db'}"


@pytest.fixture
def store(store_url) -> Store:
    return Store(store_url)


@pytest.fixture
def judge_config(judge_server) -> JudgeConfig:
    """A judge pointed at the loopback server, with fast retries so fault tests stay quick."""
    return JudgeConfig(model="test-judge", provider="compatible", base_url=judge_server.url,
                       timeout=2.0, max_retries=3, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    # No test may touch the user's ~/.evaldash store; subprocesses inherit this.
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "evalhome"))
    monkeypatch.delenv("EVAL_DATABASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


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
def home_store(tmp_path) -> Store:
    """The dashboard's store (EVAL_HOME is set per test above)."""
    return Store(f"sqlite:///{tmp_path / 'evalhome' / 'evals.db'}")


@pytest.fixture
def recorder():
    """A loopback "proxy" that records any outbound HTTP(S) a dashboard server attempts (tests.browser.Recorder)."""
    from tests.browser import Recorder

    r = Recorder()
    yield r
    r.close()
