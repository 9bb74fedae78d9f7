"""Rows and metrics.json carry every key azure-ai-evaluation 1.18's evaluate() writes, with its
meaning and types; the SDK's conversation object loads; retrieval runs on single-turn rows.

Expected values are computed by hand here (F1, ROUGE-L, means, shares) or from the loopback
judge server's own rule (``judge_server.expected_score`` of the prompt it received). The keys
themselves were read off SDK 1.18.10 (``_evaluate/_evaluate.py``, ``_common/_prompty_strategy.py``,
each evaluator); ``bench/azure_sdk_keys.py`` checks them against the installed SDK itself.
"""
from __future__ import annotations

import json

import pytest

from evaluators import evaluate
from evaluators.data.loading import load_dataset
from evaluators.core.errors import DataValidationError
from tests.judge_server import Action, expected_score

SDK_SUFFIXES = ("", "_score", "_passed", "_result", "_reason", "_status", "_threshold", "_properties")


def sdk_keys(metric: str, key: str) -> set[str]:
    return {f"outputs.{metric}.{key}{s}" for s in SDK_SUFFIXES}


def sdk_sample_input(**fields) -> str:
    """``<metric>_properties.sample_input`` as SDK 1.18 writes it (``_legacy/prompty/_utils.py``,
    ``format_llm_response``): one user message whose content is the JSON of the prompt's inputs."""
    return json.dumps([{"role": "user", "content": json.dumps(fields)}])


def test_classic_rows_carry_the_sdk_keys_with_hand_computed_values(store):
    data = [
        # SQuAD F1: "paris is in france" vs "paris is capital of france" -> 3 shared; P 3/4, R 3/5 -> 2/3
        {"query": "q", "response": "Paris is in France.", "ground_truth": "Paris is the capital of France."},
        # nothing shared -> 0.0, fails at 0.5
        {"query": "q", "response": "Blue.", "ground_truth": "Red."},
    ]
    res = evaluate(data, ["f1_score", "rouge"], store=store)
    r0, r1 = res.results.rows()
    assert sdk_keys("f1_score", "f1_score") | sdk_keys("rouge", "rouge") <= set(r0)
    assert r0["outputs.f1_score.f1_score"] == pytest.approx(2 / 3)
    assert r0["outputs.f1_score.f1_score_score"] == pytest.approx(2 / 3)
    assert r0["outputs.f1_score.f1_score_passed"] is True and r0["outputs.f1_score.f1_score_result"] == "pass"
    assert r0["outputs.f1_score.f1_score_reason"] is None and r0["outputs.f1_score.f1_score_properties"] is None
    assert r0["outputs.f1_score.f1_score_status"] == "completed" and r0["outputs.f1_score.f1_score_threshold"] == 0.5
    assert r1["outputs.f1_score.f1_score"] == 0.0 and r1["outputs.f1_score.f1_score_passed"] is False
    assert r1["outputs.f1_score.f1_score_result"] == "fail"
    # ROUGE-L: tokens [paris is in france] vs [paris is the capital of france]: LCS 3 -> P 3/4, R 3/6, F 0.6
    props = r0["outputs.rouge.rouge_properties"]
    assert r0["outputs.rouge.rouge"] == r0["outputs.rouge.rouge_score"] == pytest.approx(0.6)
    assert props["rouge_precision"] == pytest.approx(0.75) and props["rouge_recall"] == pytest.approx(0.5)
    assert props["rouge_f1_score"] == pytest.approx(0.6)
    assert (props["rouge_precision_result"], props["rouge_recall_result"], props["rouge_f1_score_result"]) == \
        ("pass", "pass", "pass")
    assert props["rouge_recall_passed"] is True and props["rouge_f1_score_threshold"] == 0.5
    assert r0["outputs.rouge.rouge_threshold"] == 0.5 and r0["outputs.rouge.rouge_reason"] is None
    m = res.metrics
    # SDK aggregates: K and K_score are the mean, K_passed the share passing, binary_aggregate rounded
    assert m["f1_score.f1_score"] == m["f1_score.f1_score_score"] == pytest.approx(1 / 3)
    assert m["f1_score.f1_score_passed"] == 0.5 and m["f1_score.binary_aggregate"] == 0.5
    assert m["rouge.rouge"] == pytest.approx(0.3) and m["rouge.binary_aggregate"] == 0.5
    json.dumps(res.results.rows())  # every value is JSON as the SDK writes it


def test_judge_rows_carry_the_sdk_keys_and_errors_count_in_binary_aggregate(judge_server, judge_config, store):
    data = [{"query": f"Question {i}?", "response": f"Answer number {i}."} for i in range(3)]
    judge_server.on_prompt("Answer number 2.", Action(content="no verdict here"))
    res = evaluate(data, ["coherence"], judge=judge_config, store=store)
    rows = res.results.rows()
    prompts = {p: expected_score(p) for p in judge_server.prompts()}
    scores = [next(s for p, s in prompts.items() if f"Answer number {i}." in p) for i in range(2)]
    for i in range(2):
        r = rows[i]
        prompt = next(p for p in prompts if f"Answer number {i}." in p)
        assert sdk_keys("coherence", "coherence") <= set(r)
        assert r["outputs.coherence.coherence"] == r["outputs.coherence.coherence_score"] == scores[i]
        assert r["outputs.coherence.coherence_passed"] is (scores[i] >= 3)
        assert r["outputs.coherence.coherence_result"] == ("pass" if scores[i] >= 3 else "fail")
        assert r["outputs.coherence.coherence_reason"] == f"scripted verdict {scores[i]}"
        assert r["outputs.coherence.coherence_status"] == "completed"
        reply = json.dumps({"reason": f"scripted verdict {scores[i]}", "score": scores[i]})
        props = r["outputs.coherence.coherence_properties"]
        # finish_reason: the runner's record of it is another change; "" (the SDK's "not reported") until then
        assert props.pop("finish_reason") in ("stop", "")
        assert props == {
            "prompt_tokens": len(prompt) // 4, "completion_tokens": len(reply) // 4,
            "total_tokens": len(prompt) // 4 + len(reply) // 4, "model": "test-judge",
            "sample_input": sdk_sample_input(query=f"Question {i}?", response=f"Answer number {i}."),
            "sample_output": json.dumps([{"role": "assistant", "content": reply}])}
    bad = rows[2]
    assert bad["outputs.coherence.coherence"] is None and bad["outputs.coherence.coherence_passed"] is None
    assert bad["outputs.coherence.coherence_status"] == "error" and "unusable" in bad["outputs.coherence.coherence_error"]
    m = res.metrics
    passes = sum(s >= 3 for s in scores)
    assert m["coherence.coherence"] == m["coherence.coherence_score"] == pytest.approx(sum(scores) / 2)
    assert m["coherence.coherence_passed"] == pytest.approx(passes / 2)  # scored rows
    assert m["coherence.binary_aggregate"] == round(passes / 3, 2)  # all rows, as the SDK counts
    assert m["coherence.errored_rows"] == 1  # our own keys stay


def test_conversation_keys_per_turn_as_flattened_lists(judge_server, judge_config, store):
    conv = {"messages": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Is the T3 waterproof?"},
        {"role": "assistant", "content": "No, keep it dry.", "context": {"citations": [
            {"id": "kb1", "title": "T3 care", "content": "The T3 is not waterproof."}]}}]}
    res = evaluate([{"conversation": conv}], ["groundedness", "fluency"], judge=judge_config, store=store)
    row = res.results.rows()[0]
    assert row["inputs.conversation"] == conv  # the SDK's input column, as given
    per = "outputs.groundedness.evaluation_per_turn."
    assert {per + k for k in ("groundedness", "groundedness_score", "groundedness_passed", "groundedness_result",
                              "groundedness_reason", "groundedness_status", "groundedness_threshold",
                              "groundedness_properties")} <= set(row)
    # turn 1 has no documents: skipped, as the SDK marks a skipped evaluation
    assert row[per + "groundedness_status"][0] == "skipped" and row[per + "groundedness_result"][0] == "not_applicable"
    assert row[per + "groundedness"][0] is None and row[per + "groundedness_threshold"] == [3.0, 3.0]
    g = expected_score(next(p for p in judge_server.prompts() if "not waterproof" in p))
    assert row[per + "groundedness"][1] == g and row["outputs.groundedness.groundedness"] == g
    # fluency: both turns judged, the row's score is their mean and its verdict comes from that mean
    fl = [expected_score(next(p for p in judge_server.prompts() if "FLUENCY" in p and p.endswith(reply)))
          for reply in ("Hello! How can I help?", "No, keep it dry.")]  # per turn, whatever order the calls came in
    f = "outputs.fluency."
    assert row[f + "evaluation_per_turn.fluency"] == fl
    assert row[f + "evaluation_per_turn.fluency_passed"] == [s >= 3 for s in fl]
    assert row[f + "fluency"] == pytest.approx(sum(fl) / 2)
    assert row[f + "fluency_passed"] is (sum(fl) / 2 >= 3)
    assert row[f + "fluency_result"] == ("pass" if sum(fl) / 2 >= 3 else "fail")
    assert "outputs.fluency.evaluation_per_turn" not in row  # flattened, as SDK 1.18 writes it


def test_each_judge_metric_sends_the_sdk_evaluators_fields(judge_server, judge_config, store):
    row = {"query": "QUERY-TEXT?", "response": "RESPONSE-TEXT.", "context": "CONTEXT-TEXT.",
           "ground_truth": "GROUND-TRUTH-TEXT."}
    # what SDK 1.18's evaluate() sends: each evaluator's prompty inputs (groundedness: the prompt
    # without the query, the one evaluate() uses; see evaluators/metrics/groundedness.py)
    sends = {"fluency": {"response"}, "coherence": {"query", "response"}, "relevance": {"query", "response"},
             "retrieval": {"query", "context"}, "groundedness": {"response", "context"},
             "similarity": {"query", "response", "ground_truth"}}
    for metric, want in sends.items():
        before = len(judge_server.calls)
        evaluate([row], [metric], judge=judge_config, store=store)
        (prompt,) = judge_server.prompts()[before:]
        got = {f for f, text in row.items() if text in prompt}
        assert got == want, metric


def test_retrieval_runs_on_single_turn_rows(judge_server, judge_config, store):
    data = [{"query": "How long is the warranty?", "context": "The warranty lasts two years.",
             "response": "Two years."}]
    assert load_dataset(data).availability()["retrieval"] == []
    res = evaluate(data, ["retrieval"], judge=judge_config, store=store)
    (prompt,) = judge_server.prompts()
    assert "How long is the warranty?" in prompt and "The warranty lasts two years." in prompt
    r = res.results.rows()[0]
    assert r["outputs.retrieval.retrieval"] == expected_score(prompt)
    assert r["outputs.retrieval.retrieval_status"] == "completed"
    assert "outputs.retrieval.evaluation_per_turn.retrieval" not in r


def test_sdk_conversation_object_loads_with_its_context():
    data = [{"conversation": {"context": "Store hours: 9 to 5.", "messages": [
        {"role": "user", "content": "When do you open?"},
        {"role": "assistant", "content": "At 9."},
        {"role": "user", "content": "And close?", "context": "Closed on Sundays."},
        {"role": "assistant", "content": "At 5.", "context": "Hours page"}]}}]
    ds = load_dataset(data)
    assert ds.shape == "conversation" and ds.detected == "azure" and "context" in ds.fields()
    t1, t2 = ds.turns(0)
    assert (t1.query, t1.response, t1.context) == ("When do you open?", "At 9.", "Store hours: 9 to 5.")
    # conversation context, the user message's and the assistant's own, in that order
    assert t2.context == "Store hours: 9 to 5.\n\nClosed on Sundays.\n\nHours page"
    assert ds.records[0] == data[0]  # the record is kept as given (inputs.conversation)


def test_bad_sdk_conversation_object_is_refused_by_row_and_field():
    bad = [{"conversation": {"messages": [{"role": "user", "content": "hi"},
                                          {"role": "assistant", "content": "yo"}]}},
           {"conversation": {"messages": "hello", "context": "c"}},
           {"conversation": {"messages": [{"role": "robot", "content": "x"}], "extra": 1}}]
    with pytest.raises(DataValidationError) as e:
        load_dataset(bad)
    got = [(p.row, p.field) for p in e.value.problems]
    assert (1, "conversation") not in got and {(2, "conversation"), (3, "conversation")} <= set(got)
    text = " ".join(p.message for p in e.value.problems)
    assert "conversation.messages must be a list" in text and "unknown key(s) extra" in text
    assert "role must be one of" in text


def test_sdk_conversation_object_in_a_csv_cell_loads(tmp_path):
    import csv

    conv = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
            "context": "Greeting guide."}
    p = tmp_path / "conv.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["conversation"])
        w.writerow([json.dumps(conv)])
    ds = load_dataset(p)
    assert ds.shape == "conversation" and ds.records[0]["conversation"] == conv
    assert [(t.query, t.response, t.context) for t in ds.turns(0)] == [("Hi", "Hello.", "Greeting guide.")]


def test_similarity_judges_conversation_turns_that_carry_a_ground_truth(judge_server, judge_config, store):
    data = [{"messages": [{"role": "user", "content": "Capital of France?"},
                          {"role": "assistant", "content": "Paris.", "ground_truth": "Paris is the capital."},
                          {"role": "user", "content": "And Spain?"}, {"role": "assistant", "content": "Madrid."}]}]
    res = evaluate(data, ["similarity"], judge=judge_config, store=store)
    (prompt,) = judge_server.prompts()
    assert "Paris is the capital." in prompt and "Capital of France?" in prompt and "Paris." in prompt
    row = res.results.rows()[0]
    assert row["outputs.similarity.evaluation_per_turn.similarity_status"] == ["completed", "skipped"]
    assert row["outputs.similarity.similarity"] == expected_score(prompt)


def test_sdk_conversation_object_stores_numeric_content_as_text():
    rows = [{"conversation": {"messages": [{"role": "user", "content": 7},
                                           {"role": "assistant", "content": 42}]}}]
    ds = load_dataset(rows)
    assert ds.records[0]["conversation"]["messages"][1]["content"] == "42"
    assert rows[0]["conversation"]["messages"][1]["content"] == 42  # the caller's rows are untouched


# ---------------------------------------------------------------- <metric>_properties of judge metrics
PROPS_KEYS = ["prompt_tokens", "completion_tokens", "total_tokens", "finish_reason", "model", "sample_input",
              "sample_output"]  # SDK 1.18's, in its order (_base_model_eval._get_token_metadata)


def test_judge_properties_hold_the_sdk_sample_input_of_each_metric(judge_server, judge_config, store):
    row = {"query": "Where is Zürich's “main” station?", "response": "At the north end of the Bahnhofstrasse.",
           "context": "Zürich HB lies at the north end of the Bahnhofstrasse.", "ground_truth": "North end."}
    # each SDK evaluator's prompty inputs, in its declared order (read off SDK 1.18.10's .prompty files)
    want = {"fluency": ("response",), "coherence": ("query", "response"), "relevance": ("query", "response"),
            "retrieval": ("query", "context"), "groundedness": ("response", "context"),
            "similarity": ("query", "response", "ground_truth")}
    res = evaluate([row], list(want), judge=judge_config, store=store)
    r = res.results.rows()[0]
    for metric, fields in want.items():
        props = r[f"outputs.{metric}.{metric}_properties"]
        assert list(props) == PROPS_KEYS, metric
        assert props["sample_input"] == sdk_sample_input(**{f: row[f] for f in fields}), metric
        assert isinstance(props["finish_reason"], str)


def test_a_users_template_sends_and_records_only_its_own_fields(judge_server, judge_config, store, tmp_path):
    tpl = tmp_path / "mine.md"
    tpl.write_text('Rate this: {{response}}\nReply {"reason": "...", "score": 1-5}', encoding="utf-8")
    data = [{"query": "Q?", "response": "A plain answer."}]
    res = evaluate(data, ["coherence"], judge=judge_config, store=store, templates={"coherence": str(tpl)})
    props = res.results.rows()[0]["outputs.coherence.coherence_properties"]
    assert props["sample_input"] == sdk_sample_input(response="A plain answer.")


def test_conversation_properties_per_turn_and_the_rows_from_its_last_turn(judge_server, judge_config, store):
    conv = {"messages": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Is the T3 waterproof?"},
        {"role": "assistant", "content": "No, keep it dry."}]}
    res = evaluate([{"conversation": conv}], ["coherence"], judge=judge_config, store=store)
    row = res.results.rows()[0]
    per = row["outputs.coherence.evaluation_per_turn.coherence_properties"]
    assert [p["sample_input"] for p in per] == [
        sdk_sample_input(query="Hi there", response="Hello! How can I help?"),
        sdk_sample_input(query="Is the T3 waterproof?", response="No, keep it dry.")]
    top = row["outputs.coherence.coherence_properties"]
    # the SDK's row of a conversation carries its last turn's call; our token counts sum the turns
    assert (top["sample_input"], top["sample_output"]) == (per[1]["sample_input"], per[1]["sample_output"])
    assert top["prompt_tokens"] == per[0]["prompt_tokens"] + per[1]["prompt_tokens"]


def test_sample_input_is_none_when_the_template_in_force_is_not_the_one_used(judge_server, judge_config, store):
    from evaluators.read.results import open_results

    res = evaluate([{"query": "Q?", "response": "A."}], ["fluency"], judge=judge_config, store=store)
    assert res.results.rows()[0]["outputs.fluency.fluency_properties"]["sample_input"] == sdk_sample_input(
        response="A.")
    with store.session() as s:  # as if the built-in template had changed since the run
        from evaluators.store.schema import ResultRow

        for rr in s.query(ResultRow).filter_by(run_id=res.run_id):
            rr.meta = {**rr.meta, "prompt_sha": "0" * 12}
        s.commit()
    assert open_results(store, res.run_id).rows()[0]["outputs.fluency.fluency_properties"]["sample_input"] is None


def test_finish_reason_is_read_from_the_results_meta():
    from evaluators.core.kinds import get_kind
    from evaluators.core.registry import get_metric
    from evaluators.store.schema import Result

    spec, kind = get_metric("fluency"), get_kind("score")
    cut = Result(0, "fluency", 0, "ok", value=3.0, outputs={"fluency": 3.0}, raw='{"score": 3}',
                 prompt_tokens=10, completion_tokens=5, meta={"model": "m", "finish_reason": "length"})
    props = kind.properties(spec, cut.outputs, [cut], 3.0)
    assert props["finish_reason"] == "length" and props["sample_input"] is None  # no JudgeInputs given
    assert props["sample_output"] == json.dumps([{"role": "assistant", "content": '{"score": 3}'}])
    old = Result(0, "fluency", 0, "ok", value=3.0, outputs={"fluency": 3.0}, raw="x", meta={"model": "m"})
    assert kind.properties(spec, old.outputs, [old], 3.0)["finish_reason"] == ""  # the SDK's "not reported"
    skipped = Result(0, "fluency", 0, "skipped", error="turn 1 has no response")
    assert kind.properties(spec, None, [skipped], 3.0)["finish_reason"] is None  # no call was made


def test_the_side_by_side_check_accepts_only_the_differences_it_explains():
    """bench/azure_sdk_keys.py compares what cannot be equal by presence and type, and says why;
    anything else (a missing sub-key, a wrong type, a field or query that differs) fails it."""
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("azure_sdk_keys", ROOT / "bench" / "azure_sdk_keys.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def bucket(file, key, sdk_v, ours_v, what="differs"):
        return bench.classify(file, key, what, sdk_v, ours_v, nltk_real=True)

    tokens = "outputs.coherence.coherence_properties.prompt_tokens"
    assert bucket("single", tokens, 1642, 287) == bench.WHY_TOKENS
    assert bucket("single", tokens, 1642, "287") == "UNEXPECTED"
    assert bucket("single", tokens, 1642, None, what="missing") == "UNEXPECTED"
    finish = "outputs.fluency.fluency_properties.finish_reason"
    assert bucket("single", finish, "stop", "") == bench.WHY_FINISH
    assert bucket("single", finish, "stop", "length") == "UNEXPECTED"
    si = "outputs.groundedness.evaluation_per_turn.groundedness_properties[1].sample_input"
    sdk_v = sdk_sample_input(response="R.", context="{'global_context': 'KB'}")
    assert bucket("conversations", si, sdk_v, sdk_sample_input(response="R.", context="KB")) == bench.WHY_CONTEXT
    assert bucket("conversations", si, sdk_v, sdk_sample_input(response="other", context="KB")) == "UNEXPECTED"
    assert bucket("conversations", si, sdk_v, sdk_sample_input(context="KB", response="R.")) == "UNEXPECTED"
    assert bucket("single", si.replace("evaluation_per_turn.", "").replace("[1]", ""), sdk_v,
                  sdk_sample_input(response="R.", context="KB")) == "UNEXPECTED"  # single-turn: must be equal


def test_filled_fields_are_what_render_put_in_the_prompt():
    from evaluators.judge.templates import filled_fields, parse_template

    t = parse_template("[system]\nJudge {{ context }}.\n[user]\nQ: {{query}} R: {{response}} "
                       "C: {$checklist} U: {$user_query}", "t")
    got = filled_fields(t, {"query": "Why?", "response": "", "context": "Docs.", "checklist": None})
    # the SDK's order first; {{x}} missing -> "(none)", WildBench's {$x} missing -> "" (as rendered)
    assert got == {"query": "Why?", "response": "(none)", "context": "Docs.", "checklist": ""}
    assert list(got) == ["query", "response", "context", "checklist"]
    rendered = "".join(m["content"] for m in t.render({"query": "Why?", "response": "", "context": "Docs."}))
    assert all(v in rendered for v in got.values())
