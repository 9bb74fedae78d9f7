"""Runs on the job queue (PostgreSQL store, procrastinate): `submit`, workers in their own processes, `wait`;
a worker killed with SIGKILL mid-chunk; cancel; the judge's budget shared by the workers. Real PostgreSQL
(tests.pg), the loopback judge, real subprocesses; skipped, saying why, without PostgreSQL's binaries."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter

import pytest

from evaluators.data.loading import load_dataset
from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, env_for_subprocess
from tests.judge_server import expected_score, prompt_text
from tests.procs import wait_until


SECRET = "sk-queue-secret-4711"


@pytest.fixture
def pg_url(postgres) -> str:
    return postgres.new_database()


def cli(*args, url: str, **env):
    return subprocess.run([sys.executable, "-m", "evaluators", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env_for_subprocess(EVAL_DATABASE_URL=url, **env), timeout=180)


def worker(url: str, *args: str, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evaluators", "worker", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env_for_subprocess(EVAL_DATABASE_URL=url, **env))


def stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def judged_rows(server, ds) -> Counter:
    """How many judging calls the judge got for each row (found by the row's response in the prompt)."""
    out: Counter = Counter()
    for call in server.calls:
        text = prompt_text(call)
        out.update(i for i, r in enumerate(ds.records) if r["response"] in text)
    return out


def test_submit_two_workers_and_wait_write_what_run_writes(tmp_path, pg_url, judge_server):
    judge_server.require_key = SECRET  # each process's own key, from its own environment
    p = cli("submit", SINGLE, "--metrics", "fluency,bleu", "--judge-base-url", judge_server.url, "--chunk-rows", "8",
            "--judge-api-key-env", "JUDGE_KEY", url=pg_url, JUDGE_KEY=SECRET)
    assert p.returncode == 0, p.stderr
    rid = p.stdout.strip().splitlines()[-1].split()[-1]  # the run's id: the last word of the last line
    assert "4 job(s)" in p.stdout and len(judge_server.probes) == 1  # the judge's check, from submit
    bound = ["--judge-base-url", judge_server.url, "--judge-api-key-env", "JUDGE_KEY"]  # this URL's key, only
    workers = [worker(pg_url, *bound, JUDGE_KEY=SECRET), worker(pg_url, *bound, JUDGE_KEY=SECRET)]
    try:
        w = cli("wait", rid, "--out", tmp_path / "out", "--fail-under", "fluency=1", url=pg_url)
    finally:
        stop(*workers)
    assert w.returncode == 0, w.stderr
    assert f"run {rid}: completed" in w.stdout
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    ds = load_dataset(SINGLE)
    assert len(rows) == 31 and [r["inputs.id"] for r in rows] == [r["id"] for r in ds.records]
    for i, r in enumerate(rows):  # each row's verdict is what the judge said for that row's prompt
        prompt = next(prompt_text(c) for c in judge_server.calls if ds.records[i]["response"] in prompt_text(c))
        assert r["outputs.fluency.fluency"] == expected_score(prompt)
    assert judged_rows(judge_server, ds) == Counter(range(31))  # each row judged once
    assert len(judge_server.probes) <= 1 + 2  # submit's check, then one per worker (not one per chunk)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["fluency.scored_rows"] == 31 and metrics["bleu.scored_rows"] == 31
    store = Store(pg_url)
    assert store.get_run(rid)["tasks_done"] == 62
    # wait's exit codes are run's: a gate breached is 3
    assert cli("wait", rid, "--out", tmp_path / "o2", "--fail-under", "bleu=0.99", url=pg_url).returncode == 3
    with store.engine.connect() as c:  # the key went through neither the queue nor the store
        tables = [t for (t,) in c.exec_driver_sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        assert "procrastinate_jobs" in tables and "run_chunks" in tables
        for t in tables:
            assert c.exec_driver_sql(f"SELECT count(*) FROM {t} x WHERE x::text LIKE %s", (f"%{SECRET}%",)).scalar() == 0


SLOW_CLOCK_WORKER = ("import sys; from evaluators.run import runner; runner.FLUSH_SECONDS = 2; "
                     "from evaluators.cli import main; sys.argv = ['evaluators', 'worker']; sys.exit(main.main())")


def test_a_worker_killed_mid_chunk_loses_no_row_and_scores_none_twice(tmp_path, pg_url, judge_server):
    ds = load_dataset(SINGLE)
    judge_server.hold_calls(after=5)  # five rows judged, then calls wait at the gate: the kill lands mid-chunk
    p = cli("submit", SINGLE, "--metrics", "fluency", "--judge-base-url", judge_server.url, "--concurrency", "2",
            "--chunk-rows", "40", url=pg_url)  # one chunk: the second worker can only get it by recovery
    assert p.returncode == 0, p.stderr
    rid = p.stdout.split()[-1]
    store = Store(pg_url)
    # the clock's writes 2 s apart in the first worker (its heartbeat stays within the 6 s that keep its chunk):
    # only a write made before each slot's next call can have stored the five answered by the check below
    first = subprocess.Popen([sys.executable, "-c", SLOW_CLOCK_WORKER], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env_for_subprocess(EVAL_DATABASE_URL=pg_url))
    try:
        wait_until(lambda: judge_server.held == 2, what="two calls held", timeout=60)
        # each slot's result is stored before it takes its next call: with two calls held, the five answered
        # are stored, none only in the killed worker's memory (0 of 5 with the clock's writes alone)
        assert len(store.load_results(rid)) == 5
        first.send_signal(signal.SIGKILL)
        first.wait()
        kept = {r.row_idx for r in store.load_results(rid)}
        judge_server.release()
        second = worker(pg_url)
        try:
            wait_until(lambda: store.get_run(rid)["status"] == "completed", what="the run completed by the second "
                       "worker", timeout=90)
        finally:
            stop(second)
    finally:
        stop(first)
    results = store.load_results(rid)
    assert sorted(r.row_idx for r in results) == list(range(31)) and all(r.status == "ok" for r in results)
    asked = judged_rows(judge_server, ds)
    assert all(asked[i] == 1 for i in kept)  # stored before the kill: never asked again
    assert sum(n - 1 for n in asked.values()) <= 2  # asked again: at most the two calls in flight
    with store.engine.connect() as c:
        chunk = c.exec_driver_sql("SELECT attempts, status FROM run_chunks").one()
    assert tuple(chunk) == (2, "completed")
    run = store.get_run(rid)  # the run's counts are the whole run's, the first worker's part included
    assert (run["tasks_total"], run["tasks_done"], run["tasks_errored"]) == (31, 31, 0)


def test_cancel_stops_every_workers_part_and_the_chunks_no_worker_took(pg_url, judge_server):
    judge_server.hold_calls(after=0)
    p = cli("submit", SINGLE, "--metrics", "fluency", "--judge-base-url", judge_server.url, "--concurrency", "2",
            "--chunk-rows", "5", url=pg_url)  # seven chunks, two workers: five chunks wait in the queue
    rid = p.stdout.split()[-1]
    store = Store(pg_url)
    workers = [worker(pg_url), worker(pg_url)]
    try:
        wait_until(lambda: judge_server.held == 4, what="both workers judging", timeout=60)
        store.request_cancel(rid)  # (the held calls never come back: the workers must stop them themselves)
        wait_until(lambda: store.get_run(rid)["status"] == "cancelled", what="the run cancelled", timeout=60)
    finally:
        judge_server.release()
        stop(*workers)
    with store.engine.connect() as c:
        states = Counter(s for (s,) in c.exec_driver_sql("SELECT status FROM run_chunks"))
    assert states == Counter(cancelled=7)
    assert len(judge_server.calls) == 4  # the held calls only: no chunk went on, none was started


def test_workers_sharing_a_judge_share_its_budget_and_one_probes(pg_url):
    """Two chunk runners of runs with the same judge: each keeps to half the --rpm / --tpm budget, a pause
    the judge asked of one pauses the other, and only one lets its pace creep up."""
    import time

    from evaluators.api import prepare_run
    from evaluators.judge.config import JudgeConfig
    from evaluators.judge.ratelimit import RateLimiter
    from evaluators.run.chunked import ChunkRunner, plan_chunks

    store = Store(pg_url)
    judge = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1", rpm=600, tpm=60_000)
    rid = prepare_run(store, SINGLE, ["fluency"], judge)
    plan_chunks(store, rid, rows=16)
    runners = [ChunkRunner(store, rid, 0, 16, "host:1"), ChunkRunner(store, rid, 16, 31, "host:2")]
    for r in runners:
        r._limiter = RateLimiter(8, judge.rpm, judge.tpm)
        r.store.claim_run(rid)
    for r in runners:
        r.store.update_run(rid, tasks_done=0)  # a heartbeat
    for r in runners:
        r.store.update_run(rid, tasks_done=1)
    a, b = (r._limiter for r in runners)
    assert a.rpm.rate == b.rpm.rate == 600 / 60 / 2 and a.tpm.rate == b.tpm.rate == 60_000 / 60 / 2
    assert (a.probing, b.probing) == (True, False)  # host:1 probes for both
    a.pause_until(time.monotonic() + 30)  # the judge asked host:1 to wait 30 s
    runners[0].store.update_run(rid, tasks_done=2)
    runners[1].store.update_run(rid, tasks_done=2)
    assert b.paused_until > time.monotonic() + 20
    runners[0].store.update_run(rid, status="completed")  # host:1 done: host:2 has the whole budget
    runners[1].store.update_run(rid, tasks_done=3)
    assert b.rpm.rate == 600 / 60 and b.probing


def test_cancel_of_a_run_no_worker_has_taken_ends_it_at_once(pg_url):
    from evaluators.api import prepare_run
    from evaluators.run.queue import enqueue_run

    store = Store(pg_url)
    rid = prepare_run(store, SINGLE, ["bleu"])
    assert enqueue_run(store, rid, rows=10) == 4 and store.get_run(rid)["status"] == "queued"
    store.request_cancel(rid)  # no worker is running: nobody else would end it
    assert store.get_run(rid)["status"] == "cancelled"
    with store.engine.connect() as c:
        assert {s for (s,) in c.exec_driver_sql("SELECT status FROM run_chunks")} == {"cancelled"}


def test_the_dashboard_queues_runs_on_postgresql_and_a_worker_keeps_them_held(pg_url):
    """spawn_worker (the dashboard's Start / Resume) queues the run's chunks instead of starting a process, refuses
    a key typed in the dashboard (workers use their own), and a live worker keeps a waiting run from looking
    stopped."""
    from evaluators.api import prepare_run
    from evaluators.core.errors import EvalError
    from evaluators.judge.config import JudgeConfig
    from evaluators.run.workers import spawn_worker, worker_stopped

    store = Store(pg_url)
    judge = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1")
    rid = prepare_run(store, SINGLE, ["fluency"], judge)
    with pytest.raises(EvalError, match="use their own keys"):
        spawn_worker(store, rid, api_key="sk-typed")
    assert spawn_worker(store, rid) == 0
    with store.engine.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM run_chunks WHERE status = 'queued'").scalar() == 1
        assert c.exec_driver_sql("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'").scalar() == 1
        c.exec_driver_sql("UPDATE runs SET heartbeat_at = now() - interval '1 hour'")  # waited an hour, no worker
        c.commit()
    assert worker_stopped(store.get_run(rid))
    from evaluators.run.queue import _hold_waiting_runs

    _hold_waiting_runs(store)  # what every live worker does each second (while busy with other runs' chunks)
    assert not worker_stopped(store.get_run(rid))


def test_a_workers_key_goes_only_to_the_url_it_was_given_for():
    from evaluators.judge.config import JudgeConfig
    from evaluators.run import queue
    from evaluators.run.spec import RunSpec

    queue.URL_KEYS["http://judge.team:8000/v1"] = "sk-team"
    try:
        def spec(**judge):
            return RunSpec(metrics=["fluency"], judge=JudgeConfig(provider="compatible", **judge))
        assert queue.key_for(spec(base_url="http://judge.team:8000/v1/")) == "sk-team"
        assert queue.key_for(spec(base_url="http://attacker.example/v1")) is None
        assert queue.key_for(RunSpec(metrics=["bleu"])) is None
    finally:
        queue.URL_KEYS.clear()


def test_submit_takes_run_s_metric_files_and_prices_and_refuses_batch_in_chunks(tmp_path, pg_url, judge_server):
    code = ROOT / "examples" / "metrics" / "word_count.py"
    p = cli("submit", SINGLE, "--metrics", "word_count,fluency", "--metric-file", code, "--judge-base-url",
            judge_server.url, "--judge-model", "gpt-4o-mini", "--price", "2,0.5,8", "--chunk-rows", "16", url=pg_url)
    assert p.returncode == 0, p.stderr
    rid = p.stdout.strip().splitlines()[-1].split()[-1]
    spec = Store(pg_url).get_run(rid)["spec"]
    assert spec["prices"]["gpt-4o-mini"]["input"] == 2 and spec["definitions"]["word_count"]["format"] == "code"
    workers = [worker(pg_url)]
    try:
        w = cli("wait", rid, "--out", tmp_path / "out", url=pg_url)
    finally:
        stop(*workers)
    assert w.returncode == 0, w.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    ds = load_dataset(SINGLE)
    assert [r["outputs.word_count.word_count"] for r in rows] == [float(len(r["response"].split())) for r in ds.records]
    b = cli("submit", SINGLE, "--metrics", "fluency", "--judge-base-url", judge_server.url, "--batch",
            "--chunk-rows", "8", url=pg_url)  # a batch run is one job (tests/test_queue_cost.py)
    assert b.returncode == 2 and "--batch queues the run as one job" in b.stderr and "Traceback" not in b.stderr


def test_default_chunks_give_each_live_worker_a_few_and_stay_within_floor_and_cap():
    """The sizes by hand: 3,000 rows, 3 live workers (counted as 4) x 4 chunks = 16 shares of 187.5 -> the
    200-row floor, 15 chunks; 100,000 rows, 8 workers -> 32 shares of 3,125; 1,000,000 rows -> the 10,000 cap."""
    from evaluators.run.chunked import default_chunk_rows

    assert default_chunk_rows(3_000, 3) == 200
    assert default_chunk_rows(100_000, 8) == 3_125
    assert default_chunk_rows(1_000_000, 3) == 10_000
    assert default_chunk_rows(10, 0) == 200


def test_a_run_queued_again_keeps_its_chunks_whatever_size_is_asked_now(pg_url):
    """A run queued in 10-row chunks and queued again (Resume, retry errors) with the default size keeps its
    four chunks: a job is never a span that overlaps chunks stored with other bounds."""
    from evaluators.api import prepare_run
    from evaluators.run.chunked import plan_chunks

    store = Store(pg_url)
    rid = prepare_run(store, SINGLE, ["bleu"])
    n = store.dataset_info(store.get_run(rid)["dataset_id"])["n_rows"]
    first = plan_chunks(store, rid, rows=10)
    assert first == [(a, min(a + 10, n)) for a in range(0, n, 10)]
    assert plan_chunks(store, rid, every=True) == first
    assert plan_chunks(store, rid, rows=3, every=True) == first
