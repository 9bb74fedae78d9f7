"""The shared trace view's inputs: a monitored trace's spans as turns (what the Monitoring page hands
ui.trace.trace_view), and the cost line each turn and call carries. Spans are in the shape the store keeps
(evaluators.monitor.otlp's decoder), with the GenAI semantic conventions' attributes."""
from __future__ import annotations

import json

import pytest

from ui.trace import cost_line, spans_turns

MS = 1_000_000  # ns


def span(sid: str, name: str, start_ms: int, end_ms: int, attributes: dict, parent: str = "root",
         status: int = 0, message: str = "") -> dict:
    return {"trace_id": "t1", "span_id": sid, "parent_span_id": parent, "name": name, "start_ns": start_ms * MS,
            "end_ns": end_ms * MS, "status_code": status, "status_message": message, "attributes": attributes,
            "events": []}


def chat(sid: str, start: int, end: int, out: list, tokens: tuple[int, int], inputs: list | None = None) -> dict:
    a = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
         "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": out}]),
         "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1]}
    if inputs:
        a["gen_ai.input.messages"] = json.dumps(inputs)
    return span(sid, "chat m", start, end, a)


def tool(sid: str, start: int, end: int, call_id: str, result: str, status: int = 0, message: str = "") -> dict:
    return span(sid, "execute_tool get_weather", start, end,
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                 "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                 "gen_ai.tool.call.result": result}, status=status, message=message)


def test_a_monitored_traces_spans_as_turns():
    user = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris and Oslo?"}]}]
    spans = [
        span("root", "invoke_agent trip", 0, 2000, {"gen_ai.operation.name": "invoke_agent",
                                                     "gen_ai.usage.input_tokens": 999}, parent=""),
        chat("c1", 10, 610, [{"type": "tool_call", "id": "w1", "name": "get_weather", "arguments": {"city": "Paris"}},
                             {"type": "tool_call", "id": "w2", "name": "get_weather", "arguments": {"city": "Oslo"}}],
             (120, 30), user),
        tool("t1", 620, 745, "w1", '{"temp_c": 18}'),
        tool("t2", 620, 1620, "w2", "", status=2, message="timeout after 1 s"),
        chat("c2", 1630, 1990, [{"type": "text", "content": "Paris 18 °C; Oslo did not answer."}], (200, 12)),
        span("http", "GET /weather", 625, 740, {"http.method": "GET"}),  # no GenAI kind: left out
    ]
    turns = spans_turns(list(reversed(spans)))  # any order in: start order out
    assert [t["role"] for t in turns] == ["user", "assistant", "assistant", "assistant"]
    assert turns[0]["text"] == "Weather in Paris and Oslo?"
    agent, first, last = turns[1:]
    assert agent["name"] == "invoke_agent trip" and agent["latency_ms"] == 2000.0
    assert "input_tokens" not in agent  # an agent run's tokens are its model calls'
    assert (first["latency_ms"], first["input_tokens"], first["output_tokens"]) == (600.0, 120, 30)
    ok, failed = first["calls"]
    assert (ok["name"], ok["id"], ok["failed"], ok["latency_ms"]) == ("get_weather", "w1", False, 125.0)
    assert json.loads(ok["arguments"]) == {"city": "Paris"} and json.loads(ok["result"]) == {"temp_c": 18}
    assert (failed["failed"], failed["error"], failed["latency_ms"]) == (True, "timeout after 1 s", 1000.0)
    assert last["text"] == "Paris 18 °C; Oslo did not answer." and last["calls"] == []
    assert (last["input_tokens"], last["output_tokens"]) == (200, 12)


def test_a_tool_span_no_model_call_asked_for_goes_on_the_turn_before_it():
    turns = spans_turns([chat("c1", 0, 100, [{"type": "text", "content": "checking"}], (5, 1)),
                         tool("t1", 110, 120, "x9", "error: no such city")])
    (call,) = turns[-1]["calls"]
    assert (call["id"], call["failed"], call["error"]) == ("x9", True, None)  # its result says error


@pytest.mark.parametrize("d, line", [
    ({}, ""),
    ({"latency_ms": 1240.4}, "1,240 ms"),
    ({"latency_ms": 3.25}, "3.2 ms"),
    ({"input_tokens": 412, "output_tokens": 18}, "430 tokens (412 in, 18 out)"),
    ({"latency_ms": 730, "output_tokens": 1}, "730 ms · 1 token (1 out)"),
])
def test_cost_line(d, line):
    assert cost_line(d) == line
