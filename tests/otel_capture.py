"""Spans and log records made by the real OpenTelemetry SDK, encoded as an OTLP exporter sends them.

A test makes telemetry with the SDK's tracer and logger (or an instrumentation on top of them), captured
in memory, then encodes it with the OTLP exporters' own encoder (``encode_spans`` / ``encode_logs``) as
protobuf bytes, or as OTLP JSON: protobuf's JSON with the trace and span ids in hex, int64 as strings.
"""
from __future__ import annotations

import base64
import json

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


class Capture:
    """A tracer provider and a logger provider whose telemetry stays in memory until encoded."""

    def __init__(self, service: str = "test-app", **resource):
        self.resource = Resource.create({"service.name": service, **resource})
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider(resource=self.resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider(resource=self.resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def finished_spans(self):
        return list(self.spans.get_finished_spans())

    def finished_logs(self):
        return list(self.logs.get_finished_logs())

    def traces(self, content_type: str = PROTOBUF) -> bytes:
        """The finished spans as one OTLP traces request body."""
        return encode(encode_spans(self.finished_spans()), content_type)

    def log_records(self, content_type: str = PROTOBUF) -> bytes:
        """The emitted log records as one OTLP logs request body."""
        return encode(encode_logs(self.finished_logs()), content_type)


def _hex_ids(node) -> None:
    """protobuf's JSON (ids in base64) -> OTLP JSON (ids in hex), in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


def encode(message, content_type: str) -> bytes:
    """An OTLP request message as a body: protobuf bytes, or OTLP JSON (hex ids, int64 as strings)."""
    if content_type == PROTOBUF:
        return message.SerializeToString()
    # lowerCamelCase keys, int64 as strings, enums as integers: OTLP JSON as the specification writes it
    doc = json_format.MessageToDict(message, use_integers_for_enums=True)
    _hex_ids(doc)
    return json.dumps(doc).encode()
