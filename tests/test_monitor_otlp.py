"""OTLP bodies read into plain spans and log records (evaluators/monitor/otlp.py).

The telemetry is made by the real OpenTelemetry SDK and encoded by the OTLP exporters' own encoder
(tests/otel_capture.py), as protobuf and as OTLP JSON (hex ids, int64 as strings); the expected values
are what the test gave the SDK. Hostile bodies are built from those real requests, changed.
"""
from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.trace import SpanKind, Status, StatusCode

from evaluators.monitor import otlp
from evaluators.monitor.otlp import OtlpError, decode_logs, decode_traces, encode_response
from tests.otel_capture import JSON, PROTOBUF, Capture, encode

pytestmark = pytest.mark.no_store

BIG = 2 ** 53 + 1  # an int64 a JSON number as a double would round: OTLP JSON sends it as a string


def _two_spans() -> tuple[Capture, dict]:
    """A root and a child span made by the SDK; returns what they were given."""
    cap = Capture(service="shop", **{"service.version": "4.1"})
    tracer = cap.tracer_provider.get_tracer("shop.tracer", "0.3")
    with tracer.start_as_current_span("handle", kind=SpanKind.SERVER, start_time=1_000, end_on_exit=False) as root:
        root.set_attributes({"big": BIG, "ratio": 0.25, "ok": True, "tags": ["a", "b"], "text": "héllo ✓"})
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, start_time=2_000,
                                          end_on_exit=False) as child:
            child.add_event("gen_ai.choice", {"index": 0, "scores": [1.5, 2.5]}, timestamp=2_500)
            child.set_status(Status(StatusCode.ERROR, "model refused"))
            child.end(end_time=3_000)
        root.end(end_time=4_000)
    ctx_root, ctx_child = root.get_span_context(), child.get_span_context()
    return cap, {"trace_id": f"{ctx_root.trace_id:032x}", "root": f"{ctx_root.span_id:016x}",
                 "child": f"{ctx_child.span_id:016x}"}


def test_sdk_spans_read_alike_from_protobuf_and_json():
    cap, ids = _two_spans()
    from_pb, refused_pb = decode_traces(cap.traces(PROTOBUF), PROTOBUF)
    json_body = cap.traces(JSON)
    assert f'"traceId": "{ids["trace_id"]}"' in json_body.decode()  # the body really is OTLP JSON: hex ids,
    assert f'"intValue": "{BIG}"' in json_body.decode()  # int64 as a string
    from_json, refused_json = decode_traces(json_body, "application/json; charset=utf-8")
    assert refused_pb == refused_json == []
    assert from_pb == from_json
    by_name = {s["name"]: s for s in from_pb}
    root, child = by_name["handle"], by_name["chat gpt-4o"]
    resource = {k: v for k, v in root["resource"].items() if k.startswith("service.") and k != "service.instance.id"}
    assert resource == {"service.name": "shop", "service.version": "4.1"}
    assert root == {
        "trace_id": ids["trace_id"], "span_id": ids["root"], "parent_span_id": "", "name": "handle",
        "kind": 2, "start_ns": 1_000, "end_ns": 4_000, "status_code": 0, "status_message": "",
        "attributes": {"big": BIG, "ratio": 0.25, "ok": True, "tags": ["a", "b"], "text": "héllo ✓"},
        "events": [], "resource": root["resource"], "scope": {"name": "shop.tracer", "version": "0.3"}}
    assert child["span_id"] == ids["child"] and child["parent_span_id"] == ids["root"]
    assert (child["kind"], child["start_ns"], child["end_ns"]) == (3, 2_000, 3_000)
    assert (child["status_code"], child["status_message"]) == (2, "model refused")
    assert child["events"] == [{"name": "gen_ai.choice", "time_ns": 2_500, "attributes": {"index": 0, "scores": [1.5, 2.5]}}]
    json.dumps(from_pb, allow_nan=False)  # plain, JSON-serialisable


def test_sdk_log_records_read_alike_from_protobuf_and_json():
    cap = Capture(service="shop")
    tracer = cap.tracer_provider.get_tracer("t")
    logger = cap.logger_provider.get_logger("opentelemetry.instrumentation.openai_v2", "2.4b0")
    with tracer.start_as_current_span("chat") as span:
        logger.emit(LogRecord(timestamp=7_000, event_name="gen_ai.user.message", severity_number=SeverityNumber.INFO,
                              body={"content": "What is OTLP?", "parts": [{"type": "text"}], "raw": b"\x01\xff"},
                              attributes={"gen_ai.system": "openai"}))
    # an older emitter names the event only in its attributes, and has no trace context
    logger.emit(LogRecord(timestamp=8_000, body="plain line", attributes={"event.name": "gen_ai.choice"}))
    ctx = span.get_span_context()
    from_pb, refused = decode_logs(cap.log_records(PROTOBUF), PROTOBUF)
    from_json, refused_json = decode_logs(cap.log_records(JSON), JSON)
    assert refused == refused_json == [] and from_pb == from_json
    first, second = from_pb
    assert first == {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}", "time_ns": 7_000,
                     "event_name": "gen_ai.user.message", "severity": 9,
                     "body": {"content": "What is OTLP?", "parts": [{"type": "text"}], "raw": "01ff"},
                     "attributes": {"gen_ai.system": "openai"}, "resource": first["resource"],
                     "scope": {"name": "opentelemetry.instrumentation.openai_v2", "version": "2.4b0"}}
    assert first["resource"]["service.name"] == "shop"
    assert (second["trace_id"], second["span_id"], second["event_name"], second["body"]) == ("", "", "gen_ai.choice", "plain line")


def _request_with(cap: Capture, change) -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(cap.traces(PROTOBUF))
    spans = request.resource_spans[0].scope_spans[0].spans
    change({s.name: s for s in spans}, request)
    return request


def _nest(any_value, depth: int) -> None:
    """Makes ``any_value`` an array nested ``depth`` deep around one string."""
    for _ in range(depth - 1):
        any_value = any_value.array_value.values.add()
    any_value.string_value = "bottom"


def _many_attributes(spans, request):
    for i in range(10_000):
        kv = spans["chat gpt-4o"].attributes.add()
        kv.key, kv.value.int_value = f"k{i}", i


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
@pytest.mark.parametrize("change, reason", [
    (_many_attributes, "attributes: 10,000 attributes (limit 1,024)"),
    (lambda spans, r: _nest(spans["chat gpt-4o"].attributes.add().value, otlp.MAX_DEPTH + 1),
     f"values nested more than {otlp.MAX_DEPTH} deep"),
    (lambda spans, r: setattr(spans["chat gpt-4o"].attributes.add().value, "string_value", "x" * (otlp.MAX_STRING + 1)),
     f"a string of {otlp.MAX_STRING + 1:,} characters (limit {otlp.MAX_STRING:,})"),
    (lambda spans, r: setattr(spans["chat gpt-4o"], "trace_id", bytes(16)), "trace_id is not 16 bytes, not all zero"),
    (lambda spans, r: setattr(spans["chat gpt-4o"], "span_id", b"\x01\x02"), "span_id is not 8 bytes, not all zero (2 bytes"),
])
def test_a_span_over_a_limit_is_refused_alone_with_why(content_type, change, reason):
    cap, ids = _two_spans()
    request = _request_with(cap, change)
    spans, refused = decode_traces(encode(request, content_type), content_type)
    assert [s["name"] for s in spans] == ["handle"]  # the other span of the request is kept
    assert spans[0]["span_id"] == ids["root"]
    assert len(refused) == 1 and "`chat gpt-4o`" in refused[0] and reason in refused[0], refused


def test_a_resource_over_the_limit_refuses_its_spans_each_with_why():
    cap, _ = _two_spans()

    def change(spans, request):
        for i in range(otlp.MAX_ATTRIBUTES + 1):
            kv = request.resource_spans[0].resource.attributes.add()
            kv.key, kv.value.bool_value = f"r{i}", True
    spans, refused = decode_traces(encode(_request_with(cap, change), PROTOBUF), PROTOBUF)
    assert spans == [] and len(refused) == 2
    assert all("resource attributes: 1,031 attributes (limit 1,024)" in r for r in refused), refused


def test_json_ids_not_in_hex_refuse_their_span():
    cap, ids = _two_spans()
    doc = json.loads(cap.traces(JSON))
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if span["name"] == "chat gpt-4o":
            span["spanId"] = "zz" * 8
    spans, refused = decode_traces(json.dumps(doc).encode(), JSON)
    assert [s["span_id"] for s in spans] == [ids["root"]]
    assert len(refused) == 1 and "span_id is not 8 bytes" in refused[0]


@pytest.mark.parametrize("body, content_type, words", [
    (b"\x0a\xff\xff\xff\xff\x0f garbage", PROTOBUF, "not a protobuf-encoded OTLP traces request"),
    (b'{"resourceSpans": [', JSON, "the body is not JSON"),
    (b"\xff\xfe{}", JSON, "the body is not JSON"),
    (b"[1, 2]", JSON, "an object is expected"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}', JSON,
     "not an OTLP traces request"),
    (b'{"resourceSpans": "all of them"}', JSON, "not an OTLP traces request"),
    (b"[" * 100_000 + b"]" * 100_000, JSON, "nested deeper than 200 levels"),
    (b'{"a": ' * 300 + b"1" + b"}" * 300, JSON, "nested deeper than 200 levels"),
    (b"{}", "text/plain", "unsupported Content-Type 'text/plain'"),
    (b"{}", "", "unsupported Content-Type ''"),
])
def test_a_body_that_cannot_be_read_raises_otlp_error(body, content_type, words):
    with pytest.raises(OtlpError, match=None) as caught:
        decode_traces(body, content_type)
    assert words in str(caught.value)


def test_protobuf_nested_past_its_parser_limit_is_unreadable_not_a_crash():
    cap, _ = _two_spans()
    request = _request_with(cap, lambda spans, r: _nest(spans["handle"].attributes.add().value, 200))
    with pytest.raises(OtlpError, match="not a protobuf-encoded OTLP traces request"):
        decode_traces(request.SerializeToString(), PROTOBUF)


def test_an_empty_request_is_no_spans():
    assert decode_traces(b"", PROTOBUF) == ([], [])
    assert decode_traces(b"{}", JSON) == ([], [])
    assert decode_logs(b"{}", JSON) == ([], [])


def test_log_record_over_a_limit_refused_alone():
    cap = Capture()
    logger = cap.logger_provider.get_logger("l")
    logger.emit(LogRecord(timestamp=1, event_name="keep", body="kept"))
    logger.emit(LogRecord(timestamp=2, event_name="deep", body="x"))
    request = logs_service_pb2.ExportLogsServiceRequest.FromString(cap.log_records(PROTOBUF))
    _nest(request.resource_logs[0].scope_logs[0].log_records[1].body, otlp.MAX_DEPTH + 5)
    for content_type in (PROTOBUF, JSON):
        logs, refused = decode_logs(encode(request, content_type), content_type)
        assert [r["body"] for r in logs] == ["kept"]
        assert len(refused) == 1 and "`deep`" in refused[0] and f"nested more than {otlp.MAX_DEPTH} deep" in refused[0]


def test_responses_in_the_request_encoding():
    reply = trace_service_pb2.ExportTraceServiceResponse.FromString(
        encode_response("traces", 3, "3 spans refused", PROTOBUF))
    assert (reply.partial_success.rejected_spans, reply.partial_success.error_message) == (3, "3 spans refused")
    assert json.loads(encode_response("traces", 3, "3 spans refused", "application/json")) == {
        "partialSuccess": {"rejectedSpans": "3", "errorMessage": "3 spans refused"}}
    logs_reply = json_format.Parse(encode_response("logs", 2, "why", JSON), logs_service_pb2.ExportLogsServiceResponse())
    assert logs_reply.partial_success.rejected_log_records == 2
    # all accepted: an empty response (no partial_success), as the specification asks
    assert encode_response("traces", 0, "", PROTOBUF) == b""
    assert not trace_service_pb2.ExportTraceServiceResponse.FromString(b"").HasField("partial_success")
    assert json.loads(encode_response("logs", 0, "", JSON)) == {}
    with pytest.raises(OtlpError):
        encode_response("traces", 1, "x", "text/plain")


def test_a_big_resource_repeated_over_many_spans_is_refused_past_what_a_request_may_store():
    """Found by review: each limit held alone, but every span is stored with its resource, so four 4 MB resource
    attributes over 20,000 minimal spans (a 17 MB request) came to 312 GiB. Spans past 64 MB stored are refused,
    each with the reason; the ones before are kept. Counted here on the encoded sizes, as the decoder counts."""
    request = trace_service_pb2.ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    for i in range(4):
        kv = rs.resource.attributes.add()
        kv.key, kv.value.string_value = f"big{i}", "x" * (4 * 1024 * 1024)
    ss = rs.scope_spans.add()
    for i in range(40):
        span = ss.spans.add()
        span.trace_id, span.span_id, span.name = bytes([1] * 16), (i + 1).to_bytes(8, "big"), "s"
    shared = rs.resource.ByteSize() + ss.scope.ByteSize()
    fits = sum(1 for k in range(1, 41) if sum(s.ByteSize() + shared for s in ss.spans[:k]) <= otlp.MAX_EXPANDED)
    spans, refused = decode_traces(request.SerializeToString(), PROTOBUF)
    assert fits == 3 and len(spans) == fits and len(refused) == 40 - fits  # 16 MB and a little each: 3 fit in 64 MB
    assert all("come to more than 64 MB stored" in r for r in refused)
