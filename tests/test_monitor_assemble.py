"""Trace assembly (evaluators/monitor/assemble.py) on either store, its clock given: a trace is mapped once its
root span has ended and its project's quiet period has passed since its last span; one whose root never ends, after
GIVE_UP_SECONDS; spans after that are kept and marked late, the row unchanged; the row is what the mapping makes of
the trace's spans and records, with their sources."""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from evaluators.monitor import otlp
from evaluators.monitor.assemble import GIVE_UP_SECONDS, assemble_once
from evaluators.monitor.mapping import map_trace
from evaluators.store.schema import utcnow
from tests.conftest import ROOT, env_for_subprocess
from tests.monitor_procs import pb_span, traces_request

pytestmark = pytest.mark.both_stores
ROOT_START = 1_764_320_000_000_000_000  # 2025-11-28T08:53:20Z


def receive(store, project: str, spans) -> None:
    got, refused = otlp.decode_traces(traces_request(spans), otlp.PROTOBUF)
    assert refused == []
    store.receive_telemetry(project, got)


def chat(trace: int, span: int, parent: int = 0, model: str = "gpt-4o", end=None):
    said = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"question {trace}.{span}"}]}])
    got = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"answer {trace}.{span}"}]}])
    return pb_span(trace, span, parent, name=f"chat {model}", start=ROOT_START + span, end=end,
                   attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                               "gen_ai.input.messages": said, "gen_ai.output.messages": got})


def test_a_trace_is_mapped_after_its_root_ends_and_its_quiet_period_passes_and_late_spans_are_marked(store, tmp_path):
    store.ensure_monitor_project("shop")  # quiet 30 s
    store.ensure_monitor_project("fast", quiet_seconds=5)
    t0 = utcnow()
    receive(store, "shop", [chat(1, 2, parent=1), chat(1, 1)])  # a child, then its root (ended)
    receive(store, "shop", [chat(2, 3, parent=9)])  # a trace whose root never comes
    receive(store, "fast", [chat(3, 4)])
    at = lambda s: t0 + dt.timedelta(seconds=s)  # noqa: E731
    assert assemble_once(store, at(1)) == 0
    assert assemble_once(store, at(10)) == 1  # fast's quiet period (5 s) has passed, shop's (30 s) not
    assert store.trace_counts("shop")["open"] == 2
    before = utcnow()
    receive(store, "shop", [chat(1, 5, parent=1)])  # another span of trace 1: its quiet period starts again
    t1 = utcnow()
    assert assemble_once(store, before + dt.timedelta(seconds=29)) == 0
    assert assemble_once(store, t1 + dt.timedelta(seconds=31)) == 1
    counts = store.trace_counts("shop")
    assert (counts["mapped"], counts["open"], counts["no_root"]) == (1, 1, 0)
    assert assemble_once(store, t1 + dt.timedelta(seconds=GIVE_UP_SECONDS + 1)) == 1  # the rootless one, given up on
    counts = store.trace_counts("shop")
    assert (counts["mapped"], counts["open"], counts["no_root"], counts["late"]) == (2, 0, 1, 0)
    rows = {r["trace_id"]: r for r in store.iter_mapped_traces("shop")}
    spans, logs = store.trace_parts("shop", f"{1:032x}")
    assert [s["span_id"] for s in spans] == [f"{i:016x}" for i in (1, 2, 5)]
    expected = map_trace(spans, logs)
    assert rows[f"{1:032x}"]["fields"] == expected.fields and rows[f"{1:032x}"]["sources"] == expected.sources
    assert rows[f"{1:032x}"]["completeness"] == "complete" and rows[f"{2:032x}"]["completeness"] == "no_root"
    receive(store, "shop", [chat(1, 6, parent=1, model="late-model")])  # after its trace was mapped
    assert assemble_once(store, t1 + dt.timedelta(days=1)) == 0  # not mapped again
    assert store.trace_counts("shop")["late"] == 1
    assert {r["trace_id"]: r["fields"] for r in store.iter_mapped_traces("shop")}[f"{1:032x}"] == expected.fields

    p = subprocess.run([sys.executable, "-m", "evaluators", "monitor", "export", "--project", "shop", "--out",
                        str(tmp_path / "out"), "--db", store.url, "--since", "2025-11-28"], cwd=ROOT,
                       capture_output=True, text=True, env=env_for_subprocess(), timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in (tmp_path / "out" / "traces.jsonl").read_text().splitlines()]
    assert [(x["trace_id"], x["time"], x["project"]) for x in lines] == [
        (f"{1:032x}", "2025-11-28T08:53:20.000000Z", "shop"), (f"{2:032x}", "2025-11-28T08:53:20.000000Z", "shop")]
    assert lines[0]["sources"] == expected.sources
    assert all(lines[0][k] == v for k, v in expected.fields.items())
    p = subprocess.run([sys.executable, "-m", "evaluators", "monitor", "status", "--project", "shop", "--json",
                        "--db", store.url], cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess(),
                       timeout=120)
    assert json.loads(p.stdout) == {"project": "shop", "traces": 2, "open": 0, "mapped": 2, "no_content": 0,
                                    "no_root": 1, "late": 1, "spans": 5}
