"""Whole evaluations through the Python API against the loopback judge and a real SQLite store."""
from __future__ import annotations

import pytest

from evaluators import evaluate, open_results, prepare_run
from evaluators.data import load_dataset
from evaluators.runner import Runner
from tests.conftest import CONVERSATIONS, SINGLE
from tests.judge_server import Action, expected_score, prompt_text


def scores_by_response(server, metric_word):
    """What the server answered, keyed by the response text inside each prompt."""
    out = {}
    for req in server.calls:
        text = prompt_text(req)
        if metric_word in text:
            out[text] = expected_score(text)
    return out


def test_single_turn_judge_and_classic(judge_server, judge_config, store):
    res = evaluate(SINGLE, ["coherence", "groundedness", "f1_score"], judge=judge_config, store=store)
    assert res.status == "completed"
    rows = res.rows
    assert len(rows) == 31 and len(judge_server.calls) == 62
    # every stored score is exactly the verdict the server gave for that row's prompt
    by_prompt = {prompt_text(c): expected_score(prompt_text(c)) for c in judge_server.calls}
    ds = load_dataset(SINGLE)
    for i in range(31):
        want = [s for p, s in by_prompt.items() if "COHERENCE" in p and ds.records[i]["response"] in p]
        assert rows.loc[i, "outputs.coherence.coherence"] == want[0]
        assert rows.loc[i, "outputs.coherence.coherence_result"] == ("pass" if want[0] >= 3 else "fail")
        assert rows.loc[i, "outputs.coherence.coherence_reason"] == f"scripted verdict {want[0]}"
    coh = [s for p, s in by_prompt.items() if "COHERENCE" in p]
    m = res.metrics
    assert m["coherence.coherence"] == pytest.approx(sum(coh) / 31)
    assert m["coherence.coherence_pass_rate"] == pytest.approx(sum(s >= 3 for s in coh) / 31)
    assert m["coherence.scored_rows"] == 31 and m["coherence.errored_rows"] == 0
    assert m["f1_score.scored_rows"] == 31
    assert list(rows.columns[:6]) == ["inputs.id", "inputs.query", "inputs.context", "inputs.response",
                                      "inputs.ground_truth", "inputs.topic"]


def test_cache_means_no_second_call(judge_server, judge_config, store):
    evaluate(SINGLE, ["fluency"], judge=judge_config, store=store)
    first = len(judge_server.calls)
    res = evaluate(SINGLE, ["fluency"], judge=judge_config.with_(concurrency=3), store=store)
    assert len(judge_server.calls) == first == 31
    assert res.metrics["fluency.scored_rows"] == 31
    assert all(r.cached for r in store.load_results(res.run_id))
    # a different judge setting is a different cache entry
    evaluate(SINGLE, ["fluency"], judge=judge_config.with_(temperature=0.7), store=store)
    assert len(judge_server.calls) == 62


def test_one_bad_row_never_aborts_the_run(judge_server, judge_config, store):
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[3]["response"], *[Action(status=500)] * 10)
    judge_server.on_prompt(ds.records[5]["response"], Action(content="I'd say 4 out of 5."))
    judge_server.on_prompt(ds.records[7]["response"], Action(content='{"reason": "x", "score": 9}'))
    res = evaluate(SINGLE, ["fluency"], judge=judge_config, store=store)
    rows = res.rows
    assert res.status == "completed"
    assert "HTTP 500" in rows.loc[3, "outputs.fluency.fluency_error"]
    assert "no JSON object" in rows.loc[5, "outputs.fluency.fluency_error"]
    assert "outside 1-5" in rows.loc[7, "outputs.fluency.fluency_error"]
    for i in (3, 5, 7):
        assert rows.loc[i, "outputs.fluency.fluency"] is None or rows.loc[i, "outputs.fluency.fluency"] != rows.loc[i, "outputs.fluency.fluency"]
    raw = {r.row_idx: r.raw for r in store.load_results(res.run_id)}
    assert raw[5] == "I'd say 4 out of 5."  # the raw reply is kept for the reader
    m = res.metrics
    assert (m["fluency.scored_rows"], m["fluency.errored_rows"]) == (28, 3)
    good = [v for i, v in enumerate(rows["outputs.fluency.fluency"]) if i not in (3, 5, 7)]
    assert m["fluency.fluency"] == pytest.approx(sum(good) / 28)  # errored rows are not in the denominator


def test_retry_failed_rows_judges_only_those(judge_server, judge_config, store):
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[2]["response"], *[Action(status=500)] * 4)
    rid = prepare_run(store, SINGLE, ["coherence"], judge=judge_config)
    Runner(store, rid).run()
    assert open_results(store, rid).metrics()["coherence.errored_rows"] == 1
    before = len(judge_server.calls)
    store.clear_errors(rid)
    Runner(store, rid).run()
    assert len(judge_server.calls) == before + 1
    assert open_results(store, rid).metrics()["coherence.errored_rows"] == 0


def test_conversations_judged_per_turn_and_aggregated(judge_server, judge_config, store):
    res = evaluate(CONVERSATIONS, ["groundedness", "coherence"], judge=judge_config, store=store)
    ds = load_dataset(CONVERSATIONS)
    turns_with_ctx = sum(1 for i in range(len(ds)) for t in ds.turns(i) if t.context)
    assert len(judge_server.calls) == 42 + turns_with_ctx
    rows = res.rows
    stored = store.load_results(res.run_id)
    for i in range(len(ds)):
        per = [r for r in stored if r.row_idx == i and r.metric == "coherence"]
        mean = sum(r.value for r in per) / len(per)
        assert rows.loc[i, "outputs.coherence.coherence"] == pytest.approx(mean)
        assert rows.loc[i, "outputs.coherence.coherence_result"] == ("pass" if mean >= 3 else "fail")
        assert rows.loc[i, "outputs.coherence.evaluation_per_turn.coherence"] == [r.value for r in per]
    # conversation 15 opens with a greeting turn that has no citations: skipped for groundedness
    g = [r for r in stored if r.row_idx == 14 and r.metric == "groundedness"]
    assert [r.status for r in g] == ["skipped", "ok"]
    assert rows.loc[14, "outputs.groundedness.groundedness"] == g[1].value


def test_relevance_turns_see_query_and_response_and_the_older_rubric_is_opt_in(judge_server, judge_config, store):
    data = [{"messages": [{"role": "user", "content": "Capital of France?"},
                          {"role": "assistant", "content": "Paris.", "ground_truth": "Paris is the capital."},
                          {"role": "user", "content": "And Spain?"}, {"role": "assistant", "content": "Madrid."}]}]
    evaluate(data, ["relevance"], judge=judge_config, store=store)
    prompts = judge_server.prompts()
    # as SDK 1.18's RelevanceEvaluator: each turn's query and response, no history or ground truth
    assert len(prompts) == 2 and "Madrid." in prompts[1] and "Capital of France?" not in prompts[1]
    assert not any("Paris is the capital." in p for p in prompts)
    evaluate(data, ["relevance"], judge=judge_config, store=store,
             templates={"relevance": "relevance_turn_ground_truth.md"})
    assert any("Ground-truth answer:\nParis is the capital." in p for p in judge_server.prompts()[2:])


def test_thresholds_apply_at_read_time(judge_server, judge_config, store):
    res = evaluate(SINGLE, ["coherence"], judge=judge_config, store=store)
    calls = len(judge_server.calls)
    strict = open_results(store, res.run_id, thresholds={"coherence": 5})
    scores = [r.value for r in store.load_results(res.run_id)]
    assert strict.metrics()["coherence.coherence_pass_rate"] == pytest.approx(sum(s >= 5 for s in scores) / 31)
    assert strict.rows()[0]["outputs.coherence.coherence_threshold"] == 5.0
    assert len(judge_server.calls) == calls


def test_user_template_replaces_builtin(judge_server, judge_config, store, tmp_path):
    mine = tmp_path / "my_coherence.md"
    mine.write_text("Grade {$model_output} for question {$user_query}. Reply as JSON with reason and score.")
    res = evaluate(SINGLE, ["coherence"], judge=judge_config, store=store, templates={"coherence": str(mine)})
    assert all(p.startswith("Grade ") for p in judge_server.prompts())
    meta = store.load_results(res.run_id)[0].meta
    assert meta["template"] == str(mine) and meta["model"] == "test-judge" and len(meta["prompt_sha"]) == 12


def test_judge_metric_without_judge_is_refused(store):
    from evaluators.errors import UsageError
    with pytest.raises(UsageError, match="need\\(s\\) an LLM judge"):
        evaluate(SINGLE, ["coherence"], store=store)
    assert store.list_datasets() == []  # nothing stored for a refused run


def test_evaluate_inside_a_running_event_loop(judge_config, store):
    import asyncio

    async def notebook_cell():
        return evaluate(SINGLE, ["bleu"], store=store)

    assert asyncio.run(notebook_cell()).metrics["bleu.scored_rows"] == 31


def test_cancel_stops_a_run_and_resume_finishes_it(judge_server, judge_config, store):
    judge_server.latency = 0.1
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge_config.with_(concurrency=2))
    seen = []

    def progress(p):
        seen.append(p.done)
        if p.done == 4:
            store.request_cancel(rid)

    assert Runner(store, rid, on_progress=progress).run() == "cancelled"
    done_first = len(store.done_keys(rid))
    assert 4 <= done_first < 31
    calls_first = len(judge_server.calls)
    assert Runner(store, rid).run() == "completed"
    assert len(store.done_keys(rid)) == 31
    # each row judged once: the second run asked only for the rows the first did not finish
    # (a call in flight at cancel time may have been sent without its result being kept)
    assert len(judge_server.calls) - calls_first <= 31 - done_first + 2
    prompts = judge_server.prompts()
    assert len(set(prompts)) == 31
