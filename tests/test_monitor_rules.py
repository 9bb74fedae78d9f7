"""Rules judging production traces (`monitor rule add` / `rule run`), through the engine against the loopback
judge: a rule at 0.2 judges a count of traces inside the binomial 99.9% bounds, a second rule at 0.2 the same
traces, one at 0.4 a superset; every trace gets a decision per rule; every judged value is the one the judge
planted for that trace's prompt."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa
from scipy.stats import binom

from evaluators.store.store import Store
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import expected_score, prompt_text

N, NO_CONTENT = 500, 20


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", "monitor", *args, "--db", db], cwd=ROOT,
                          capture_output=True, text=True, env=env_for_subprocess(), timeout=300)


def test_rules_sample_the_same_traces_nest_by_rate_and_store_the_judges_values(store_url, judge_server, tmp_path):
    store = Store(store_url)
    store.ensure_monitor_project("shop")
    ids = [hashlib.md5(f"trace {i}".encode()).hexdigest() for i in range(N)]  # 32 hex, as random ids are
    for i, tid in enumerate(ids):
        span = {"trace_id": tid, "span_id": f"{i + 1:016x}", "parent_span_id": "", "name": "chat", "start_ns": i + 1,
                "end_ns": i + 2, "attributes": {}}
        store.receive_telemetry("shop", [span])
        content = i >= NO_CONTENT
        fields = {"query": f"question of {tid}", "response": f"answer of {tid}"} if content else {}
        assert store.save_mapped_trace("shop", tid, 1, fields=fields, sources={}, content=content, hint="",
                                       conversation_key=None, completeness="complete")
    for name, model, rate in (("a", "judge-a", "0.2"), ("b", "judge-b", "0.2"), ("wide", "judge-a", "0.4")):
        p = cli("rule", "add", "--project", "shop", "--name", name, "--metrics", "coherence", "--sample-rate", rate,
                "--judge-base-url", judge_server.url, "--judge-model", model, db=store_url)
        assert p.returncode == 0 and p.stdout.strip().endswith("version 1"), p.stderr
    p = cli("rule", "run", "--project", "shop", db=store_url)  # the traces were mapped before the rules: none
    assert p.returncode == 0 and store.decisions("shop", "a", 1) == {}, p.stderr
    p = cli("rule", "run", "--project", "shop", "--since", "1970-01-01", db=store_url)  # a backfill takes them
    assert p.returncode == 0, p.stderr

    decided = {name: store.decisions("shop", name, 1) for name in ("a", "b", "wide")}
    judged = {name: {t for t, d in ds.items() if d["decision"] == "judged"} for name, ds in decided.items()}
    assert all(len(ds) == N for ds in decided.values())  # a decision for every trace and rule
    n = N - NO_CONTENT
    low, high = binom.ppf(0.0005, n, 0.2), binom.isf(0.0005, n, 0.2)
    assert low <= len(judged["a"]) <= high, (low, len(judged["a"]), high)
    assert judged["b"] == judged["a"]  # the same traces, so their scores compare row by row
    assert judged["wide"] > judged["a"] and 2 * low <= len(judged["wide"]) <= binom.isf(0.0005, n, 0.4)
    silent = set(ids[:NO_CONTENT])
    for ds in decided.values():
        assert {ds[t]["decision"] for t in silent} <= {"no_content", "sampled_out"}
        assert {d["decision"] for d in ds.values()} <= {"judged", "sampled_out", "no_content"}
    assert sum(d["decision"] == "no_content" for d in decided["wide"].values()) >= \
        sum(d["decision"] == "no_content" for d in decided["a"].values())

    planted = {}  # (judge model, trace) -> the score the judge gave that prompt
    for call in judge_server.calls:
        prompt = prompt_text(call)
        tid = next(t for t in ids if f"answer of {t}" in prompt)
        planted[(call["model"], tid)] = expected_score(prompt)
    with store.engine.connect() as c:
        for name, model in (("a", "judge-a"), ("b", "judge-b"), ("wide", "judge-a")):
            for tid in judged[name]:
                d = decided[name][tid]
                value = c.execute(sa.text("SELECT value FROM results WHERE run_id = :r AND row_idx = :i AND metric = "
                                          "'coherence'"), {"r": d["run_id"], "i": d["row_idx"]}).scalar()
                assert value == planted[(model, tid)], (name, tid)
    # judge-a was asked each trace once: "wide" took a's verdicts from the cache
    assert sum(m == "judge-a" for m, _ in planted) == len(judged["wide"])
    assert cli("export", "--project", "shop", "--out", str(tmp_path), db=store_url).returncode == 0
    scores = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(scores) == 3 * N
    for line in scores:
        d = decided[line["rule"]][line["trace_id"]]
        assert (line["rule_version"], line["decision"]) == (1, d["decision"])
        if d["decision"] == "judged":
            model = "judge-b" if line["rule"] == "b" else "judge-a"
            assert line["outputs.coherence.coherence"] == planted[(model, line["trace_id"])]
        else:
            assert not any(k.startswith("outputs.") for k in line)
    status = json.loads(cli("status", "--project", "shop", "--json", db=store_url).stdout)
    assert status["rules"]["a"] == {"sampled_out": sum(d["decision"] == "sampled_out" for d in decided["a"].values()),
                                    "no_content": sum(d["decision"] == "no_content" for d in decided["a"].values()),
                                    "pending": 0, "judged": len(judged["a"]), "failed": 0, "filtered_out": 0,
                                    "over_hourly_cap": 0, "over_budget": 0}


@pytest.mark.sqlite_only("on PostgreSQL the receiver queues the rules' rounds for the queue's workers instead "
                         "(tests/test_monitor_queue.py)")
def test_a_receiver_started_with_judge_every_judges_a_trace_it_received(store_url, judge_server):
    """`monitor serve --judge-every S` starts the rules' process beside the receiver (SQLite's way; a team runs
    `monitor rule run --every S` apart): a trace sent to it is mapped, decided and judged, with the judge's value."""
    from tests.monitor_procs import ReceiverProcess, pb_span, traces_request
    from tests.procs import wait_until

    store = Store(store_url)
    _, token = store.create_ingest_token("shop")
    store.ensure_monitor_project("shop", quiet_seconds=0)
    assert cli("rule", "add", "--project", "shop", "--name", "all", "--metrics", "coherence", "--judge-base-url",
               judge_server.url, db=store_url).returncode == 0
    said = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is 2 + 2?"}]}])
    got = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "It is 4."}]}])
    span = pb_span(42, 1, name="chat gpt-4o", attributes={"gen_ai.operation.name": "chat",
                                                          "gen_ai.input.messages": said, "gen_ai.output.messages": got})
    with ReceiverProcess(store_url, "--assemble-every", "0.2", "--judge-every", "0.5") as r:
        assert r.post("/v1/traces", traces_request([span]), token)[0] == 200
        wait_until(lambda: store.decisions("shop", "all", 1).get(f"{42:032x}", {}).get("decision") == "judged",
                   what="the trace judged", timeout=120)
        with open(f"/proc/{r.proc.pid}/task/{r.proc.pid}/children") as f:
            [child] = f.read().split()
    # the receiver ended by TERM (uvicorn raises it again after its shutdown): its judging process ends too
    wait_until(lambda: not os.path.exists(f"/proc/{child}"), what="the judging process ended", timeout=60)
    d = store.decisions("shop", "all", 1)[f"{42:032x}"]
    [call] = judge_server.calls
    assert "What is 2 + 2?" in prompt_text(call) and "It is 4." in prompt_text(call)
    with store.engine.connect() as c:
        value = c.execute(sa.text("SELECT value FROM results WHERE run_id = :r AND row_idx = :i"),
                          {"r": d["run_id"], "i": d["row_idx"]}).scalar()
    assert value == expected_score(prompt_text(call))
