"""Faults at the judge: every call ends as a score or an explained error, nothing is lost or judged twice.

Real parts only: the loopback OpenAI-compatible server (tests/judge_server.py) injects the faults,
SQLite holds the results, the CLI runs as a subprocess and is killed with SIGKILL.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import sqlalchemy as sa

from evaluators import open_results, prepare_run
from evaluators.data.loading import load_dataset
from evaluators.judge.config import JudgeConfig
from evaluators.run.runner import Runner
from evaluators.run.planning import plan_tasks
from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, env_for_home, env_for_subprocess, home_url
from tests.judge_server import Action, Faults, JudgeServer, JudgeServerProcess, expected_score, prompt_text
from tests.procs import stored_results, wait_until

FAST = dict(timeout=2.0, max_retries=3, backoff_base=0.005, backoff_max=0.02)


def planned_keys(store: Store, rid: str) -> set[tuple[int, str, int]]:
    """Every (row, metric, turn) the run's spec asks for, planned from scratch (nothing done)."""
    r = Runner(store, rid)
    tasks, skipped = plan_tasks(r.dataset, r.spec, set())
    return {(t.row, t.spec.name, t.turn) for t in tasks} | {(s.row_idx, s.metric, s.turn) for s in skipped}


def test_poison_replies_and_garbage_headers_end_as_errors_on_their_rows(judge_server, store):
    """A reply the parser or client chokes on used to escape the runner: the row was never written
    and the run still said completed."""
    ds = load_dataset(SINGLE)
    resp = [r["response"] for r in ds.records]
    judge_server.on_prompt(resp[1], Action(content='{"reason": "poison", "score": Infinity}'))
    judge_server.on_prompt(resp[2], Action(content='{"reason": "poison", "score": 1e999}'))
    judge_server.on_prompt(resp[3], Action(raw_body=b'{"choices": [{"message": '))  # body cut short
    judge_server.on_prompt(resp[4], Action(status=429, headers={"Retry-After": "soon-ish, maybe"}))
    judge_server.on_prompt(resp[5], *[Action(status=429, headers={"Retry-After": "Thu, 99 Foo 20xx"})] * 9)
    cfg = JudgeConfig(model="m", provider="compatible", base_url=judge_server.url, **FAST)
    rid = prepare_run(store, SINGLE, ["fluency"], judge=cfg)
    assert Runner(store, rid).run() == "completed"
    stored = {r.row_idx: r for r in store.load_results(rid)}
    assert set(stored) == set(range(31)), "a row was lost"
    assert planned_keys(store, rid) == store.result_keys(rid)
    for i in (1, 2, 3):
        assert stored[i].status == "error" and stored[i].error, i
    assert stored[1].raw == '{"reason": "poison", "score": Infinity}'  # the raw reply is kept for the reader
    assert "unreadable reply" in stored[3].error
    # an unreadable Retry-After is ignored (backoff instead), so the retry goes through
    asked4 = [prompt_text(c) for c in judge_server.calls if resp[4] in prompt_text(c)]
    assert len(asked4) == 2 and stored[4].status == "ok" and stored[4].value == expected_score(asked4[0])
    assert stored[5].status == "error" and "HTTP 429" in stored[5].error  # retries spent: said so
    ok = [r for r in stored.values() if r.status == "ok"]
    assert len(ok) == 31 - 4
    run = store.get_run(rid)
    assert run["tasks_done"] + run["tasks_errored"] == 31 and run["tasks_errored"] == 4


def test_a_runner_that_loses_a_task_cannot_say_completed(judge_server, store):
    """The last guard: had a path ever dropped a result (as gather() once swallowed them), the run
    would end failed, and the lost task is recorded as an error, not left pending."""

    class Leaky(Runner):
        dropped = False

        async def _judge_one(self, *item):
            if not self.dropped:  # drops one task on the floor
                self.dropped = True
                return
            await super()._judge_one(*item)

    cfg = JudgeConfig(model="m", provider="compatible", base_url=judge_server.url, **FAST)
    rid = prepare_run(store, SINGLE, ["coherence"], judge=cfg)
    assert Leaky(store, rid).run() == "failed"
    run = store.get_run(rid)
    assert "1 task(s) ended without a result" in run["error"]
    assert store.result_keys(rid) == planned_keys(store, rid)


def test_every_row_failing_ends_the_run_failed_with_the_first_error_and_url(tmp_path, new_store_url):
    with JudgeServer(responder=lambda prompt, req: "I cannot grade this.") as server:
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, **FAST)
        store = Store(new_store_url("e"))
        rid = prepare_run(store, SINGLE, ["coherence"], judge=cfg)
        assert Runner(store, rid).run() == "failed"
        run = store.get_run(rid)
        assert run["status"] == "failed" and server.url in run["error"]
        assert "every judged row failed (31)" in run["error"] and "no JSON object" in run["error"]
        # the CLI: exit 5, the same message on one line, and the rows are still written out
        p = subprocess.run([sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "coherence,bleu",
                            "--out", tmp_path / "o", "--judge-base-url", server.url, "--retries", "0"],
                           cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 5, p.stderr
    line = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "every judged row failed" in line[0] and server.url in line[0]
    assert len((tmp_path / "o" / "rows.jsonl").read_text().splitlines()) == 31


def test_some_rows_failing_is_completed_not_failed(judge_server, store):
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[0]["response"], Action(content="no verdict"))
    cfg = JudgeConfig(model="m", provider="compatible", base_url=judge_server.url, **FAST)
    rid = prepare_run(store, SINGLE, ["coherence"], judge=cfg)
    assert Runner(store, rid).run() == "completed"
    assert store.get_run(rid)["error"] is None


def _rows(n: int) -> list[dict]:
    words = "river stone lamp cedar orbit violet harbor ember quartz meadow signal falcon".split()
    out = []
    for i in range(n):
        w = [words[(i * k + k) % len(words)] for k in range(1, 6)]
        out.append({"id": f"r{i}", "query": f"What links {w[0]} and {w[1]} (case {i})?",
                    "response": f"Both {w[0]} and {w[1]} relate to {w[2]}; see note {i}.",
                    "context": f"Note {i}: {w[0]}, {w[1]} and {w[2]} appear with {w[3]} near the {w[4]}."})
    return out


FAULTS = Faults(rate_429_retry_after=0.10, rate_429=0.10, rate_500=0.05, rate_hang=0.02, rate_malformed=0.05,
                rate_poison=0.01, hang=1.0, retry_after="0.01", seed=9)
METRICS = ["coherence", "fluency", "groundedness"]


def test_fault_suite_nothing_lost_and_retry_matches_a_fault_free_run(tmp_path, new_store_url):
    """1,000 rows x 3 judge metrics against 20% 429 (half with Retry-After), 5% 500, 2% hangs past the
    client timeout, 5% malformed and 1% poison replies. The server runs in its own process, as a judge does."""
    data = _rows(1000)
    cfg = dict(model="m", provider="compatible", timeout=0.5, max_retries=4, backoff_base=0.005,
               backoff_max=0.02, concurrency=32)
    with JudgeServerProcess(faults=FAULTS) as server:
        store = Store(new_store_url("faults"))
        rid = prepare_run(store, data, METRICS, judge=JudgeConfig(base_url=server.url, **cfg))
        assert Runner(store, rid).run() == "completed"
        stats = server.stats()
        for kind in ("429_retry_after", "429", "500", "hang", "malformed", "poison"):
            assert stats["served"].get(kind, 0) > 0, stats  # each fault really happened
        # nothing lost, nothing duplicated: exactly one stored result per planned task
        results = store.load_results(rid)
        assert len(results) == 3000
        assert {(r.row_idx, r.metric, r.turn) for r in results} == planned_keys(store, rid)
        errored = [r for r in results if r.status == "error"]
        assert errored and all(r.error for r in errored)  # each error says why
        assert len(errored) < 0.15 * 3000
        run = store.get_run(rid)
        assert run["tasks_done"] + run["tasks_errored"] == 3000 and run["tasks_errored"] == len(errored)
        # every call the server saw is counted, the judge check included (and calls that timed out
        # before a loaded server accepted them, which it never saw)
        assert run["judge_calls"] >= stats["calls"] + stats["probes"]
        # "retry failed rows", with the faults gone
        server.set_faults(None)
        failed_rows = {r.row_idx for r in errored}
        store.clear_errors(rid)
        retry = Runner(store, rid, rows=failed_rows)
        assert retry.run() == "completed"
        assert retry.progress.total == len(errored)  # only the errored tasks were asked again
        assert server.stats()["calls"] - stats["calls"] >= len(errored)
        faulted = open_results(store, rid)
    with JudgeServerProcess() as clean:
        store2 = Store(new_store_url("clean"))
        rid2 = prepare_run(store2, data, METRICS, judge=JudgeConfig(base_url=clean.url, **cfg))
        assert Runner(store2, rid2).run() == "completed"
        reference = open_results(store2, rid2)
    assert faulted.metrics() == reference.metrics()
    assert faulted.metrics()["groundedness.scored_rows"] == 1000
    assert faulted.rows() == reference.rows()


def test_rate_limited_judge_token_bucket(tmp_path, new_store_url):
    """A server that allows 200 calls/s (burst 10) answers 429 + Retry-After beyond; all rows complete."""
    with JudgeServer(rate_limit=(200.0, 10.0)) as server:
        store = Store(new_store_url("r"))
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, concurrency=32, timeout=2,
                          max_retries=50, backoff_base=0.005, backoff_max=0.02)
        rid = prepare_run(store, _rows(150), ["fluency"], judge=cfg)
        assert Runner(store, rid).run() == "completed"
        assert server.served["rate_limited"] > 0
        assert open_results(store, rid).metrics()["fluency.scored_rows"] == 150


# ---------------------------------------------------------------------------- SIGKILL, then resume
def _whole_or_absent(out) -> None:
    for name in ("rows.jsonl", "metrics.json"):
        f = out / name
        if f.exists():
            text = f.read_text()
            if name == "rows.jsonl":
                assert all(json.loads(line) for line in text.splitlines())
            else:
                json.loads(text)


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    metrics = "coherence,fluency,f1_score"
    with JudgeServer() as server:
        server.hold_calls(after=15)  # fifteen calls answered, the next three held: the kill lands mid-run
        out, db = tmp_path / "out", home_url(tmp_path / "evalhome")  # the CLI's default store
        cmd = [sys.executable, "-m", "evaluators", "run", str(SINGLE), "--metrics", metrics, "--out", str(out),
               "--judge-base-url", server.url, "--concurrency", "3", "--quiet"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for_subprocess(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            wait_until(lambda: stored_results(db, "metric != 'f1_score'") == 15 and server.held == 3,
                       what="fifteen judged results stored and three calls in flight")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        first = [prompt_text(c) for c in server.calls]
        assert stored_results(db, "metric != 'f1_score'") == 15  # killed part way: what was stored stays, the held calls left nothing
        _whole_or_absent(out)
        engine = sa.create_engine(db)  # read in plain SQL, not through the code under test
        with engine.connect() as c:
            kept = {(r, m) for r, m in c.execute(sa.text("select row_idx, metric from results where status = 'ok' "
                                                          "and metric != 'f1_score'"))}
            assert c.execute(sa.text("select count(*) from results where status = 'ok' and value is null")).scalar() == 0
        engine.dispose()
        server.release()
        p = subprocess.run(cmd, cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        second = [prompt_text(c) for c in server.calls[len(first):]]
        # the second process asked only for what was not stored (one judge check aside, kept apart)
        assert len(second) == 62 - len(kept)
        assert len(set(second)) == len(second)
        twice = set(first) & set(second)
        # judged twice: only the three calls in flight at the kill (every answered one was stored first)
        assert len(twice) == 3
        resumed_rows = (out / "rows.jsonl").read_text()
        resumed_metrics = json.loads((out / "metrics.json").read_text())
        # the same command, uninterrupted, into a fresh store
        env = env_for_home(tmp_path / "home2")
        p = subprocess.run([*cmd[:8], str(tmp_path / "out2"), *cmd[9:]], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    assert resumed_rows == (tmp_path / "out2" / "rows.jsonl").read_text()
    assert resumed_metrics == json.loads((tmp_path / "out2" / "metrics.json").read_text())
    assert resumed_metrics["coherence.scored_rows"] == 31 and resumed_metrics["fluency.errored_rows"] == 0


@pytest.mark.parametrize("metric", ["coherence"])
def test_probe_counts_in_judge_calls(judge_server, store, metric):
    cfg = JudgeConfig(model="m", provider="compatible", base_url=judge_server.url, **FAST)
    rid = prepare_run(store, SINGLE, [metric], judge=cfg)
    Runner(store, rid).run()
    assert len(judge_server.probes) == 1
    assert store.get_run(rid)["judge_calls"] == 31 + 1
    # a re-run answered wholly by the cache needs no judge, so it makes no check either
    rid2 = prepare_run(store, SINGLE, [metric], judge=cfg)
    Runner(store, rid2).run()
    assert len(judge_server.probes) == 1 and store.get_run(rid2)["judge_calls"] == 0
