"""Judging through the Batch API (``--batch``) against the loopback server's /v1/files and /v1/batches: the
same values as direct calls with no chat-completions call, resumed polling after a kill (no batch submitted
twice), and expired batches, error files and broken output lines ending with every row scored or explained."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from evaluators.api import prepare_run
from evaluators.judge.batch import custom_id, parse_custom_id, split_requests
from evaluators.judge.config import JudgeConfig
from evaluators.read.cost import run_cost
from evaluators.run.runner import Runner
from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, env_for_subprocess
from tests.procs import wait_until
from tests.test_cost import PRICE, by_hand


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setenv("EVAL_BATCH_POLL", "0.02")


def judge_at(server, **kw) -> JudgeConfig:
    return JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=server.url, max_retries=1,
                       backoff_base=0.01, backoff_max=0.02, **kw)


def values(store, rid) -> dict:
    return {(r.row_idx, r.metric): r.value for r in store.load_results(rid)}


def test_custom_ids_and_splitting_at_the_limits():
    assert parse_custom_id(custom_id(12, "relevance_turn", 3, 1)) == (12, "relevance_turn", 3, 1)
    lines = [b"x" * 9] * 7  # 10 bytes each with its newline
    assert [len(p) for p in split_requests(lines, max_requests=3, max_bytes=1000)] == [3, 3, 1]
    assert [len(p) for p in split_requests(lines, max_requests=100, max_bytes=25)] == [2, 2, 2, 1]
    with pytest.raises(ValueError, match="over the 5-byte limit"):
        split_requests(lines, max_bytes=5)


def test_batch_gives_the_direct_values_with_no_chat_call(tmp_path, judge_server, new_store_url):
    direct = Store(new_store_url("direct"))
    rid = prepare_run(direct, SINGLE, ["coherence", "fluency"], judge_at(judge_server))
    assert Runner(direct, rid).run() == "completed"
    calls_before = len(judge_server.requests)
    batched = Store(new_store_url("batch"))
    bid = prepare_run(batched, SINGLE, ["coherence", "fluency"], judge_at(judge_server),
                      cost={"batch": True, "prices": {"gpt-4o-mini": PRICE}})
    assert Runner(batched, bid).run() == "completed"
    assert len(judge_server.requests) == calls_before  # not one chat completion (nor a judge check)
    assert len(judge_server.batch_api.created) == 1 and judge_server.batch_api.requests == 62
    got = values(batched, bid)
    assert got == values(direct, rid) and len(got) == 62
    cost = run_cost(batched, bid)
    assert cost["cost.batch_calls"] == 62 and cost["cost.batch"] is True
    assert cost["cost.usd"] == pytest.approx(by_hand(judge_server.usages[-62:], batch=True), abs=1e-6)
    b = batched.run_batches(bid)[0]
    assert (b["status"], b["total"], b["completed"]) == ("collected", 62, 62)


def test_expired_batch_error_file_and_broken_line_end_scored_or_explained(store, judge_server):
    api = judge_server.batch_api
    api.expire_after, api.malformed_lines = 20, 1  # the first batch: 20 done (one line broken), 11 expired
    api.error_on = "The motor is covered for 2 years."  # this row's request is refused in every batch
    rid = prepare_run(store, SINGLE, ["coherence"], judge_at(judge_server), cost={"batch": True})
    assert Runner(store, rid).run() == "completed"
    results = store.load_results(rid)
    assert len(results) == 31 and len(judge_server.requests) == 0
    bad = [r for r in results if r.status != "ok"]
    assert len(bad) == 1 and "batch request failed (HTTP 400): invalid_value: scripted invalid request" in bad[0].error
    assert len(api.created) == 3  # the first; the expired, broken and refused again; the refused a last time
    rounds = [b["total"] for b in store.run_batches(rid)]
    assert rounds[0] == 31 and rounds[2] == 1 and 11 + 1 <= rounds[1] <= 11 + 2


def test_direct_retry_of_what_a_batch_left(store, judge_server):
    judge_server.batch_api.expire_after = 25
    rid = prepare_run(store, SINGLE, ["coherence"], judge_at(judge_server),
                      cost={"batch": True, "batch_direct_retry": True})
    assert Runner(store, rid).run() == "completed"
    assert len(judge_server.calls) == 6 and len(judge_server.batch_api.created) == 1
    assert all(r.status == "ok" for r in store.load_results(rid))


def test_killed_cli_resumes_polling_the_same_batch(tmp_path, judge_server, store_url):
    judge_server.batch_api.hold()  # the batch stays in progress until released
    out, db = tmp_path / "out", store_url
    cmd = [sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "coherence", "--out", out, "--db",
           db, "--judge-base-url", judge_server.url, "--judge-model", "gpt-4o-mini", "--batch",
           "--price", "2,0.5,8"]
    env = env_for_subprocess(EVAL_BATCH_POLL="0.05")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = Store(db)
    wait_until(lambda: any(b["batch_id"] for r in store.list_runs()
                                             for b in store.run_batches(r["id"])), timeout=60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    judge_server.batch_api.release()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert len(judge_server.batch_api.created) == 1 and len(judge_server.requests) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["coherence.coherence"] is not None and metrics["cost.batch_calls"] == 31
    assert "through the Batch API" in p.stdout


def test_azure_global_batch_paths(store, judge_server):
    """Azure OpenAI: /openai/files and /openai/batches with api-version, the deployment as each request's model."""
    judge = JudgeConfig(model="my-deployment", provider="azure", base_url=judge_server.root + "/openai",
                        max_retries=0)
    rid = prepare_run(store, SINGLE, ["fluency"], judge, cost={"batch": True})
    assert Runner(store, rid, api_key="azure-key").run() == "completed"
    api = judge_server.batch_api
    b = api.batches[api.created[0]]
    assert b["endpoint"] == "/chat/completions" and len(judge_server.requests) == 0
    first = json.loads(api.files[b["input_file_id"]].splitlines()[0])
    assert first["url"] == "/chat/completions" and first["body"]["model"] == "my-deployment"


def test_a_refused_batch_api_fails_the_run_in_one_line(store, judge_server):
    judge_server.require_key = "right"
    rid = prepare_run(store, SINGLE, ["coherence"], judge_at(judge_server), cost={"batch": True})
    with pytest.raises(Exception, match=r"the judge's Batch API at .* \(model 'gpt-4o-mini'\): .*HTTP 401"):
        Runner(store, rid, api_key="wrong").run()
    assert store.get_run(rid)["status"] == "failed" and not judge_server.batch_api.created


def test_repeated_judgments_go_in_the_batch_each_with_its_own_id(tmp_path, judge_server, new_store_url):
    import random

    rng = random.Random(7)  # the scripted judge answers each ask of a prompt anew: repeats can differ
    judge_server.responder = lambda prompt, req: json.dumps({"reason": "r", "score": rng.randint(1, 5)})
    batched = Store(new_store_url("batch"))
    rid = prepare_run(batched, SINGLE, ["fluency"], judge_at(judge_server), repeat=3, cost={"batch": True})
    assert Runner(batched, rid).run() == "completed"
    assert len(judge_server.requests) == 0 and judge_server.batch_api.requests == 93
    b = judge_server.batch_api.batches[judge_server.batch_api.created[0]]
    ids = [json.loads(x)["custom_id"] for x in judge_server.batch_api.files[b["input_file_id"]].splitlines()]
    assert {parse_custom_id(i)[3] for i in ids} == {0, 1, 2} and len(set(ids)) == 93
    assert all(r.status == "ok" for r in batched.load_results(rid)) and len(batched.load_results(rid)) == 31
    scores: dict[int, list[int]] = {}
    for line in judge_server.batch_api.files[b["output_file_id"]].splitlines():
        item = json.loads(line)
        content = item["response"]["body"]["choices"][0]["message"]["content"]
        scores.setdefault(parse_custom_id(item["custom_id"])[0], []).append(json.loads(content)["score"])
    got = {r.row_idx: r.value for r in batched.load_results(rid)}
    assert got == pytest.approx({row: sum(v) / 3 for row, v in scores.items()})  # the mean of its three judgments


def test_a_jury_batches_each_judges_requests_at_its_own_batch_api(tmp_path, monkeypatch, new_store_url):
    """``--batch`` with a jury: each judgment goes to its own juror's Batch API (ann's 31 to ann's server, bea's
    31 to bea's), no chat completion anywhere, and the rows' values equal the same jury's direct run."""
    from tests.judge_server import JudgeServer
    from tests.test_repeat import _scripted

    with JudgeServer(responder=_scripted(0)) as a, JudgeServer(responder=_scripted(-2)) as b:
        judges = tmp_path / "judges.toml"
        judges.write_text("".join(f'[{n}]\nbase_url = "{s.url}"\nmodel = "m-{n}"\n' for n, s in (("ann", a), ("bea", b))))
        monkeypatch.setenv("EVAL_JUDGES", str(judges))

        def run(out, *extra):
            p = subprocess.run([sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "coherence", "--out",
                                out, "--db", new_store_url(out.name), "--judge", "ann", "--judge", "bea", "--quiet",
                                *extra], cwd=ROOT, env=env_for_subprocess(EVAL_BATCH_POLL="0.02"), capture_output=True,
                               text=True, timeout=180)
            assert p.returncode == 0, p.stderr
            return [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]

        direct = run(tmp_path / "direct")
        asked = (len(a.requests), len(b.requests))
        batched = run(tmp_path / "batched", "--batch")
        assert (len(a.requests), len(b.requests)) == asked  # not one chat completion more, nor a judge check
        assert a.batch_api.requests == b.batch_api.requests == 31
        models = {json.loads(x)["body"]["model"] for s in (a, b) for f in s.batch_api.files.values()
                  for x in f.splitlines() if b'"custom_id"' in x and b'"body"' in x and b'"url"' in x}
        assert models == {"m-ann", "m-bea"}
    k = "outputs.coherence.coherence"
    assert [r[k] for r in batched] == [r[k] for r in direct] and all(r[k] is not None for r in batched)
