"""Cost on the job queue. ``submit --batch``: a queued run judged through the provider's Batch API (the loopback
server's /v1/batches), as one job; a worker killed while its batch is in progress is replaced by another, which
polls the batch the first one stored instead of submitting it again. ``submit --budget``: the run ends "stopped"
with its reason, and ``wait`` says so with run's exit code and cost keys. PostgreSQL only (the queue lives there)."""
from __future__ import annotations

import json
import signal

from evaluators.store.store import Store
from tests.conftest import SINGLE
from tests.procs import wait_until
from tests.test_queue import cli, pg_url, stop, worker  # noqa: F401 (pg_url: the fixture)


def test_a_batch_run_on_the_queue_survives_its_workers_death_and_submits_once(tmp_path, pg_url, judge_server):
    judge_server.batch_api.hold()  # the batch stays in progress until released
    p = cli("submit", SINGLE, "--metrics", "coherence", "--judge-base-url", judge_server.url, "--batch",
            "--price", "2,0.5,8", url=pg_url)
    assert p.returncode == 0, p.stderr
    assert "31 rows in 1 job(s) through the Batch API" in p.stdout
    rid = p.stdout.strip().splitlines()[-1].split()[-1]
    store = Store(pg_url)
    first = worker(pg_url, EVAL_BATCH_POLL="0.05")
    try:
        wait_until(lambda: any(b["batch_id"] for b in store.run_batches(rid)), timeout=60, what="a batch submitted")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        judge_server.batch_api.release()
        second = worker(pg_url, EVAL_BATCH_POLL="0.05")
        try:
            w = cli("wait", rid, "--out", tmp_path / "out", url=pg_url)
        finally:
            stop(second)
    finally:
        stop(first)
    assert w.returncode == 0, w.stderr
    # one batch in all, no chat completion (no judge check either: a batch run makes none), every row scored
    assert len(judge_server.batch_api.created) == 1 and len(judge_server.requests) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["coherence.scored_rows"] == 31 and metrics["cost.batch_calls"] == 31


def test_a_queued_run_stopped_at_its_budget_ends_stopped_and_wait_says_why(tmp_path, pg_url, judge_server):
    """A chunk that stopped at the budget never counted as ended: the run stayed "running" and ``wait`` waited
    for ever. Now the run ends "stopped" with the runner's reason, and ``wait`` exits 4 as ``run`` does (the
    reason and exit code of tests/test_cost.py's CLI budget test), metrics.json with the cost keys."""
    p = cli("submit", SINGLE, "--metrics", "coherence", "--judge-base-url", judge_server.url, "--judge-model",
            "gpt-4o-mini", "--price", "2,0.5,8", "--budget", "0.004", url=pg_url)
    assert p.returncode == 0, p.stderr
    rid = p.stdout.strip().splitlines()[-1].split()[-1]
    w_ = worker(pg_url)
    try:
        w = cli("wait", rid, "--out", tmp_path / "out", url=pg_url)
    finally:
        stop(w_)
    assert w.returncode == 4, w.stderr
    assert "stopped: budget: the next call would have taken the run past its budget" in w.stderr
    run = Store(pg_url).get_run(rid)
    assert run["status"] == "stopped" and 0 < run["tasks_done"] < 31
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert 0 < metrics["cost.usd"] <= 0.004
