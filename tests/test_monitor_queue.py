"""Monitor rules judged by the job queue's workers (PostgreSQL store): `monitor rule run --every` and the receiver
only queue a round of each rule; `python -m evaluators worker` processes take them. Two workers judge every sampled
trace exactly once; a worker SIGKILLed mid-batch has its batch finished by the other with no trace judged twice.
Real PostgreSQL (tests.pg), the loopback judge, real processes; skipped, saying why, without PostgreSQL's binaries."""
from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections import Counter

import pytest
import sqlalchemy as sa

from evaluators.store.store import Store
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import expected_score, prompt_text
from tests.procs import wait_until
from tests.test_queue import stop

SECRET = "sk-monitor-queue-4711"
# a worker whose claims take 4 traces at a time, so that two workers share a rule's backlog batch by batch
SMALL_BATCH_WORKER = ("import sys; from evaluators.monitor import claims; claims.BATCH = 4; "
                      "from evaluators.cli import main; sys.argv = ['evaluators', 'worker', *sys.argv[1:]]; sys.exit(main.main())")


@pytest.fixture
def pg_url(postgres) -> str:
    return postgres.new_database()


def monitor(*args: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", "monitor", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env_for_subprocess(EVAL_DATABASE_URL=url), timeout=180)


def process(url: str, *argv: str, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env_for_subprocess(EVAL_DATABASE_URL=url, **env))


def plant(store: Store, n: int) -> list[str]:
    store.ensure_monitor_project("shop")
    ids = [hashlib.md5(f"queued trace {i}".encode()).hexdigest() for i in range(n)]
    for i, tid in enumerate(ids):
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": f"{i + 1:016x}", "parent_span_id": "",
                                          "name": "chat", "start_ns": i, "end_ns": i + 1, "attributes": {}}])
        assert store.save_mapped_trace("shop", tid, 1, fields={"query": f"question of {tid}",
                                                               "response": f"answer of {tid}"},
                                       sources={}, content=True, hint="", conversation_key=None,
                                       completeness="complete")
    return ids


def add_rule(url: str, judge_url: str, rate: str, *extra: str) -> None:
    p = monitor("rule", "add", "--project", "shop", "--name", "q", "--metrics", "coherence", "--sample-rate", rate,
                "--judge-base-url", judge_url, "--concurrency", "2", *extra, url=url)
    assert p.returncode == 0, p.stderr
    with sa.create_engine(url).begin() as c:  # as if in place before the traffic came: it decides the traces
        c.execute(sa.text("UPDATE monitor_rules SET created_at = '2000-01-01' WHERE name = 'q'"))


def counts(store: Store) -> dict[str, int]:
    """The rule's decisions that can be other than 0 here (filters, caps and budgets are not set)."""
    got = store.decision_counts("shop")["q"]
    assert all(got[k] == 0 for k in ("filtered_out", "over_hourly_cap", "over_budget")), got
    return {k: v for k, v in got.items() if k not in ("filtered_out", "over_hourly_cap", "over_budget")}


def asked(server, ids: list[str]) -> Counter:
    """How often the judge was asked about each trace (found by its answer in the prompt)."""
    return Counter(t for c in server.calls for t in ids if f"answer of {t}" in prompt_text(c))


def jobs(store: Store) -> Counter:
    """The monitor's rule jobs in the queue, by status."""
    if not sa.inspect(store.engine).has_table("procrastinate_jobs"):
        return Counter()  # (made by the first process that queues)
    with store.engine.connect() as c:
        return Counter(s for (s,) in c.execute(sa.text(
            "SELECT status FROM procrastinate_jobs WHERE task_name = 'evaluators.monitor_rule'")))


def judged_once_each(store: Store, ids: set[str], server) -> None:
    """Every trace in ``ids`` is judged, with one result row in one run, whose value the judge planted."""
    planted = {t: expected_score(prompt_text(c)) for c in server.calls for t in ids if f"answer of {t}" in prompt_text(c)}
    with store.engine.connect() as c:
        rows = c.execute(sa.text("SELECT d.trace_id, d.decision, r.value FROM monitor_decisions d JOIN results r ON "
                                 "r.run_id = d.run_id AND r.row_idx = d.row_idx WHERE d.rule = 'q'")).all()
        results = c.execute(sa.text("SELECT count(*) FROM results r JOIN runs ON runs.id = r.run_id "
                                    "WHERE runs.name LIKE 'monitor%'")).scalar()
    assert sorted(t for t, d, _ in rows if d == "judged") == sorted(ids)
    assert all(v == planted[t] for t, _, v in rows)
    assert results == len(ids)  # no trace has a result in a second run (judged twice, from the cache or not)


def test_two_workers_judge_every_sampled_trace_exactly_once(pg_url, judge_server):
    store = Store(pg_url)
    ids = plant(store, 60)
    sampled = {t for t in ids if int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") / 2**64 < 0.5}
    judge_server.require_key = SECRET
    add_rule(pg_url, judge_server.url, "0.5", "--judge-api-key-env", "JUDGE_KEY")
    judge_server.hold_calls(after=0, until=4)  # a barrier: calls wait until both workers' two slots are judging
    # the queue's side: a round queued every 0.2 s (deduplicated: one waits at most); each worker's own key
    rounds = process(pg_url, "-m", "evaluators", "monitor", "rule", "run", "--every", "0.2")
    bound = ("--judge-base-url", judge_server.url, "--judge-api-key-env", "JUDGE_KEY")  # the key goes to this URL only
    workers = [process(pg_url, "-c", SMALL_BATCH_WORKER, *bound, JUDGE_KEY=SECRET) for _ in range(2)]
    try:
        wait_until(lambda: counts(store)["judged"] + counts(store)["failed"] == len(sampled),
                   what="every sampled trace judged", timeout=180)
    finally:
        stop(rounds, *workers)
    assert judge_server.max_held == 4  # both workers judged batches of the rule at once
    assert counts(store) == {"sampled_out": 60 - len(sampled), "no_content": 0, "pending": 0,
                             "judged": len(sampled), "failed": 0}
    judged_once_each(store, sampled, judge_server)
    assert asked(judge_server, ids) == Counter({t: 1 for t in sampled})
    with store.engine.connect() as c:
        runs = c.execute(sa.text("SELECT count(*) FROM runs WHERE name LIKE 'monitor%'")).scalar()
        assert runs >= len(sampled) // 4  # batches of 4: the backlog was shared out, not judged as one run
        assert jobs(store)["todo"] <= 1 and jobs(store)["doing"] == 0  # the queueing lock: one round waits at most
        tables = [t for (t,) in c.exec_driver_sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for t in tables:  # the key went through neither the queue nor the store
            assert c.exec_driver_sql(f"SELECT count(*) FROM {t} x WHERE x::text LIKE %s", (f"%{SECRET}%",)).scalar() == 0


def test_a_worker_sends_the_key_a_rule_names_only_to_a_url_it_was_started_with_for_it(pg_url, judge_server):
    """A rule is written in the shared store: naming a variable a worker has and a server of its choosing must not
    get the worker's key there. A worker not started with the rule's URL for that variable fails the traces, saying
    what to run, and sends nothing."""
    store = Store(pg_url)
    plant(store, 3)
    add_rule(pg_url, judge_server.url, "1", "--judge-api-key-env", "JUDGE_KEY")
    rounds = process(pg_url, "-m", "evaluators", "monitor", "rule", "run", "--every", "0.2")
    worker = process(pg_url, "-m", "evaluators", "worker", JUDGE_KEY=SECRET)  # the key, but no URL bound to it
    try:
        wait_until(lambda: counts(store)["failed"] == 3, what="the traces failed", timeout=120)
    finally:
        stop(rounds, worker)
    errors = {d["error"] for d in store.decisions("shop", "q", 1).values()}
    assert errors == {f"this worker sends JUDGE_KEY only to a judge URL it was started with for it: python -m "
                      f"evaluators worker --judge-base-url {judge_server.url} --judge-api-key-env JUDGE_KEY"}
    assert judge_server.calls == [] and judge_server.probes == []


def test_a_worker_killed_mid_batch_has_it_finished_by_another_and_no_trace_judged_twice(pg_url, judge_server):
    store = Store(pg_url)
    ids = plant(store, 30)
    add_rule(pg_url, judge_server.url, "1")
    judge_server.hold_calls(after=5)  # five traces judged, then both slots' calls wait: the kill lands mid-batch
    rounds = process(pg_url, "-m", "evaluators", "monitor", "rule", "run", "--every", "0.2")
    first = process(pg_url, "-m", "evaluators", "worker")
    second = None
    try:
        wait_until(lambda: judge_server.held == 2, what="two calls held", timeout=120)
        [rid] = {d["run_id"] for d in store.decisions("shop", "q", 1).values()}  # one batch, bound to its run
        # each slot's result is stored before it takes its next call: with two calls held, the five are stored
        wait_until(lambda: len(store.load_results(rid)) == 5, what="five results stored", timeout=30)
        kept = {t for t, d in store.decisions("shop", "q", 1).items()
                if d["row_idx"] in {r.row_idx for r in store.load_results(rid)}}
        first.send_signal(signal.SIGKILL)
        first.wait()
        judge_server.release()
        second = process(pg_url, "-m", "evaluators", "worker")
        wait_until(lambda: counts(store)["judged"] == 30, what="every trace judged by the second worker", timeout=180)
        # the dead worker's job is given up once its worker is silent 6 s: queued again, or (a round of the rule
        # waiting already, under the same queueing lock) ended, which does its work; never an error that stops
        # the recovery of the other stalled jobs
        wait_until(lambda: jobs(store)["doing"] == 0, what="the dead worker's job given up", timeout=60)
    finally:
        stop(rounds, first, *([second] if second else []))
    assert "looking for stalled jobs failed" not in second.stderr.read().decode()
    assert counts(store) == {"sampled_out": 0, "no_content": 0, "pending": 0, "judged": 30, "failed": 0}
    assert {d["run_id"] for d in store.decisions("shop", "q", 1).values()} == {rid}  # the dead batch's run, resumed
    judged_once_each(store, set(ids), judge_server)
    times = asked(judge_server, ids)
    assert len(kept) == 5 and all(times[t] == 1 for t in kept)  # stored before the kill: never asked again
    assert set(times) == set(ids) and sum(n - 1 for n in times.values()) <= 2  # again: the two calls in flight only
    assert store.get_run(rid)["status"] == "completed"


def test_the_receiver_on_postgresql_queues_rounds_for_the_workers_instead_of_starting_a_process(pg_url, judge_server):
    from tests.monitor_procs import ReceiverProcess, pb_span, traces_request

    store = Store(pg_url)
    _, token = store.create_ingest_token("shop")
    store.ensure_monitor_project("shop", quiet_seconds=0)
    add_rule(pg_url, judge_server.url, "1")
    said = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is 2 + 2?"}]}])
    got = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "It is 4."}]}])
    span = pb_span(42, 1, name="chat gpt-4o", attributes={"gen_ai.operation.name": "chat",
                                                          "gen_ai.input.messages": said, "gen_ai.output.messages": got})

    with ReceiverProcess(pg_url, "--assemble-every", "0.2", "--judge-every", "0.2") as r:
        assert r.post("/v1/traces", traces_request([span]), token)[0] == 200
        wait_until(lambda: jobs(store)["todo"] == 1, what="a round queued", timeout=60)
        with open(f"/proc/{r.proc.pid}/task/{r.proc.pid}/children") as f:
            assert f.read().split() == []  # no judging process of its own
        worker = process(pg_url, "-m", "evaluators", "worker")
        try:
            wait_until(lambda: store.decisions("shop", "q", 1).get(f"{42:032x}", {}).get("decision") == "judged",
                       what="the trace judged by the worker", timeout=120)
        finally:
            stop(worker)
        assert jobs(store)["todo"] <= 1  # rounds queued every 0.2 s meanwhile: one waited at most
    [call] = judge_server.calls
    assert "What is 2 + 2?" in prompt_text(call) and "It is 4." in prompt_text(call)


def test_a_stalled_round_whose_rule_has_one_waiting_is_ended_and_the_jobs_after_it_still_put_back(pg_url):
    """A job whose worker stopped beating goes back to the queue; a rule's round cannot while the next round of that
    rule waits (the queueing lock: one waits at most), so it is ended instead (the waiting one does its work), and
    the stalled jobs after it are put back all the same."""
    import asyncio

    from evaluators.run import queue

    store = Store(pg_url)
    rule = ("evaluators.monitor_rule", "evaluators.monitor_rule:[\"shop\", \"q\"]", {"project": "shop", "rule": "q"})
    other = ("evaluators.some_other_task", "other", {})
    assert queue.defer_jobs(store, [rule, other]) == 2
    app = queue.app_for(store)

    async def take_both_and_die() -> None:  # a worker takes both jobs, then falls silent
        async with app.open_async():
            wid = await app.job_manager.register_worker()
            assert await app.job_manager.fetch_job([queue.QUEUE], wid) is not None
            assert await app.job_manager.fetch_job([queue.QUEUE], wid) is not None
        with store.engine.begin() as c:
            c.execute(sa.text("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' "
                              "WHERE id = :w"), {"w": wid})

    async def recover() -> None:
        async with app.open_async():
            await queue._recover_once(app, store)

    asyncio.run(take_both_and_die())
    assert queue.defer_jobs(store, [rule, rule]) == 1  # the rule's next round waits (once, however often queued)
    asyncio.run(recover())
    with store.engine.connect() as c:
        states = sorted(tuple(r) for r in c.execute(sa.text("SELECT id, task_name, status FROM procrastinate_jobs")))
    assert [(task, status) for _, task, status in states] == [
        ("evaluators.monitor_rule", "failed"), ("evaluators.some_other_task", "todo"), ("evaluators.monitor_rule", "todo")]


def test_three_receivers_sharing_a_trace_s_spans_and_two_workers_judge_each_trace_once(pg_url, judge_server):
    """Several receivers behind a load balancer, one store, workers elsewhere: each trace's root (with the messages)
    and two children reach three different receivers; every receiver queues the rule's rounds; two workers judge.
    Each trace is one trace, judged once, by one run, its value the judge's."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.monitor_procs import ReceiverProcess, pb_span, traces_request

    store = Store(pg_url)
    _, token = store.create_ingest_token("shop")
    store.ensure_monitor_project("shop", quiet_seconds=3600)  # held open until every span is in
    add_rule(pg_url, judge_server.url, "1")
    traces = range(1, 25)

    def span(t: int, k: int):
        if k:
            return pb_span(t, k + 1, parent=1, name=f"step {k}")
        said = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"question {t}"}]}])
        got = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"answer of {t:032x}"}]}])
        return pb_span(t, 1, name="chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.input.messages": said,
                                                         "gen_ai.output.messages": got})

    with ThreadPoolExecutor(3) as pool:
        receivers = list(pool.map(lambda _: ReceiverProcess(pg_url, "--assemble-every", "0.2", "--judge-every", "0.2"),
                                  range(3)))
    workers = [process(pg_url, "-c", SMALL_BATCH_WORKER) for _ in range(2)]
    try:
        with receivers[0] as a, receivers[1] as b, receivers[2] as c, ThreadPoolExecutor(3) as pool:
            def send(k: int, r: ReceiverProcess) -> None:  # receiver k gets span (t + k) % 3 of every trace
                for t in traces:
                    assert r.post("/v1/traces", traces_request([span(t, (t + k) % 3)]), token)[0] == 200

            list(pool.map(send, range(3), (a, b, c)))
            assert store.trace_counts("shop")["spans"] == 3 * len(traces)
            store.ensure_monitor_project("shop", quiet_seconds=0)
            wait_until(lambda: counts(store)["judged"] == len(traces), what="every trace judged", timeout=180)
    finally:
        stop(*workers)
    ids = [f"{t:032x}" for t in traces]
    assert store.trace_counts("shop")["traces"] == len(traces) and store.trace_counts("shop")["late"] == 0
    assert counts(store) == {"sampled_out": 0, "no_content": 0, "pending": 0, "judged": len(traces), "failed": 0}
    judged_once_each(store, set(ids), judge_server)
    assert asked(judge_server, ids) == Counter({t: 1 for t in ids})


def test_succeeded_rounds_are_deleted_as_the_next_are_queued(pg_url):
    """A round a minute per rule would grow the queue's tables for ever: the succeeded ones go as the next is
    queued (the outcome is in the decisions); a failed one stays, for whoever looks into it."""
    import asyncio

    from evaluators.monitor.queued import defer_rules
    from evaluators.run import queue
    from procrastinate.jobs import Status

    store = Store(pg_url)
    store.ensure_monitor_project("shop")
    store.add_monitor_rule("shop", "q", ["coherence"], 1.0, {"model": "m", "base_url": "http://127.0.0.1:9/v1"})
    app = queue.app_for(store)

    async def work_one(status: Status) -> None:  # a worker takes the waiting round and ends it so
        async with app.open_async():
            wid = await app.job_manager.register_worker()
            job = await app.job_manager.fetch_job([queue.QUEUE], wid)
            await app.job_manager.finish_job(job, status=status, delete_job=False)

    assert defer_rules(store) == 1
    asyncio.run(work_one(Status.FAILED))
    for _ in range(5):
        assert defer_rules(store) == 1
        asyncio.run(work_one(Status.SUCCEEDED))
    assert defer_rules(store) == 1
    assert jobs(store) == Counter(failed=1, todo=1)
