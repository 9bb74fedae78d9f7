"""Scores back out to other tools (issue 32, "Out to other tools"): each judged production trace's score as an
OpenTelemetry ``gen_ai.evaluation.result`` log event, POSTed as OTLP/HTTP protobuf (an ExportLogsServiceRequest of
opentelemetry-proto, the receiver's own package) to an endpoint the user names (``monitor export-otel``).

One event a judged trace, rule (its latest version) and metric (turn 0, status ok): ``event_name``
``gen_ai.evaluation.result``; attributes ``gen_ai.evaluation.name`` (the metric), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` (``pass`` or ``fail`` at the metric's default threshold, as the Monitoring
page's series counts) and ``gen_ai.evaluation.explanation`` (the judge's reason, where it gave one), plus
``evaldash.rule``; its trace_id/span_id are the judged trace's root span (else its earliest span), so a tracing
tool shows the score under the span it judged.

Bounded: at most :data:`BATCH` records a request, a timeout on each, at most ``retries`` retries of a request that
got no answer, 429 or a 5xx (waiting ``Retry-After`` where given, at most :data:`MAX_WAIT` s); any other answer
stops the export with an error. Nothing secret is sent: only scores, names and ids; headers (a collector's token)
come from an environment variable named by the user, never a command line, and a URL with a password is refused.
"""
from __future__ import annotations

import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from sqlalchemy import literal, select

from evaluators.core.errors import UsageError
from evaluators.core.registry import get_metric
from evaluators.store.monitor_rules import MonitorDecisionRow
from evaluators.store.schema import ResultRow
from evaluators.store.traces import MonitorSpanRow, MonitorTraceRow

EVENT = "gen_ai.evaluation.result"
BATCH = 500  # log records a request, at most
MAX_WAIT = 30.0  # seconds waited before a retry, at most
RETRY_STATUS = (429, 500, 502, 503, 504)


class ExportError(RuntimeError):
    """The endpoint refused the scores, or did not answer after the retries."""


def check_endpoint(endpoint: str) -> str:
    """The endpoint's URL (``http(s)://host[:port]/v1/logs``), refused with a password or a query in it (a key
    there would land in logs and shell histories: give it in a header variable instead)."""
    u = urllib.parse.urlsplit(endpoint)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise UsageError(f"--endpoint {endpoint!r} is not an http(s) URL (e.g. http://collector:4318/v1/logs)")
    if u.username or u.password or u.query:
        raise UsageError("--endpoint must not carry credentials or a query: give a collector's token in the "
                         "variable named by --headers-env (NAME=value,...)")
    return endpoint


def headers_from_env(name: str | None) -> dict[str, str]:
    """Headers from the variable ``name``, written as OTEL_EXPORTER_OTLP_HEADERS is: ``k=v,k2=v2``."""
    if not name:
        return {}
    raw = os.environ.get(name)
    if raw is None:
        raise UsageError(f"--headers-env {name}: no such environment variable")
    out = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--headers-env {name}: each header is NAME=value, separated by commas")
        out[urllib.parse.unquote(k.strip())] = urllib.parse.unquote(v.strip())
    return out


def _label(metric: str, value: float):
    """``pass`` or ``fail`` at the metric's default threshold (None for a metric not registered here)."""
    try:
        spec = get_metric(metric)
    except UsageError:  # a custom metric of another install: its score goes without a label
        return None
    return "pass" if spec.passes(value, spec.default_threshold) else "fail"


def scores(store, project: str, rule: str | None = None, since_ns: int | None = None,
           until_ns: int | None = None) -> Iterator[dict]:
    """The project's judged scores (each rule's latest version), oldest trace first: trace_id, span_id, time_ns,
    rule, metric, value, reason."""
    rules = [r for r in store.monitor_rules(project) if rule is None or r["name"] == rule]
    if rule is not None and not rules:
        raise UsageError(f"no rule {rule!r} in project {project!r}")
    d, r, t, sp = MonitorDecisionRow, ResultRow, MonitorTraceRow, MonitorSpanRow
    root = (select(sp.span_id).where(sp.project == d.project, sp.trace_id == d.trace_id)
            .order_by(sp.parent_span_id != literal(""), sp.start_ns, sp.span_id).limit(1).scalar_subquery())
    for ru in rules:
        q = (select(d.trace_id, root, t.start_ns, r.metric, r.value, r.reason)
             .select_from(d)
             .join(t, (t.project == d.project) & (t.trace_id == d.trace_id))
             .join(r, (r.run_id == d.run_id) & (r.row_idx == d.row_idx))
             .where(d.project == project, d.rule == ru["name"], d.rule_version == ru["version"],
                    d.decision == "judged", r.turn == 0, r.status == "ok", r.value.is_not(None))
             .order_by(t.start_ns, d.trace_id, r.metric))
        if since_ns is not None:
            q = q.where(t.start_ns >= since_ns)
        if until_ns is not None:
            q = q.where(t.start_ns < until_ns)
        with store.session() as s:
            rows = s.execute(q).all()
        for tid, span_id, start_ns, metric, value, reason in rows:
            yield {"trace_id": tid, "span_id": span_id or "", "time_ns": int(start_ns or 0), "rule": ru["name"],
                   "metric": metric, "value": float(value), "reason": reason}


def _attr(key: str, value) -> common_pb2.KeyValue:
    kv = common_pb2.KeyValue(key=key)
    if isinstance(value, float):
        kv.value.double_value = value
    else:
        kv.value.string_value = str(value)
    return kv


def encode(project: str, batch: list[dict]) -> bytes:
    """An ExportLogsServiceRequest of the batch's scores, as standard protobuf bytes."""
    req = logs_service_pb2.ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend([_attr("service.name", "evaldash"), _attr("evaldash.project", project)])
    sl = rl.scope_logs.add()
    sl.scope.name = "evaldash"
    now = time.time_ns()
    for sc in batch:
        rec = logs_pb2.LogRecord(event_name=EVENT, time_unix_nano=now, observed_time_unix_nano=now,
                                 severity_number=logs_pb2.SEVERITY_NUMBER_INFO, severity_text="INFO")
        if len(sc["trace_id"]) == 32:
            rec.trace_id = bytes.fromhex(sc["trace_id"])
        if len(sc["span_id"]) == 16:
            rec.span_id = bytes.fromhex(sc["span_id"])
        attrs = [_attr("gen_ai.evaluation.name", sc["metric"]), _attr("gen_ai.evaluation.score.value", sc["value"])]
        label = _label(sc["metric"], sc["value"])
        if label is not None:
            attrs.append(_attr("gen_ai.evaluation.score.label", label))
        if sc["reason"]:
            attrs.append(_attr("gen_ai.evaluation.explanation", sc["reason"]))
        attrs.append(_attr("evaldash.rule", sc["rule"]))
        rec.attributes.extend(attrs)
        sl.log_records.append(rec)
    return req.SerializeToString()


def _post(endpoint: str, body: bytes, headers: dict, timeout: float, retries: int, backoff: float,
          sleep: Callable[[float], None]) -> int:
    """POST one request; returns the records the endpoint said it rejected (partial success)."""
    last = ""
    for attempt in range(retries + 1):
        req = urllib.request.Request(endpoint, data=body, method="POST",
                                     headers={**headers, "Content-Type": "application/x-protobuf"})
        wait = min(MAX_WAIT, backoff * 2 ** attempt)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http(s) checked)
                answer = logs_service_pb2.ExportLogsServiceResponse()
                try:
                    answer.ParseFromString(resp.read())
                except Exception:
                    return 0
                return int(answer.partial_success.rejected_log_records)
        except urllib.error.HTTPError as e:
            if e.code not in RETRY_STATUS:
                raise ExportError(f"{endpoint} answered {e.code} {e.reason}: scores not taken") from None
            last = f"{e.code} {e.reason}"
            after = e.headers.get("Retry-After") if e.headers else None
            if after and after.strip().isdigit():
                wait = min(MAX_WAIT, float(after))
        except (urllib.error.URLError, OSError) as e:
            last = str(getattr(e, "reason", e))
        if attempt < retries:
            sleep(wait)
    raise ExportError(f"{endpoint} did not take the scores after {retries + 1} tries (last: {last})")


def export_otel(store, project: str, endpoint: str, *, rule: str | None = None, since_ns: int | None = None,
                until_ns: int | None = None, headers: dict | None = None, timeout: float = 10.0, retries: int = 3,
                backoff: float = 0.5, batch: int = BATCH, sleep: Callable[[float], None] = time.sleep) -> dict:
    """Send the project's judged scores (:func:`scores`) to ``endpoint``, :data:`BATCH` a request.
    Returns ``sent`` (records), ``requests`` and ``rejected`` (records the endpoint said it dropped)."""
    check_endpoint(endpoint)
    if store.monitor_project(project) is None:
        raise UsageError(f"no project {project!r} (monitor token create --project NAME makes one)")
    sent = requests = rejected = 0
    pending: list[dict] = []

    def flush() -> None:
        nonlocal sent, requests, rejected
        rejected += _post(endpoint, encode(project, pending), headers or {}, timeout, retries, backoff, sleep)
        sent, requests = sent + len(pending), requests + 1
        pending.clear()

    for sc in scores(store, project, rule, since_ns, until_ns):
        pending.append(sc)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return {"sent": sent, "requests": requests, "rejected": rejected}
