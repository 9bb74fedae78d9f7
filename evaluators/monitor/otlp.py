"""OTLP/HTTP bodies (traces, logs) read into plain spans and log records, and the replies written back.

One path for both encodings: OTLP JSON is turned into the protobuf message (its hex trace and span ids
made bytes first, as OTLP JSON differs from protobuf's own JSON only there), so protobuf and JSON bodies
give the same normalized spans. What comes from the network is bounded: a body that cannot be read at
all raises :class:`OtlpError` (the receiver answers 400, never retried); a span or log record over a
limit (attributes, nesting, string size, ids) is refused alone, with a reason, and the rest kept.

Normalized forms (JSON-serialisable):

- span: ``trace_id`` (32 hex), ``span_id`` (16 hex), ``parent_span_id`` (16 hex or ""), ``name``, ``kind``,
  ``start_ns``, ``end_ns``, ``status_code``, ``status_message``, ``attributes``, ``events`` (``name``,
  ``time_ns``, ``attributes``), ``resource`` (its attributes), ``scope`` (``name``, ``version``).
- log: ``trace_id`` / ``span_id`` (hex or ""), ``time_ns``, ``event_name`` (the record's, else its
  ``event.name`` attribute), ``body``, ``attributes``, ``resource``, ``scope``, ``severity``.

An attribute's value: string, bool, int and float as such (a float that is not finite as its name,
``"NaN"``, ``"Infinity"``, ``"-Infinity"``: JSON has no such numbers), array -> list, kvlist -> dict,
bytes -> hex string, an empty value -> None.
"""
from __future__ import annotations

import json
import math

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from evaluators.core.errors import EvalError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# Limits on what one span or log record may carry (over one: that span or record is refused, with why).
MAX_DEPTH = 32  # arrays / kvlists nested in one attribute value
MAX_ATTRIBUTES = 1024  # attributes of a span, an event, a log record or a resource
MAX_EVENTS = 1024  # events of one span
MAX_VALUES = 100_000  # values in all of one span's (or record's) attributes, nested ones counted
MAX_STRING = 4 * 1024 * 1024  # characters in one string (a value, a key, a name); the body's size is the receiver's
# A JSON body nested deeper than this is not read at all (protobuf's own parser stops at 100 messages deep).
MAX_JSON_DEPTH = 200
# What one request's spans (or records) may come to once each carries its resource and scope, as they are
# stored: a request within the body limit, with four 4 MB resource attributes over 20,000 spans, came to
# 312 GiB (found by review); past this, the rest of the request's spans are refused with the reason.
MAX_EXPANDED = 64 * 1024 * 1024


class OtlpError(EvalError):
    """A body that cannot be read at all (answered 400, which an OTLP sender does not retry)."""


class _Refused(Exception):
    """One span or log record over a limit: the reason is reported, the others are kept."""


def _media_type(content_type: str) -> str:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise OtlpError(f"unsupported Content-Type {content_type!r}: send {PROTOBUF} or {JSON}")
    return media


# --- reading a body into the protobuf message ---------------------------------------------------------


def _json_depth_ok(value, limit: int) -> bool:
    """True when ``value`` (parsed JSON) is nested at most ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return True


def _hex_to_base64(holder: dict, keys: tuple[str, ...]) -> None:
    """OTLP JSON's hex ids, as protobuf's JSON (base64) so that the protobuf parser reads them. An id that
    is not hex becomes a 1-byte id, which the span's checks then refuse (with the id named)."""
    import base64

    for key in keys:
        for name in (key, _snake(key)):
            value = holder.get(name)
            if isinstance(value, str):
                try:
                    raw = bytes.fromhex(value)
                except ValueError:
                    raw = b"\x00"
                holder[name] = base64.b64encode(raw).decode()


def _snake(camel: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in camel)


def _items(holder, key: str) -> list:
    """``holder[key]`` (lowerCamelCase or snake_case, as protobuf's JSON parser accepts both) when a list."""
    if not isinstance(holder, dict):
        return []
    value = holder.get(key, holder.get(_snake(key)))
    return value if isinstance(value, list) else []


def _fix_json_ids(doc: dict, kind: str) -> None:
    outer, inner, records = (("resourceSpans", "scopeSpans", "spans") if kind == "traces"
                             else ("resourceLogs", "scopeLogs", "logRecords"))
    for resource in _items(doc, outer):
        for scope in _items(resource, inner):
            for record in _items(scope, records):
                if not isinstance(record, dict):
                    continue
                _hex_to_base64(record, ("traceId", "spanId", "parentSpanId"))
                for link in _items(record, "links"):
                    if isinstance(link, dict):
                        _hex_to_base64(link, ("traceId", "spanId"))


def _read(body: bytes, content_type: str, message, kind: str):
    """The request message read from ``body``, or :class:`OtlpError` saying why it cannot be."""
    media = _media_type(content_type)
    if media == PROTOBUF:
        try:
            message.ParseFromString(bytes(body))
        except (DecodeError, RecursionError, ValueError) as e:
            raise OtlpError(f"the body is not a protobuf-encoded OTLP {kind} request ({e})") from None
        return message
    try:
        doc = json.loads(bytes(body).decode("utf-8"))
    except RecursionError:
        raise OtlpError(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise OtlpError(f"the body is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise OtlpError(f"the JSON body is not an OTLP {kind} request (an object is expected)")
    if not _json_depth_ok(doc, MAX_JSON_DEPTH):
        raise OtlpError(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels")
    _fix_json_ids(doc, kind)
    try:
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as e:
        raise OtlpError(f"the JSON body is not an OTLP {kind} request: {e}") from None
    return message


# --- values ----------------------------------------------------------------------------------------------


class _Budget:
    """What one span or record may still hold (values counted across all its attributes)."""

    __slots__ = ("values",)

    def __init__(self):
        self.values = MAX_VALUES

    def take(self, where: str) -> None:
        self.values -= 1
        if self.values < 0:
            raise _Refused(f"more than {MAX_VALUES:,} attribute values in all (at {where})")


def _string(text: str, where: str) -> str:
    if len(text) > MAX_STRING:
        raise _Refused(f"{where}: a string of {len(text):,} characters (limit {MAX_STRING:,})")
    return text


def _value(any_value, budget: _Budget, where: str, depth: int = 1):
    """One AnyValue as plain Python."""
    budget.take(where)
    which = any_value.WhichOneof("value")
    if which == "string_value":
        return _string(any_value.string_value, where)
    if which in ("bool_value", "int_value"):
        return getattr(any_value, which)
    if which == "double_value":
        number = any_value.double_value
        return number if math.isfinite(number) else ("NaN" if math.isnan(number) else
                                                       ("Infinity" if number > 0 else "-Infinity"))
    if which == "bytes_value":
        return _string(any_value.bytes_value.hex(), where)
    if which is None:
        return None
    if depth >= MAX_DEPTH:
        raise _Refused(f"{where}: values nested more than {MAX_DEPTH} deep")
    if which == "array_value":
        return [_value(v, budget, where, depth + 1) for v in any_value.array_value.values]
    return _attributes(any_value.kvlist_value.values, budget, where, depth + 1)


def _attributes(pairs, budget: _Budget, where: str, depth: int = 1) -> dict:
    """A repeated KeyValue as a dict (a key given twice keeps its last value)."""
    if len(pairs) > MAX_ATTRIBUTES:
        raise _Refused(f"{where}: {len(pairs):,} attributes (limit {MAX_ATTRIBUTES:,})")
    out = {}
    for pair in pairs:
        key = _string(pair.key, where)
        out[key] = _value(pair.value, budget, f"{where} `{key[:80]}`", depth)
    return out


def _id(raw: bytes, size: int, what: str, required: bool) -> str:
    if not raw and not required:
        return ""
    if len(raw) != size or not any(raw):
        raise _Refused(f"{what} is not {size} bytes, not all zero ({len(raw)} bytes given)")
    return raw.hex()


class _Expanded:
    """The stored size of one request's spans or records so far (each with its resource and scope)."""

    def __init__(self):
        self.total = 0

    def add(self, record, shared: int) -> None:
        cost = record.ByteSize() + shared
        if self.total + cost > MAX_EXPANDED:
            raise _Refused(f"the request's spans, each with its resource, come to more than {MAX_EXPANDED >> 20} MB "
                           "stored: send fewer per request, or a smaller resource")
        self.total += cost


def _shared_size(resource_message, scope_message) -> int:
    """What each span or record under this resource and scope carries again: their encoded size."""
    return resource_message.ByteSize() + scope_message.ByteSize()


def _resource_and_scope(resource, scope) -> tuple[dict, dict]:
    """The resource's attributes and the scope's name and version (over a limit: every record under them
    is refused with the reason)."""
    attributes = _attributes(resource.attributes, _Budget(), "resource attributes")
    return attributes, {"name": _string(scope.name, "scope name"), "version": _string(scope.version, "scope version")}


# --- traces --------------------------------------------------------------------------------------------


def _span(span, resource: dict, scope: dict) -> dict:
    budget = _Budget()
    if len(span.events) > MAX_EVENTS:
        raise _Refused(f"{len(span.events):,} events (limit {MAX_EVENTS:,})")
    return {
        "trace_id": _id(span.trace_id, 16, "trace_id", True),
        "span_id": _id(span.span_id, 8, "span_id", True),
        "parent_span_id": _id(span.parent_span_id, 8, "parent_span_id", False),
        "name": _string(span.name, "name"),
        "kind": int(span.kind),
        "start_ns": int(span.start_time_unix_nano),
        "end_ns": int(span.end_time_unix_nano),
        "status_code": int(span.status.code),
        "status_message": _string(span.status.message, "status message"),
        "attributes": _attributes(span.attributes, budget, "attributes"),
        "events": [{"name": _string(e.name, "event name"), "time_ns": int(e.time_unix_nano),
                    "attributes": _attributes(e.attributes, budget, f"event `{e.name[:80]}`")}
                   for e in span.events],
        "resource": resource,
        "scope": scope,
    }


def _label(record) -> str:
    """How a refused span or record is named in its reason (its ids as given, when they can be shown)."""
    name = getattr(record, "name", "") or getattr(record, "event_name", "")
    parts = [f"`{name[:80]}`"] if name else []
    if record.trace_id:
        parts.append(f"trace {record.trace_id.hex()[:32]}")
    if record.span_id:
        parts.append(f"span {record.span_id.hex()[:16]}")
    return " ".join(parts) or "(no name, no ids)"


def decode_traces(body: bytes, content_type: str) -> tuple[list[dict], list[str]]:
    """Read an OTLP/HTTP traces request.

    Args:
        body: the request's body, already un-gzipped.
        content_type: its Content-Type (``application/x-protobuf`` or ``application/json``).

    Returns:
        (the spans accepted, normalized; one reason for each span refused).

    Raises:
        OtlpError: the body cannot be read at all (bad encoding, not an OTLP request, another Content-Type).
    """
    request = _read(body, content_type, trace_service_pb2.ExportTraceServiceRequest(), "traces")
    groups = ((rs.resource, ss.scope, ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return _each(groups, _span, "span")


def _each(groups, read, what: str) -> tuple[list[dict], list[str]]:
    """Every record of every (resource, scope, records) group read by ``read``, each refused alone with why;
    the one walk of traces and logs alike."""
    out: list[dict] = []
    refused: list[str] = []
    stored = _Expanded()
    for resource_message, scope_message, records in groups:
        try:
            resource, scope = _resource_and_scope(resource_message, scope_message)
        except _Refused as e:
            refused.extend(f"{what} {_label(r)} refused: {e}" for r in records)
            continue
        shared = _shared_size(resource_message, scope_message)
        for record in records:
            try:
                stored.add(record, shared)
                out.append(read(record, resource, scope))
            except _Refused as e:
                refused.append(f"{what} {_label(record)} refused: {e}")
    return out, refused


# --- logs ----------------------------------------------------------------------------------------------


def _log(record, resource: dict, scope: dict) -> dict:
    budget = _Budget()
    attributes = _attributes(record.attributes, budget, "attributes")
    event_name = _string(record.event_name, "event_name")
    if not event_name and isinstance(attributes.get("event.name"), str):
        event_name = attributes["event.name"]
    return {
        "trace_id": _id(record.trace_id, 16, "trace_id", False),
        "span_id": _id(record.span_id, 8, "span_id", False),
        "time_ns": int(record.time_unix_nano or record.observed_time_unix_nano),
        "event_name": event_name,
        "body": _value(record.body, budget, "body"),
        "attributes": attributes,
        "resource": resource,
        "scope": scope,
        "severity": int(record.severity_number),
    }


def decode_logs(body: bytes, content_type: str) -> tuple[list[dict], list[str]]:
    """Read an OTLP/HTTP logs request (log records, GenAI events among them).

    Args:
        body: the request's body, already un-gzipped.
        content_type: its Content-Type (``application/x-protobuf`` or ``application/json``).

    Returns:
        (the log records accepted, normalized; one reason for each record refused).

    Raises:
        OtlpError: the body cannot be read at all.
    """
    request = _read(body, content_type, logs_service_pb2.ExportLogsServiceRequest(), "logs")
    groups = ((rl.resource, sl.scope, sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
    return _each(groups, _log, "log record")


# --- replies -------------------------------------------------------------------------------------------


def encode_response(kind: str, rejected: int, message: str, content_type: str) -> bytes:
    """The reply to an accepted request, in the request's encoding: ``partial_success`` when some spans
    (or log records) were refused, or a message is to be given; an empty response otherwise.

    Args:
        kind: "traces" or "logs".
        rejected: how many spans / log records were refused.
        message: why (empty when none were).
        content_type: the request's Content-Type (its encoding is the reply's).

    Returns:
        The body of the 200 reply.
    """
    if kind == "traces":
        response = trace_service_pb2.ExportTraceServiceResponse()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
    elif kind == "logs":
        response = logs_service_pb2.ExportLogsServiceResponse()
        if rejected or message:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = message
    else:
        raise ValueError(f"kind is 'traces' or 'logs', not {kind!r}")
    if _media_type(content_type) == PROTOBUF:
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()
