"""Agents and ranked retrieval: computed metrics by hand, the SDK's agent inputs and OpenAI chat logs read alike,
availability naming the missing field, bad rows named by row and field.

Expected values are hand computations written out next to each assertion (the formulas of SDK 1.18's
DocumentRetrievalEvaluator and TaskNavigationEfficiencyEvaluator); ``bench/azure_sdk_agent_keys.py`` checks
every key and value against the installed SDK itself.
"""
from __future__ import annotations

import json
import math

import pytest

from evaluators import evaluate
from evaluators.core.errors import DataValidationError
from evaluators.data.loading import load_dataset
from tests.conftest import SINGLE


def qrels(*pairs):
    return [{"document_id": d, "query_relevance_label": label} for d, label in pairs]


def docs(*pairs):
    return [{"document_id": d, "relevance_score": s} for d, s in pairs]


def sdk_trip(*names, fail=()):
    msgs = [{"role": "user", "content": "Book me a trip."}]
    for k, n in enumerate(names, 1):
        result = "Error: service unavailable" if n in fail else {"ok": True}
        msgs += [{"role": "assistant", "content": [{"type": "tool_call", "tool_call_id": f"c{k}", "name": n,
                                                    "arguments": {"step": k}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": [{"type": "tool_result", "tool_result": result}]}]
    return msgs[1:] + [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]


def openai_trip(*names, fail=()):
    """The same trip as an OpenAI chat completions log writes it."""
    msgs = []
    for k, n in enumerate(names, 1):
        result = "Error: service unavailable" if n in fail else json.dumps({"ok": True})
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{k}", "type": "function", "function": {"name": n, "arguments": json.dumps({"step": k})}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": result}]
    return msgs + [{"role": "assistant", "content": "Done."}]


def test_document_retrieval_by_hand(store):
    rows = [{"retrieval_ground_truth": qrels(("a", 4), ("b", 2), ("c", 0), ("d", 1)),
             "retrieved_documents": docs(("b", 9.5), ("x", 8.0), ("a", 7.25), ("d", 1.0))},
            {"retrieval_ground_truth": qrels(("a", 2)), "retrieved_documents": []}]
    r0, r1 = evaluate(rows, ["document_retrieval"], store=store).results.rows()
    # ranked labels [2, 0, 4, 1] (x has none: a hole); ideal [4, 2, 1, 0]
    dcg = 3 / math.log2(2) + 0 + 15 / math.log2(4)
    idcg = 15 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4)
    p = r0["outputs.document_retrieval.document_retrieval_properties"]
    assert r0["outputs.document_retrieval.document_retrieval"] == pytest.approx(dcg / idcg)  # 0.6037
    assert p["ndcg@3"] == pytest.approx(0.6036984547)
    assert p["xdcg@3"] == pytest.approx(25 * (2 + 0 * 0.6 + 4 * 0.36) / (1 + 0.6 + 0.36))  # 43.878
    assert p["fidelity"] == pytest.approx((7 + 31 + 3) / (31 + 7 + 3))  # weights 2^(l+1)-1 above label 0
    assert (p["top1_relevance"], p["top3_max_relevance"], p["holes"], p["holes_ratio"]) == (2, 4, 1, 0.25)
    assert (p["total_retrieved_documents"], p["total_ground_truth_documents"]) == (4, 4)
    assert (p["ndcg@3_result"], p["xdcg@3_result"], p["holes_result"]) == ("pass", "fail", "fail")
    assert p["holes_higher_is_better"] is False and p["xdcg@3_threshold"] == 50.0
    assert r0["outputs.document_retrieval.document_retrieval_status"] == "completed"
    assert r0["outputs.document_retrieval.document_retrieval_passed"] is True
    # nothing retrieved: every value 0, a fail at 0.5
    assert r1["outputs.document_retrieval.document_retrieval"] == 0.0
    assert r1["outputs.document_retrieval.document_retrieval_result"] == "fail"
    assert r1["outputs.document_retrieval.document_retrieval_properties"]["total_ground_truth_documents"] == 1


@pytest.mark.parametrize("mode,expected", [("exact_match", 0.0), ("in_order_match", 1.0), ("any_order_match", 1.0)])
def test_task_navigation_efficiency_modes_and_both_message_forms(store, mode, expected):
    gt = ["search_flights", "book_flight", "send_email"]
    called = ("search_flights", "get_weather", "book_flight", "send_email")
    rows = [{"response": sdk_trip(*called), "ground_truth": gt}, {"response": openai_trip(*called), "ground_truth": gt}]
    res = evaluate(rows, ["task_navigation_efficiency"], store=store,
                   options={"task_navigation_efficiency": {"matching_mode": mode}})
    for r in res.results.rows():
        assert r["outputs.task_navigation_efficiency.task_navigation_efficiency"] == expected
        props = r["outputs.task_navigation_efficiency.task_navigation_efficiency_properties"]
        # 3 of 4 calls expected, all 3 expected called
        assert props == pytest.approx({"precision_score": 0.75, "recall_score": 1.0, "f1_score": 2 * 0.75 / 1.75})
        assert r["outputs.task_navigation_efficiency.task_navigation_efficiency_threshold"] == 1.0


def test_availability_names_the_missing_agent_fields():
    plain = load_dataset(SINGLE).availability()
    assert plain["document_retrieval"] == ["retrieval_ground_truth", "retrieved_documents"]
    assert plain["task_navigation_efficiency"] == ["tool_calls"]  # a text response has no tool calls
    agent = load_dataset([{"response": openai_trip("a"), "ground_truth": ["a"]}]).availability()
    assert agent["task_navigation_efficiency"] == []


@pytest.mark.parametrize("row,field,words", [
    ({"retrieval_ground_truth": qrels(("a", "high")), "retrieved_documents": docs(("a", 1))},
     "retrieval_ground_truth", "query_relevance_label must be a whole number"),
    ({"retrieval_ground_truth": qrels(("a", 1)), "retrieved_documents": [{"document_id": "a"}]},
     "retrieved_documents", "retrieved_documents[0] needs document_id and relevance_score"),
    ({"response": [{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "function": {}}]},
                   {"role": "tool", "content": "x"}], "ground_truth": ["a"]},  # a tool message may omit its call id
     "response", "tool_calls[0] needs function.name"),
])
def test_bad_agent_rows_are_named_by_row_and_field(row, field, words):
    good = {"retrieval_ground_truth": qrels(("a", 1)), "retrieved_documents": docs(("a", 1)),
            "response": sdk_trip("a"), "ground_truth": ["a"]}
    with pytest.raises(DataValidationError) as e:
        load_dataset([good, {**good, **row}], name="agent.jsonl")
    p = e.value.problems[0]
    assert (p.row, p.field) == (2, field) and words in p.message


def test_the_bundled_sample_runs_without_a_key_and_its_tool_rates_count_by_hand(store):
    """data/agent_trips.jsonl: 14 calls; get_booking's trip-05 and change_booking's first try in trip-03 fail."""
    from evaluators.read.agents import tool_rates
    from tests.conftest import ROOT

    sample = ROOT / "data" / "agent_trips.jsonl"
    rates = {r["tool"]: (r["calls"], r["answered"], r["succeeded"]) for r in tool_rates(load_dataset(sample))}
    assert rates == {"search_flights": (5, 5, 5), "get_booking": (3, 3, 2), "change_booking": (2, 2, 1),
                     "search_policies": (2, 2, 2), "cancel_booking": (1, 1, 1), "send_email": (1, 1, 1)}
    res = evaluate(str(sample), ["document_retrieval", "task_navigation_efficiency"], store=store)
    m = res.metrics
    assert m["task_navigation_efficiency.task_navigation_efficiency"] == 0.5  # trips 1, 2, 5, 7 match exactly
    assert m["document_retrieval.scored_rows"] == 2 and m["document_retrieval.skipped_rows"] == 6


def test_an_unknown_matching_mode_is_refused_before_the_run(store):
    from evaluators.core.errors import UsageError

    with pytest.raises(UsageError, match="matching_mode: 'nope' is not one of exact_match, in_order_match"):
        evaluate([{"response": sdk_trip("a"), "ground_truth": ["a"]}], ["task_navigation_efficiency"], store=store,
                 options={"task_navigation_efficiency": {"matching_mode": "nope"}})


def test_a_traces_latency_and_tokens_where_the_messages_record_them():
    """OpenAI's form: usage on the assistant message (LangChain's usage_metadata alike), latency on a tool_calls
    entry or on the tool message that answers it; a call with neither has none; nonsense values are left out."""
    from evaluators.core.agent import trace

    response = [
        {"role": "assistant", "content": None, "usage": {"prompt_tokens": 50, "completion_tokens": 7}, "latency_ms": 410,
         "tool_calls": [{"id": "a", "type": "function", "latency_ms": 90,
                         "function": {"name": "lookup", "arguments": '{"q": 1}'}},
                        {"id": "b", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                        {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok", "latency_ms": 999},  # the call's own wins
        {"role": "tool", "tool_call_id": "b", "content": "ok", "duration_ms": 12.5},
        {"role": "tool", "tool_call_id": "c", "content": "ok", "latency_ms": "fast"},
        {"role": "assistant", "content": "done", "usage_metadata": {"input_tokens": 60, "output_tokens": True}},
    ]
    steps = trace("hi", response)
    first, last = steps[1], steps[-1]
    assert (first["latency_ms"], first["input_tokens"], first["output_tokens"]) == (410.0, 50, 7)
    a, b, c = first["calls"]
    assert (a["latency_ms"], b["latency_ms"]) == (90.0, 12.5)
    assert "latency_ms" not in c
    assert last["input_tokens"] == 60 and "output_tokens" not in last and "latency_ms" not in last
