"""Detached workers: a run outlives its caller, and a typed key never lands anywhere."""
from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from evaluators import JudgeConfig, Store
from evaluators.read.columns import views_dir
from evaluators.read.results import open_results
from evaluators.api import prepare_run
from evaluators.read.exports import csv_text, jsonl_text
from evaluators.read.report import html_report
from evaluators.run.workers import spawn_worker
from tests.conftest import SINGLE, default_store, wait_for_run

SECRET = "sk-test-9f8e7d6c5b4a-never-store-me"
pytestmark = pytest.mark.sqlite_only("detached per-run worker processes (pid files, reaping, a typed key in the worker's environment): on PostgreSQL runs go to the job queue's workers instead (run.workers._enqueue), tested in test_queue.py")


def test_worker_uses_the_key_and_leaves_no_trace(tmp_path, judge_server):
    store = default_store(tmp_path / "evalhome")
    judge = JudgeConfig(model="loopback", provider="openai", base_url=judge_server.url)
    rid = prepare_run(store, SINGLE, ["coherence"], judge=judge)
    spawn_worker(store, rid, api_key=SECRET)
    assert wait_for_run(store, rid)["status"] == "completed"
    assert {c["_auth"] for c in judge_server.calls} == {f"Bearer {SECRET}"}  # the judge saw it...
    store.engine.dispose()
    files = [p for p in (tmp_path / "evalhome").rglob("*") if p.is_file()]
    assert any(p.name.startswith("run-") for p in files)  # the worker's log exists
    for p in files:  # ...the database (and its WAL) and the logs never did
        assert SECRET.encode() not in p.read_bytes(), p
    with store.engine.connect() as c:  # every table's every row, read in plain SQL (a server database too)
        for table in sa.inspect(c).get_table_names():
            assert SECRET not in str(c.execute(sa.text(f'SELECT * FROM "{table}"')).fetchall()), table
    res = open_results(store, rid)
    for text in (csv_text(res.rows()), jsonl_text(res.rows()), html_report(res, store.get_run(rid)), str(store.get_run(rid))):
        assert SECRET not in text


def test_worker_without_a_key_fails_the_run_with_the_reason(tmp_path, monkeypatch, store_url):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = Store(store_url)
    rid = prepare_run(store, SINGLE, ["coherence"], judge=JudgeConfig(model="gpt-4o-mini", provider="openai"))
    spawn_worker(store, rid)
    run = wait_for_run(store, rid)
    assert run["status"] == "failed" and "OPENAI_API_KEY" in run["error"]


def test_cancel_through_the_store_stops_a_worker(tmp_path, judge_server, store_url):
    # three rows judged, the fourth call held at the judge: the run cannot end by itself, only by the cancel
    judge_server.hold_calls(after=3)
    store = Store(store_url)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, concurrency=1)
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge)
    spawn_worker(store, rid)
    # (the results table, not tasks_done: the run's progress line is brought up to date by the next results)
    wait_until(lambda: len(store.done_keys(rid)) == 3 and judge_server.held == 1,
               what="three rows judged and stored, and the fourth call held")
    store.request_cancel(rid)
    run = wait_for_run(store, rid)
    assert run["status"] == "cancelled" and run["tasks_done"] == 3
    assert len(judge_server.calls) == 4  # the held call was the last: the worker sent nothing after the cancel


# ---------------------------------------------------------------- one worker per run; retry keeps errors

import subprocess  # noqa: E402
import sys  # noqa: E402


from evaluators import evaluate  # noqa: E402
from evaluators.run.workers import WorkerBusy, retry_failed  # noqa: E402
from tests.conftest import env_for_subprocess  # noqa: E402
from tests.judge_server import Action  # noqa: E402
from tests.procs import needs_proc, wait_for_worker, wait_until, worker_pids  # noqa: E402


def _errors(store, rid) -> int:
    return open_results(store, rid).metrics()["fluency.errored_rows"]


def _run_with_one_error(store, judge_server) -> str:
    """A finished fluency run on the samples whose row 5 errored (HTTP 500 after retries)."""
    from evaluators.data.loading import load_dataset

    bad = load_dataset(SINGLE).records[4]["response"]
    judge_server.on_prompt(bad, *[Action(status=500)] * 4)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, max_retries=1,
                        backoff_base=0.01, concurrency=4)
    rid = evaluate(SINGLE, ["fluency"], judge=judge, store=store).run_id
    judge_server.by_prompt.clear()
    assert _errors(store, rid) == 1
    return rid


@needs_proc
def test_resume_while_the_worker_runs_starts_no_second_worker(tmp_path, judge_server, store_url):
    judge_server.hold_calls(after=2)  # the worker holds the run, its third call held at the judge, until released
    store = Store(store_url)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, concurrency=1)
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge)
    first = spawn_worker(store, rid)
    wait_until(lambda: store.get_run(rid)["status"] == "running" and len(store.done_keys(rid)) == 2
               and judge_server.held == 1, what="the worker to start judging")
    with pytest.raises(WorkerBusy, match="still being executed"):
        spawn_worker(store, rid)
    with pytest.raises(WorkerBusy):
        spawn_worker(store, rid, retry_errors=True)
    assert worker_pids(rid) == [first]
    assert store.get_run(rid)["status"] == "running"  # a refused resume changes nothing
    judge_server.release()
    assert wait_for_run(store, rid)["status"] == "completed"
    assert len(judge_server.calls) == 31  # every row judged once


@needs_proc
def test_retry_while_held_is_refused_by_the_dashboard_and_by_the_worker_and_keeps_errors(tmp_path, judge_server,
                                                                                          store_url):
    store = Store(store_url)
    rid = _run_with_one_error(store, judge_server)
    judge_server.hold_calls(after=len(judge_server.calls))  # the resumed worker's one call is held: it holds the run
    spawn_worker(store, rid)
    wait_until(lambda: store.get_run(rid)["status"] == "running" and judge_server.held == 1,
               what="the resumed worker to claim the run and send its call")
    with pytest.raises(WorkerBusy):
        retry_failed(store, rid)
    # a worker started by other means refuses too, before touching the errors
    proc = subprocess.run([sys.executable, "-m", "evaluators", "worker", rid, "--retry-errors", "--db", store.url],
                          env=env_for_subprocess(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "being executed by another worker" in proc.stderr
    assert _errors(store, rid) == 1
    judge_server.release()
    assert wait_for_run(store, rid)["status"] == "completed" and _errors(store, rid) == 0


def test_retry_keeps_the_errors_when_its_worker_cannot_start(tmp_path, judge_server, monkeypatch, store_url):
    store = Store(store_url)
    rid = _run_with_one_error(store, judge_server)
    monkeypatch.setattr("evaluators.run.workers.sys.executable", str(tmp_path / "no-such-python"))
    with pytest.raises(Exception, match="could not start"):
        retry_failed(store, rid)
    assert _errors(store, rid) == 1  # still there to retry
    run = store.get_run(rid)
    assert run["status"] == "failed" and "could not start" in run["error"]
    monkeypatch.undo()
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "evalhome"))
    assert retry_failed(store, rid) == 1
    assert wait_for_run(store, rid)["status"] == "completed" and _errors(store, rid) == 0


def test_retry_errors_flag_clears_only_once_the_worker_holds_the_run(tmp_path, judge_server, store_url):
    store = Store(store_url)
    rid = _run_with_one_error(store, judge_server)
    calls = len(judge_server.calls)
    proc = subprocess.run([sys.executable, "-m", "evaluators", "worker", rid, "--retry-errors", "--db", store.url],
                          env=env_for_subprocess(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _errors(store, rid) == 0 and len(judge_server.calls) == calls + 1  # only the errored row again


def test_a_finished_worker_is_reaped_not_left_a_zombie(tmp_path, store_url):
    store = Store(store_url)
    rid = prepare_run(store, SINGLE, ["f1_score"])
    pid = spawn_worker(store, rid)
    assert wait_for_run(store, rid)["status"] == "completed"
    deadline = time.time() + 10
    state = None
    while time.time() < deadline:
        try:  # the third field of /proc/PID/stat is the state; Z is a zombie nobody waited for
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return  # gone: reaped
        time.sleep(0.1)
    raise AssertionError(f"worker {pid} still in /proc with state {state}")


@needs_proc
def test_a_finished_worker_leaves_the_results_page_its_columns_and_search(tmp_path, judge_server):
    """The first open of a freshly finished run reads its columns and search text instead of building them:
    the worker wrote them as the run ended, and opening the view leaves those files untouched."""
    from evaluators.read.view import open_view

    store = default_store(tmp_path / "evalhome")
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = prepare_run(store, SINGLE, ["coherence", "f1_score"], judge=judge)
    spawn_worker(store, rid)
    assert wait_for_run(store, rid)["status"] == "completed"
    wait_until(lambda: not worker_pids(rid), what="the worker's exit")
    views = views_dir(store)  # beside the SQLite file, or (PostgreSQL) under EVAL_HOME
    columns, search = sorted(views.glob(f"{rid}-*.npz")), sorted(views.glob("ds-*.search"))
    assert len(columns) == 1 and len(search) == 1
    assert len(list(views.glob(f"rates-{rid}-*.json"))) == 1  # and its rates, for the Runs page's table
    stamps = [p.stat().st_mtime_ns for p in (*columns, *search)]
    res = open_view(store, rid)
    assert res.query(search="battery", limit=0)[0] > 0  # the search reads the worker's text
    assert [p.stat().st_mtime_ns for p in (*columns, *search)] == stamps
    assert res.summary(res.specs[1]) == open_results(store, rid).summary(res.specs[1])  # and equals the store
