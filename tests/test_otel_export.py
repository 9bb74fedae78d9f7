"""Scores out to other tools (issue 32, "Out to other tools"): each judged production score as an OpenTelemetry
``gen_ai.evaluation.result`` log event, POSTed as OTLP/HTTP protobuf to a real loopback HTTP server that decodes
the ExportLogsServiceRequest with opentelemetry-proto. Expected values are what the test planted."""
from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

from evaluators.store.schema import Result

pytestmark = pytest.mark.both_stores
T0 = 1_764_000_000 * 10**9
SECRET = "sk-never-sent-0123456789"
# trace i: its coherence score, the judge's reason
PLANTED = [(4.0, "clear and on topic"), (2.0, "rambles"), (5.0, None)]
ROOT, CHILD = "1" * 16, "2" * 16


class Collector:
    """A loopback OTLP/HTTP logs endpoint: keeps each request (headers, decoded body) and answers with the next
    scripted status (200 once the script is done)."""

    def __init__(self, script=()):
        self.script, self.requests = list(script), []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status = owner.script.pop(0) if owner.script else 200
                out = logs_service_pb2.ExportLogsServiceResponse().SerializeToString() if status == 200 else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def records(self) -> list:
        out = []
        for _, _, body in self.requests:
            req = logs_service_pb2.ExportLogsServiceRequest()
            req.ParseFromString(body)
            out += [(rl, sl, rec) for rl in req.resource_logs for sl in rl.scope_logs for rec in sl.log_records]
        return out


@pytest.fixture
def collector():
    made = []

    def make(script=()):
        made.append(Collector(script))
        return made[-1]

    yield make
    for c in made:
        c.close()


def _tid(i: int) -> str:
    return hashlib.md5(f"t{i}".encode()).hexdigest()


def _plant(store, tmp_path) -> None:
    from evaluators import load_dataset

    store.ensure_monitor_project("shop")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(PLANTED) + 1)))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": ["coherence"]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric="coherence", turn=0, status="ok", value=v, reason=why,
                                        outputs={"coherence": v}) for i, (v, why) in enumerate(PLANTED)]
                        + [Result(row_idx=len(PLANTED), metric="coherence", turn=0, status="error", value=None,
                                  error="judge down")])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, {"model": "judge-1"}, key_env="PRODREVIEW_KEY")
    decisions = []
    for i in range(len(PLANTED) + 2):
        start = T0 + i * 60 * 10**9
        # the child span starts first: the event's parent is still the root (the judged trace's own span)
        store.receive_telemetry("shop", [
            {"trace_id": _tid(i), "span_id": CHILD, "parent_span_id": ROOT, "name": "llm", "start_ns": start,
             "end_ns": start + 10**8},
            {"trace_id": _tid(i), "span_id": ROOT, "parent_span_id": "", "name": "agent", "start_ns": start + 1,
             "end_ns": start + 10**9}])
        if i <= len(PLANTED):  # the last planted row's result is an error: not a score, not sent
            decisions.append({"trace_id": _tid(i), "decision": "judged", "run_id": run_id, "row_idx": i})
        else:
            decisions.append({"trace_id": _tid(i), "decision": "sampled_out"})
    store.save_decisions("shop", "quality", 1, decisions)


def _attrs(rec) -> dict:
    out = {}
    for kv in rec.attributes:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


def test_each_score_is_a_gen_ai_evaluation_result_event_under_its_judged_span(store, tmp_path, collector,
                                                                              monkeypatch, capsys):
    from evaluators.cli.main import main

    monkeypatch.setenv("PRODREVIEW_KEY", SECRET)
    monkeypatch.setenv("PRODREVIEW_HEADERS", "x-collector-token=abc%3D1")
    _plant(store, tmp_path)
    c = collector()
    code = main(["monitor", "export-otel", "--project", "shop", "--endpoint", c.url, "--db", store.url,
                 "--headers-env", "PRODREVIEW_HEADERS"])
    assert code == 0, capsys.readouterr().err
    assert "sent 3 scores in 1 requests" in capsys.readouterr().out
    assert len(c.requests) == 1
    path, headers, body = c.requests[0]
    assert path == "/v1/logs" and headers["content-type"] == "application/x-protobuf"
    assert headers["x-collector-token"] == "abc=1"
    assert SECRET.encode() not in body and all(SECRET not in v for v in headers.values())
    got = c.records()
    assert len(got) == 3
    rl, sl, _ = got[0]
    assert {kv.key: kv.value.string_value for kv in rl.resource.attributes} == \
        {"service.name": "evaldash", "evaldash.project": "shop"}
    assert sl.scope.name == "evaldash"
    expected = [("pass", 4.0, "clear and on topic"), ("fail", 2.0, "rambles"), ("pass", 5.0, None)]
    for i, ((_, _, rec), (label, value, why)) in enumerate(zip(got, expected)):
        assert rec.event_name == "gen_ai.evaluation.result"
        assert rec.trace_id.hex() == _tid(i) and rec.span_id.hex() == ROOT
        want = {"gen_ai.evaluation.name": "coherence", "gen_ai.evaluation.score.value": value,
                "gen_ai.evaluation.score.label": label, "evaldash.rule": "quality"}
        if why:
            want["gen_ai.evaluation.explanation"] = why
        assert _attrs(rec) == want


def test_busy_endpoint_is_retried_a_refusing_one_stops_the_export(store, tmp_path, collector):
    from evaluators.core.errors import UsageError
    from evaluators.monitor.otel_export import ExportError, export_otel

    _plant(store, tmp_path)
    waits = []
    busy = collector([503, 429])
    done = export_otel(store, "shop", busy.url, batch=2, backoff=0.25, sleep=waits.append)
    assert done == {"sent": 3, "requests": 2, "rejected": 0}
    assert len(busy.requests) == 4 and waits == [0.25, 0.5]  # the first batch twice refused, then taken
    assert len(busy.records()) == 2 + 2 + 2 + 1  # a refused request's bytes are the same batch again
    refusing = collector([400])
    with pytest.raises(ExportError, match="answered 400"):
        export_otel(store, "shop", refusing.url, batch=2, sleep=waits.append)
    assert len(refusing.requests) == 1  # not retried, and nothing after it sent
    down = collector([503] * 10)
    with pytest.raises(ExportError, match="after 3 tries"):
        export_otel(store, "shop", down.url, retries=2, sleep=lambda s: None)
    assert len(down.requests) == 3
    with pytest.raises(UsageError, match="credentials"):
        export_otel(store, "shop", "http://user:pw@127.0.0.1:1/v1/logs")
    with pytest.raises(UsageError, match="no rule 'nope'"):
        export_otel(store, "shop", busy.url, rule="nope")
