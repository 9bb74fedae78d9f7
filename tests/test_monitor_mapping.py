"""Traces made by the real instrumentations mapped to rows (evaluators/monitor/mapping.py).

Each configuration of tests/otel_apps.py runs in its own process (instrumentations read their environment
when they instrument): the ``openai`` client calls the loopback model, instrumented with
opentelemetry-instrumentation-openai-v2 (content on spans, as log events, on the earlier conventions, not
captured), openinference-instrumentation-openai or OpenLLMetry; the telemetry is encoded by the OTLP
exporter's own encoder, then read back here with decode_traces / decode_logs and mapped. What the row must
hold is what the app itself sent and got (its expected.json), not what the spans say.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import defaultdict

import pytest
from opentelemetry.trace import Status, StatusCode

from evaluators.data.loading import load_dataset, metric_fields
from evaluators.monitor.mapping import GENAI_HINT, NO_GENAI_HINT, OPENINFERENCE_HINT, map_trace
from evaluators.monitor.otlp import decode_logs, decode_traces
from tests.judge_server import Action
from tests.otel_apps import CONFIGS, SCENARIOS, TOOL_QUESTIONS
from tests.otel_capture import JSON, PROTOBUF, Capture
from tests.conftest import ROOT, env_for_subprocess

pytestmark = pytest.mark.no_store


def _answer(prompt: str, request: dict) -> str:
    """The loopback model's text answers: different for every prompt, with an accent and a line break."""
    return f"Réponse {hashlib.sha256(prompt.encode()).hexdigest()[:8]}:\nit is fine."


def _tool_reply(n: int) -> bytes:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_w{n}", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    return json.dumps({"id": f"chatcmpl-tool{n}", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
                       "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                       "usage": {"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30}}).encode()


def run_app(config: str, server, tmp_path) -> tuple[dict, dict]:
    """Runs the configuration's app; returns (trace id -> Mapped, what the app sent and got per scenario).
    Protobuf and OTLP JSON must give the same spans and log records."""
    server.responder = _answer
    for n, fn in enumerate(SCENARIOS[config], 1):
        if fn.__name__ in TOOL_QUESTIONS:  # its first call (only) is answered with a tool call
            server.on_prompt(TOOL_QUESTIONS[fn.__name__], Action(raw_body=_tool_reply(n)))
    out = tmp_path / config
    done = subprocess.run([sys.executable, "-m", "tests.otel_apps", config, server.url, str(out)], cwd=ROOT,
                          env=env_for_subprocess(**CONFIGS[config]), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    spans, refused = decode_traces((out / "traces.pb").read_bytes(), PROTOBUF)
    logs, refused_logs = decode_logs((out / "logs.pb").read_bytes(), PROTOBUF)
    assert refused == refused_logs == []
    assert (spans, logs) == (decode_traces((out / "traces.json").read_bytes(), JSON)[0],
                             decode_logs((out / "logs.json").read_bytes(), JSON)[0])
    by_trace, logs_by_trace = defaultdict(list), defaultdict(list)
    for s in spans:
        by_trace[s["trace_id"]].append(s)
    for r in logs:
        logs_by_trace[r["trace_id"]].append(r)
    mapped = {t: map_trace(group, logs_by_trace[t]) for t, group in by_trace.items()}
    return mapped, json.loads((out / "expected.json").read_text())


def _check(row, expected: dict) -> None:
    """The row holds what the app sent and got."""
    assert row.content and row.hint == ""
    for name in ("query", "response", "tool_calls", "tool_definitions", "context", "conversation_id",
                 "conversation", "model", "input_tokens", "output_tokens", "system_instructions"):
        if name in expected:
            assert row.fields.get(name) == expected[name], (name, row.sources.get(name))
    assert row.fields["error"] is False
    assert row.fields["service_name"] == "weather-app" and row.fields["service_version"] == "2.0.1"
    assert row.fields["latency_ms"] > 0
    _loads_as_a_dataset(row)


def _loads_as_a_dataset(row) -> None:
    """The row's fields are what the engine's datasets take: the data layer checks them (tool calls and
    definitions as the agent metrics read them, documents as context, the conversation as messages)."""
    record = {k: row.fields[k] for k in ("query", "response", "context", "tool_calls", "tool_definitions",
                                         "retrieved_documents") if k in row.fields}
    dataset = load_dataset([record], fields=metric_fields(["tool_call_accuracy", "groundedness", "document_retrieval"]))
    assert set(dataset.mapping) == set(record)
    if "conversation" in row.fields:
        assert load_dataset([{"messages": row.fields["conversation"]}]).shape == "conversation"


# configuration -> scenario -> field -> where it must come from
SOURCES = {
    "v2-span": {"simple": {"query": "gen_ai.input.messages of span `chat gpt-4o`",
                           "response": "gen_ai.output.messages of span `chat gpt-4o`",
                           "system_instructions": "gen_ai.input.messages of span `chat gpt-4o`"},
                "agent_genai": {"query": "gen_ai.input.messages of span `invoke_agent weather-agent`",
                                "response": "gen_ai.output.messages of span `invoke_agent weather-agent`",
                                "context": "gen_ai.retrieval.documents of span `retrieval kb`",
                                "tool_calls": "tool_call parts of gen_ai.output.messages of span `chat gpt-4o`; "
                                              "span `execute_tool get_weather` (execute_tool)",
                                "tool_definitions": "gen_ai.tool.definitions of span `invoke_agent weather-agent`",
                                "conversation_id": "gen_ai.conversation.id of span `invoke_agent weather-agent`",
                                "system_instructions": "gen_ai.system_instructions of span `invoke_agent weather-agent`"}},
    "v2-event": {"simple": {"response": "gen_ai.output.messages of the gen_ai.client.inference.operation.details "
                                        "event of span `chat gpt-4o`"}},
    "v2-legacy": {"simple": {"query": "gen_ai.system.message, gen_ai.user.message events of span `chat gpt-4o`",
                             "response": "gen_ai.choice events of span `chat gpt-4o`"}},
    "openinference": {"simple": {"query": "llm.input_messages of span `ChatCompletion`",
                                 "response": "llm.output_messages of span `ChatCompletion`"},
                      "agent_openinference": {"query": "input.value of span `weather agent`",
                                              "response": "output.value of span `weather agent`",
                                              "context": "retrieval.documents of span `search kb`",
                                              "tool_definitions": "llm.tools of span `ChatCompletion`",
                                              "tool_calls": "tool_call parts of llm.output_messages of span "
                                                            "`ChatCompletion`; span `get_weather` (TOOL)",
                                              "conversation_id": "session.id of span `weather agent`"}},
    "openllmetry": {"openllmetry_attributes": {"query": "gen_ai.prompt of span `openai.chat`",
                                               "response": "gen_ai.completion of span `openai.chat`",
                                               "tool_definitions": "llm.request.functions of span `openai.chat`"}},
}


@pytest.mark.parametrize("config", ["v2-span", "v2-event", "v2-legacy", "openinference", "openllmetry"])
def test_instrumented_app_traces_map_to_what_the_app_sent_and_got(config, judge_server, tmp_path):
    mapped, expected = run_app(config, judge_server, tmp_path)
    for scenario, want in expected.items():
        row = mapped[want["trace_id"]]
        if config == "v2-event" and scenario == "agent_genai":
            # util-genai 1.1b0 writes a retrieval's documents and an agent's instructions on spans only
            assert "context" not in row.fields and "system_instructions" not in row.fields
            del want["context"], want["system_instructions"]
        _check(row, want)
        for name, source in SOURCES.get(config, {}).get(scenario, {}).items():
            assert row.sources[name] == source, (scenario, name)
        if "conversation_id" in want:
            assert row.conversation_key == want["conversation_id"]
        if scenario == "simple":
            assert row.fields["system_instructions"] == want["system"]
            assert (row.fields["model"], row.fields["llm_calls"]) == (want["model"], 1)
            assert (row.fields["input_tokens"], row.fields["output_tokens"]) == (want["input_tokens"], want["output_tokens"])
            assert "conversation" not in row.fields  # one user turn: a single-turn row
    assert len(mapped) >= len(expected)


def test_no_content_captured_maps_with_a_hint(judge_server, tmp_path):
    """openai-v2 with content capture off (its default), and OpenInference told to hide inputs and outputs."""
    for config, hint in (("v2-none", GENAI_HINT), ("openinference-hidden", OPENINFERENCE_HINT)):
        mapped, expected = run_app(config, judge_server, tmp_path)
        row = mapped[expected["simple"]["trace_id"]]
        assert (row.content, row.genai, row.hint) == (False, True, hint), config
        assert "query" not in row.fields and "response" not in row.fields
        assert row.fields["model"] == expected["simple"]["model"]  # what is not content still maps
        assert row.fields["input_tokens"] == expected["simple"]["input_tokens"]


def test_a_trace_without_genai_spans_latency_and_errors():
    """Spans of a plain web request (no model call): no content, said so; latency is the root span's,
    an error status anywhere marks the row."""
    cap = Capture(service="shop")
    tracer = cap.tracer_provider.get_tracer("shop.web")
    with tracer.start_as_current_span("GET /cart", start_time=1_000_000, end_on_exit=False) as root:
        with tracer.start_as_current_span("SELECT cart", start_time=2_000_000, end_on_exit=False) as child:
            child.set_status(Status(StatusCode.ERROR, "deadlock detected"))
            child.end(end_time=90_000_000)
        root.end(end_time=251_500_000)
    spans, _ = decode_traces(cap.traces(), PROTOBUF)
    row = map_trace(spans, [])
    assert (row.content, row.genai, row.hint, row.conversation_key) == (False, False, NO_GENAI_HINT, None)
    assert row.fields["latency_ms"] == 250.5 and row.sources["latency_ms"] == "span `GET /cart` (root)"
    assert (row.fields["error"], row.fields["error_message"]) == (True, "deadlock detected")
    assert row.sources["error"] == "status of span `SELECT cart`"
    assert row.fields["service_name"] == "shop" and row.spans == 2


def test_conversation_ids_as_text_and_bounded():
    """A conversation id is text (a number becomes its text); one past MAX_KEY characters keys nothing."""
    from evaluators.monitor.mapping import MAX_KEY

    cap = Capture()
    tracer = cap.tracer_provider.get_tracer("app")
    for conversation in (42, "c" * MAX_KEY, "c" * (MAX_KEY + 1)):
        with tracer.start_as_current_span("invoke_agent helper") as span:
            span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation})
    spans, _ = decode_traces(cap.traces(), PROTOBUF)
    rows = [map_trace([s], []) for s in spans]
    assert [r.conversation_key for r in rows] == ["42", "c" * MAX_KEY, None]
    assert [r.fields["conversation_id"] for r in rows] == ["42", "c" * MAX_KEY, "c" * (MAX_KEY + 1)]
    assert rows[0].sources["conversation_id"] == "gen_ai.conversation.id of span `invoke_agent helper`"


KEYS = ["gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
        "gen_ai.tool.definitions", "gen_ai.retrieval.documents", "gen_ai.tool.name", "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.conversation.id", "session.id",
        "gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.request.model", "openinference.span.kind",
        "input.value", "input.mime_type", "output.value", "tool.name", "llm.request.type",
        "llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id", "llm.output_messages.0.message.contents.0.message_content.text",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "llm.tools.0.tool.json_schema",
        "retrieval.documents.0.document.id", "retrieval.documents.0.document.score", "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content", "gen_ai.completion.0.tool_calls.0.id", "llm.request.functions.0.parameters"]
EVENTS = ["gen_ai.user.message", "gen_ai.system.message", "gen_ai.assistant.message", "gen_ai.tool.message",
          "gen_ai.choice", "gen_ai.client.inference.operation.details", "other"]


def _strategies():
    from hypothesis import strategies as st

    words = st.sampled_from(["chat", "execute_tool", "retrieval", "invoke_agent", "LLM", "TOOL", "AGENT", "user",
                             "assistant", "tool", "tool_call", "tool_call_response", "text", "id-1", ""])
    values = st.recursive(st.none() | st.booleans() | st.integers(-5, 10 ** 6) | st.floats(allow_nan=False,
                          allow_infinity=False) | words | st.text(max_size=20),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                              st.sampled_from(["role", "parts", "type", "content", "id", "name", "arguments",
                                               "response", "message", "tool_calls", "function", "score", "text"]),
                              inner, max_size=4), max_leaves=8)
    attributes = st.dictionaries(st.sampled_from(KEYS), values | values.map(json.dumps), max_size=8)
    ids = st.sampled_from(["a" * 16, "b" * 16, "c" * 16])
    span = st.builds(lambda sid, parent, name, a, events, start, status: {
        "trace_id": "f" * 32, "span_id": sid, "parent_span_id": parent, "name": name, "kind": 1, "start_ns": start,
        "end_ns": start + 5, "status_code": status, "status_message": "", "attributes": a,
        "events": [{"name": n, "time_ns": 1, "attributes": e} for n, e in events], "resource": {}, "scope": {}},
        ids, ids | st.just(""), words, attributes, st.lists(st.tuples(st.sampled_from(EVENTS), attributes), max_size=3),
        st.integers(0, 100), st.sampled_from([0, 1, 2]))
    log = st.builds(lambda sid, name, body, a: {
        "trace_id": "f" * 32, "span_id": sid, "time_ns": 1, "event_name": name, "body": body, "attributes": a,
        "resource": {}, "scope": {}, "severity": 9}, ids | st.just(""), st.sampled_from(EVENTS), values, attributes)
    return st.lists(span, max_size=5), st.lists(log, max_size=4)


def test_any_attributes_map_without_raising():
    """Whatever an app sends under the names the mapping reads (wrong types, JSON text of anything, cycles
    of parents), map_trace returns a row: JSON-serialisable, every source naming a field it gave."""
    from hypothesis import given, settings

    spans_st, logs_st = _strategies()

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(spans_st, logs_st)
    def check(spans, logs):
        row = map_trace(spans, logs)
        json.dumps([row.fields, row.sources], allow_nan=False)
        assert set(row.sources) == set(row.fields)
        assert row.content == ("query" in row.fields or "response" in row.fields)
        assert isinstance(row.fields["error"], bool)

    check()
