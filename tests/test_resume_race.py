"""Several resumes of one queued run at the same instant (two tabs, two clicks, two people): exactly one starts a
worker, on SQLite (a detached process) and on PostgreSQL (the run's chunks queued once); the others are told the
run is already being resumed. Each try: a new queued run, four threads with a store each, released together by a
barrier, each pressing Resume (run.workers.spawn_worker)."""
from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from evaluators.api import prepare_run
from evaluators.run.workers import WorkerBusy, spawn_worker
from evaluators.store.store import Store
from tests.conftest import SINGLE
from tests.procs import wait_until

pytestmark = pytest.mark.both_stores

TRIES = 12
RESUMERS = 4


def _race(stores: list[Store], rid: str) -> list[tuple[str, object]]:
    """Every store's resume of ``rid`` at once: ("started", pid) or ("busy", message)."""
    barrier = threading.Barrier(len(stores))
    got: list = [None] * len(stores)

    def resume(k: int) -> None:
        barrier.wait(timeout=60)
        try:
            got[k] = ("started", spawn_worker(stores[k], rid))
        except WorkerBusy as e:
            got[k] = ("busy", str(e))
        except Exception as e:  # noqa: BLE001 — anything else is a finding, reported by the assertion
            got[k] = ("raised", repr(e))

    threads = [threading.Thread(target=resume, args=(k,)) for k in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return got


def _worker_starts(store_url: str, rid: str, started: "Path") -> int:  # noqa: F821
    """How many workers were started for ``rid``: processes that ran (SQLite), or queued chunk jobs (PostgreSQL)."""
    if store_url.startswith("sqlite"):
        return started.read_text().split().count(rid) if started.exists() else 0
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as c:
            return c.execute(sa.text("SELECT count(*) FROM procrastinate_jobs WHERE args->>'run_id' = :rid"),
                             {"rid": rid}).scalar()
    finally:
        engine.dispose()


def test_of_simultaneous_resumes_exactly_one_starts_a_worker(store_url, tmp_path, monkeypatch):
    started = tmp_path / "started.txt"
    if store_url.startswith("sqlite"):
        # the worker's program, for this test: a process that says it ran (its run id) and ends; what is under
        # test is how many are started, not the run
        worker = tmp_path / "worker.sh"
        worker.write_text(f'#!/bin/sh\necho "$4" >> {started}\n')
        worker.chmod(0o755)
        monkeypatch.setattr("evaluators.run.workers.sys.executable", str(worker))
    stores = [Store(store_url) for _ in range(RESUMERS)]
    seen = []
    for _ in range(TRIES):
        rid = prepare_run(stores[0], SINGLE, ["f1_score"], resume=False)  # queued, never started: no heartbeat
        got = _race(stores, rid)
        winners = [g for g in got if g[0] == "started"]
        if winners:
            wait_until(lambda: _worker_starts(store_url, rid, started) >= len(winners), timeout=60,
                       what="the started workers to show")
        seen.append((len(winners), _worker_starts(store_url, rid, started)))
        assert all(g[0] in ("started", "busy") for g in got), got
        assert all("is already being resumed" in m for kind, m in got if kind == "busy"), got
    assert seen == [(1, 1)] * TRIES  # (resumes that started a worker, workers started) per try
    for s in stores:
        s.engine.dispose()
