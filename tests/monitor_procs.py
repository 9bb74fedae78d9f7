"""The monitoring tests' parts: a receiver process (``python -m evaluators monitor serve``) on a free port, and OTLP
requests built with opentelemetry-proto's own messages and sent over plain HTTP (http.client)."""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.conftest import ROOT, env_for_subprocess

PROTOBUF = "application/x-protobuf"


class ReceiverProcess:
    """``with ReceiverProcess(url, *args) as r: r.post(...)``: the CLI's receiver on any free port."""

    def __init__(self, db_url: str, *args: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "evaluators", "monitor", "serve", "--port", "0",
                                      "--db", db_url, *args], cwd=ROOT, env=env or env_for_subprocess(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # printed once the socket listens
        if "receiving OTLP/HTTP on http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"the receiver did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        self.stderr: list[str] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def post(self, path: str, body: bytes, token: str | None, content_type: str = PROTOBUF,
             headers: dict | None = None, timeout: float = 60) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one POST."""
        h = {"Content-Type": content_type, **(headers or {})}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def health(self) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", "/health")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def kv(key: str, value) -> KeyValue:
    v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=str(value))
    return KeyValue(key=key, value=v)


def pb_span(trace: int, span: int, parent: int = 0, name: str = "chat m", attributes: dict | None = None,
            start: int = 1_700_000_000_000_000_000, end: int | None = None) -> Span:
    return Span(trace_id=trace.to_bytes(16, "big"), span_id=span.to_bytes(8, "big"),
                parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=name, kind=3,
                start_time_unix_nano=start, end_time_unix_nano=end if end is not None else start + 1_000_000,
                attributes=[kv(k, v) for k, v in (attributes or {}).items()])


def traces_request(spans: list[Span], service: str = "shop") -> bytes:
    """An ExportTraceServiceRequest (protobuf) of ``spans`` under one resource and scope."""
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[kv("service.name", service)]),
        scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()


def traces_request_json(spans: list[Span], service: str = "shop") -> bytes:
    """The same request as OTLP JSON: protobuf's JSON mapping with the ids in hex, int64 as strings."""
    import base64

    from google.protobuf import json_format

    message = ExportTraceServiceRequest()
    message.ParseFromString(traces_request(spans, service))
    doc = json_format.MessageToDict(message, use_integers_for_enums=True)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in sp:
                        sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(doc).encode()


def trace_response(body: bytes) -> ExportTraceServiceResponse:
    r = ExportTraceServiceResponse()
    r.ParseFromString(body)
    return r
