"""Issue 31's done-when: an app made with the ``openai`` client and ``opentelemetry-instrumentation-openai-v2`` (and
one with ``openinference-instrumentation-openai``),
exporting with ``opentelemetry-exporter-otlp-proto-http`` to the receiver (`monitor serve`), calls a loopback model
N times: N traces stored and mapped, every query and response equal to what the app sent and got, in both
content-capture modes (span attributes, SPAN_ONLY; log events at /v1/logs, EVENT_ONLY). All real: the app is a
process (tests/monitor_app.py), the receiver another, the model the tests' OpenAI-compatible server."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from evaluators.store.store import Store
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import JudgeServer
from tests.monitor_procs import ReceiverProcess
from tests.procs import wait_until

# The issue says 500 calls; CI runs 200 a mode (MONITOR_TEST_CALLS=500 runs the count): 500 took the app
# 15.7 s and the mapping 4.7 s more on this 2-core machine under load (13), two modes and two stores' passes each.
# The exporters send 64 spans (or records) a request, so 200 calls are several requests of each kind all the same.
CALLS = int(os.environ.get("MONITOR_TEST_CALLS", "200"))
APP_KEY = "sk-app-key-never-exported"


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", "monitor", *args, "--db", db], cwd=ROOT,
                          capture_output=True, text=True, env=env_for_subprocess(), timeout=120)


@pytest.mark.parametrize("mode", ["SPAN_ONLY", "EVENT_ONLY", "OPENINFERENCE"])
def test_an_instrumented_openai_app_s_calls_are_stored_as_rows_of_what_it_sent_and_got(store_url, tmp_path, mode):
    store = Store(store_url)
    _, token = store.create_ingest_token("shop")
    # held open while the app runs: with EVENT_ONLY a call's content comes in a logs request of its own, after
    # its span's; the quiet period (30 s by default) is what waits for it in production
    store.ensure_monitor_project("shop", quiet_seconds=3600)
    sent = tmp_path / "sent.jsonl"
    with JudgeServer(responder=lambda prompt, request: f"Answer to [{prompt}]") as model, \
            ReceiverProcess(store_url, "--assemble-every", "0.2") as receiver:
        env = env_for_subprocess(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
                                 OTEL_EXPORTER_OTLP_HEADERS=f"Authorization=Bearer%20{token}",  # not a command line
                                 OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
                                 OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=mode,
                                 MONITOR_APP_INSTRUMENTATION="openinference" if mode == "OPENINFERENCE" else "v2",
                                 OTEL_BSP_MAX_EXPORT_BATCH_SIZE="64", OTEL_BLRP_MAX_EXPORT_BATCH_SIZE="64")
        app = subprocess.run([sys.executable, str(ROOT / "tests" / "monitor_app.py"), model.url, str(CALLS),
                              str(sent)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert app.returncode == 0, app.stderr
        assert len(model.calls) == CALLS
        requests = receiver.health()["requests"]
        assert requests >= CALLS // 64 * (2 if mode == "EVENT_ONLY" else 1), requests
        counts = store.trace_counts("shop")  # the app's exporters flushed at its exit, each batch acknowledged
        assert (counts["traces"], counts["open"]) == (CALLS, CALLS), counts
        assert cli("project", "--project", "shop", "--quiet-seconds", "0", db=store_url).returncode == 0
        wait_until(lambda: store.trace_counts("shop")["mapped"] == CALLS, what="every trace mapped", timeout=120)
    status = json.loads(cli("status", "--project", "shop", "--json", db=store_url).stdout)
    assert status == {"project": "shop", "traces": CALLS, "open": 0, "mapped": CALLS, "no_content": 0, "no_root": 0,
                      "late": 0, "spans": CALLS}
    assert cli("export", "--project", "shop", "--out", str(tmp_path / "out"), db=store_url).returncode == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
    app_saw = sorted((c["query"], c["response"]) for c in map(json.loads, sent.read_text(encoding="utf-8").splitlines()))
    assert len(app_saw) == CALLS and app_saw[0][1] == f"Answer to [{app_saw[0][0]}]"
    assert sorted((r["query"], r["response"]) for r in rows) == app_saw
    assert {r["model"] for r in rows} == {"gpt-4o-mini"} and {r["content"] for r in rows} == {True}
    assert all(len(r["trace_id"]) == 32 and r["project"] == "shop" and r["time"].endswith("Z") for r in rows)
    where = {"SPAN_ONLY": "gen_ai.input.messages", "EVENT_ONLY": "gen_ai.client.inference.operation.details",
             "OPENINFERENCE": "llm.input_messages"}[mode]
    assert where in rows[0]["sources"]["query"], rows[0]["sources"]
    with store.engine.connect() as c:  # the app's model key reached neither the receiver nor the store
        for table in ("monitor_spans", "monitor_logs", "monitor_traces"):
            assert c.execute(sa.text(f"SELECT COUNT(*) FROM {table} WHERE CAST(data AS TEXT) LIKE :k"
                                     if table != "monitor_traces" else
                                     f"SELECT COUNT(*) FROM {table} WHERE CAST(fields AS TEXT) LIKE :k"),
                             {"k": f"%{APP_KEY}%"}).scalar() == 0
    assert token not in (tmp_path / "out" / "traces.jsonl").read_text(encoding="utf-8")
