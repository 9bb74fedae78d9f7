"""Judged agent metrics against the real loopback judge: the SDK 1.18 keys and values for given replies, rows
not judged with the SDK's own reasons, and an OpenAI chat log judged as its SDK-form twin.

The expected values follow SDK 1.18's rules as its evaluators state them (1-5 passing at 3; 0/1 passing at 1;
``K_properties`` the reply's ``properties`` then the call's usage; not applicable: K None, K_result
"not_applicable", K_reason "Not applicable: <why>", K_status "skipped", K_properties None);
``bench/azure_sdk_agent_keys.py`` checks them against the installed SDK.
"""
from __future__ import annotations

import json
import re

from evaluators import JudgeConfig, evaluate
from tests.judge_server import JudgeServer
from tests.test_agents import openai_trip, sdk_trip

TOOLS = [{"name": "search", "description": "Search.", "parameters": {"type": "object", "properties": {}}},
         {"name": "book", "description": "Book.", "parameters": {"type": "object", "properties": {}}}]


def reply(prompt: str, request: dict) -> str:
    """A verdict chosen by the marker in the prompt: ``#<score>`` (the marker sits in the user's message)."""
    m = re.search(r"#(\d)", prompt)
    return json.dumps({"reason": "checked", "score": int(m.group(1)) if m else 1, "status": "completed",
                       "properties": {"seen": "yes"}})


def run(rows, metric, store, judge_server):
    cfg = JudgeConfig(model="m", provider="compatible", base_url=judge_server.url, max_retries=1)
    return evaluate(rows, [metric], judge=cfg, store=store).results.rows()


def test_scores_verdicts_and_properties_as_the_sdk_writes_them(store):
    rows = [{"query": [{"role": "user", "content": [{"type": "text", "text": "Book a trip #4"}]}],
             "response": sdk_trip("search", "book"), "tool_definitions": TOOLS},
            {"query": "Book a trip #2", "response": "I cannot.", "tool_definitions": TOOLS}]
    with JudgeServer(reply) as server:
        r0, r1 = run(rows, "intent_resolution", store, server)
        a0, a1 = run([{**rows[0], "query": "Stay on task #0"}, {**rows[1], "query": "Stay on task #1"}],
                     "task_adherence", store, server)
    k = "outputs.intent_resolution.intent_resolution"
    assert (r0[k], r0[f"{k}_passed"], r0[f"{k}_result"], r0[f"{k}_threshold"]) == (4.0, True, "pass", 3.0)
    assert (r1[k], r1[f"{k}_result"], r1[f"{k}_reason"], r1[f"{k}_status"]) == (2.0, "fail", "checked", "completed")
    props = r0[f"{k}_properties"]
    assert list(props)[:2] == ["seen", "prompt_tokens"] and props["seen"] == "yes"  # the reply's own first
    t = "outputs.task_adherence.task_adherence"
    assert (a0[t], a0[f"{t}_result"], a1[t], a1[f"{t}_result"]) == (0.0, "fail", 1.0, "pass")
    # SDK 1.18 writes its base class's default threshold (3) here while passing at 1 (_task_adherence.py)
    assert (a0[f"{t}_threshold"], a1[f"{t}_threshold"], a1[f"{t}_passed"]) == (3, 3, True)


def test_rows_not_judged_say_why_in_the_sdks_words(store):
    no_calls = {"query": "q #5", "response": [{"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}],
                "tool_definitions": TOOLS}
    undefined = {"query": "q #5", "response": sdk_trip("weather"), "tool_definitions": TOOLS}
    pending = {"query": "q #5", "response": [{"role": "assistant", "content": [
        {"type": "function_call", "name": "search", "arguments": {}, "tool_call_id": "x"}]}], "tool_definitions": TOOLS}
    with JudgeServer(reply) as server:
        rows = run([no_calls, undefined, pending], "tool_call_accuracy", store, server)
        ir = run([pending], "intent_resolution", store, server)
        assert server.calls == [] or len(server.calls) == 0  # nothing here is judged
    k = "outputs.tool_call_accuracy.tool_call_accuracy"
    assert [r[f"{k}_reason"] for r in rows] == [
        "Not applicable: No tool calls found in response or provided tool_calls.",
        "Not applicable: Tool definitions for all tool calls must be provided.",
        "Not applicable: No tool calls found in response or provided tool_calls."]  # the SDK checks calls first
    assert all((r[k], r[f"{k}_result"], r[f"{k}_status"], r[f"{k}_properties"]) == (None, "not_applicable", "skipped",
                                                                                    None) for r in rows)
    assert ir[0]["outputs.intent_resolution.intent_resolution_reason"] == (
        "Not applicable: Intermediate response. Please provide the agent's final response for evaluation.")


def test_an_openai_chat_log_is_judged_as_its_sdk_twin(store):
    """A ``messages`` log is split at its last user message; the judge sees the same transcript either way."""
    log = [{"role": "user", "content": "Book a trip #5"}] + openai_trip("search", "book", fail=("book",))
    twin = {"query": [{"role": "user", "content": "Book a trip #5"}], "response": sdk_trip("search", "book", fail=("book",)),
            "tool_definitions": TOOLS}
    with JudgeServer(reply) as server:
        a = run([{"messages": log, "tool_definitions": TOOLS}], "tool_call_accuracy", store, server)[0]
        b = run([twin], "tool_call_accuracy", store, server)[0]
        prompts = server.prompts()
    assert a["outputs.tool_call_accuracy.tool_call_accuracy"] == b["outputs.tool_call_accuracy.tool_call_accuracy"] == 5.0
    assert a["outputs.tool_call_accuracy.gpt_tool_call_accuracy"] == 5.0
    assert len(prompts) == 1  # the twin's prompt is the same text: answered from the run's judge cache
    assert "Error: service unavailable" in prompts[0] and "calls tool book" in prompts[0]


def test_tool_selection_and_input_accuracy_add_the_sdks_percentages(store):
    counts = {"correct_tool_selections": 2, "wrong_tool_selections": 1,
              "total_parameters_passed": 3, "correct_parameters_passed": 3}

    def counting(prompt: str, request: dict) -> str:
        return json.dumps({"reason": "r", "score": 0, "status": "completed", "properties": counts})

    row = {"query": "Book #0", "response": sdk_trip("search", "book"), "tool_definitions": TOOLS}
    with JudgeServer(counting) as server:
        sel = run([row], "tool_selection", store, server)[0]
        inp = run([row], "tool_input_accuracy", store, server)[0]
    props = sel["outputs.tool_selection.tool_selection_properties"]
    assert props["tool_selection_accuracy"] == 66.67  # 2 of 3 selections, rounded to 2 places
    assert props["correct_tool_selections"] == 2 and sel["outputs.tool_selection.tool_selection_result"] == "fail"
    assert inp["outputs.tool_input_accuracy.tool_input_accuracy_properties"]["parameter_extraction_accuracy"] == 100.0


def test_the_trace_marks_the_call_a_failing_verdict_names_in_its_properties(store):
    from evaluators.read.agents import row_trace
    from evaluators.read.results import open_results

    def naming(prompt: str, request: dict) -> str:  # the reasoning names no call: only the properties do
        return json.dumps({"reason": "one call was wrong", "score": 1, "status": "completed",
                           "properties": {"faulty_calls": ["c2"]}})

    row = {"query": "Book #0", "response": sdk_trip("search", "book"), "tool_definitions": TOOLS}
    with JudgeServer(naming) as server:
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, max_retries=1)
        rid = evaluate([row], ["tool_call_accuracy"], judge=cfg, store=store).run_id
    steps = row_trace(open_results(store, rid), 0)
    calls = {c["id"]: c["faulted_by"] for s in steps for c in s["calls"]}
    assert calls == {"c1": [], "c2": ["tool_call_accuracy"]}


def test_a_judge_that_answers_skipped_makes_a_skip_in_the_sdks_words_not_an_error(store):
    """SDK 1.18.10 (_tool_input_accuracy.py, _task_completion.py ...): a reply with ``"status": "skipped"`` is
    ``not_applicable_result(reason)``: K None, K_result "not_applicable", K_reason "Not applicable: <the judge's
    reason>", K_status "skipped"; the run has no error, and the reply is cached like any usable one."""
    def skipping(prompt: str, request: dict) -> str:
        return json.dumps({"reason": "The conversation has no task to complete.", "status": "skipped"})  # no score

    row = {"query": "Hello there #1", "response": "Hi! How can I help?"}
    with JudgeServer(skipping) as server:
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, max_retries=1)
        first = evaluate([row], ["task_completion"], judge=cfg, store=store)
        again = evaluate([row], ["task_completion"], judge=cfg, store=store)
        assert len(server.calls) == 1  # the second run read the cache
    k = "outputs.task_completion.task_completion"
    for res in (first, again):
        (r,) = res.results.rows()
        assert (r[k], r[f"{k}_result"], r[f"{k}_status"], r[f"{k}_properties"]) == (None, "not_applicable", "skipped",
                                                                                   None)
        assert r[f"{k}_reason"] == "Not applicable: The conversation has no task to complete."
        assert store.get_run(res.run_id)["tasks_errored"] == 0
