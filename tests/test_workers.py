"""Detached workers: a run outlives its caller, and a typed key never lands anywhere."""
from __future__ import annotations

import time

from evaluators import JudgeConfig, Store
from evaluators.api import open_results, prepare_run
from evaluators.exports import csv_text, jsonl_text
from evaluators.report import html_report
from evaluators.workers import spawn_worker
from tests.conftest import SINGLE, wait_for_run

SECRET = "sk-test-9f8e7d6c5b4a-never-store-me"


def test_worker_uses_the_key_and_leaves_no_trace(tmp_path, judge_server):
    store = Store(f"sqlite:///{tmp_path / 'evalhome' / 'evals.db'}")
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
    res = open_results(store, rid)
    for text in (csv_text(res.rows()), jsonl_text(res.rows()), html_report(res, store.get_run(rid)), str(store.get_run(rid))):
        assert SECRET not in text


def test_worker_without_a_key_fails_the_run_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = Store(f"sqlite:///{tmp_path / 'evals.db'}")
    rid = prepare_run(store, SINGLE, ["coherence"], judge=JudgeConfig(model="gpt-4o-mini", provider="openai"))
    spawn_worker(store, rid)
    run = wait_for_run(store, rid)
    assert run["status"] == "failed" and "OPENAI_API_KEY" in run["error"]


def test_cancel_through_the_store_stops_a_worker(tmp_path, judge_server):
    judge_server.latency = 0.2
    store = Store(f"sqlite:///{tmp_path / 'evals.db'}")
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, concurrency=1)
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge)
    spawn_worker(store, rid)
    deadline = time.time() + 30
    while store.get_run(rid)["tasks_done"] < 3 and time.time() < deadline:
        time.sleep(0.1)
    store.request_cancel(rid)
    run = wait_for_run(store, rid)
    assert run["status"] == "cancelled" and 3 <= run["tasks_done"] < 31
