"""Whole evaluations through the Python API against the loopback judge and a real SQLite store."""
from __future__ import annotations

import threading

import pytest

from evaluators import evaluate, open_results, prepare_run
from evaluators.data.loading import load_dataset
from evaluators.run.runner import Runner
from evaluators.run.spec import RunSpec
from tests.conftest import CONVERSATIONS, SINGLE

pytestmark = pytest.mark.both_stores
from tests.judge_server import Action, expected_score, prompt_text
from tests.procs import wait_until


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
    # as SDK 1.18's RelevanceEvaluator: each turn's query and response, no history or ground truth (the two
    # turns' calls leave together: either may arrive first)
    second = [p for p in prompts if "Madrid." in p]
    assert len(prompts) == 2 and len(second) == 1 and "Capital of France?" not in second[0]
    assert not any("Paris is the capital." in p for p in prompts)
    evaluate(data, ["relevance"], judge=judge_config, store=store,
             templates={"relevance": "builtin:relevance_turn_ground_truth.md"})
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
    from evaluators.core.errors import UsageError
    with pytest.raises(UsageError, match="need\\(s\\) an LLM judge"):
        evaluate(SINGLE, ["coherence"], store=store)
    assert store.list_datasets() == []  # nothing stored for a refused run


def test_evaluate_inside_a_running_event_loop(judge_config, store):
    import asyncio

    async def notebook_cell():
        return evaluate(SINGLE, ["bleu"], store=store)

    assert asyncio.run(notebook_cell()).metrics["bleu.scored_rows"] == 31


def in_thread(target) -> tuple[threading.Thread, dict]:
    """``target()`` started in a thread; the dict gets its return value as "value"."""
    box: dict = {}
    th = threading.Thread(target=lambda: box.setdefault("value", target()))
    th.start()
    return th, box


def test_cancel_stops_a_run_and_resume_finishes_it(judge_server, judge_config, store):
    judge_server.hold_calls(after=4)  # four rows judged, the next two calls held: the run is mid-way when cancelled
    # (a timeout longer than the test: a held call is never given up and sent again)
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge_config.with_(concurrency=2, timeout=60))
    th, box = in_thread(Runner(store, rid).run)
    try:
        wait_until(lambda: len(store.done_keys(rid)) == 4 and judge_server.held == 2,
                   what="four rows stored and two calls in flight")
    finally:
        store.request_cancel(rid)  # (as the dashboard does: through the store)
        th.join(60)
    assert box["value"] == "cancelled"
    done_first = len(store.done_keys(rid))
    assert done_first == 4
    calls_first = len(judge_server.calls)
    judge_server.release()
    assert Runner(store, rid).run() == "completed"
    assert len(store.done_keys(rid)) == 31
    # each row judged once: the second run asked only for the rows the first did not finish
    # (the two calls in flight at the cancel were sent without their results being kept: asked again)
    assert len(judge_server.calls) - calls_first == 31 - done_first
    prompts = judge_server.prompts()
    assert len(set(prompts)) == 31


# ---------------------------------------------------------------------------- what a reply depends on
FIVE = [{"query": f"question {i}?", "response": f"answer {i}."} for i in range(5)]


def _judges_file(tmp_path, url):
    f = tmp_path / "evalhome" / "judges.toml"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f'[alpha]\nbase_url = "{url}"\nmodel = "m"\n\n[beta]\nbase_url = "{url}"\nmodel = "m"\n')


def _cases(server, tmp_path):
    from evaluators.judge.config import JudgeConfig

    fast = dict(timeout=2.0, max_retries=1, backoff_base=0.005, backoff_max=0.01)
    plain = JudgeConfig(model="m", provider="compatible", base_url=server.url, **fast)
    azure = JudgeConfig(model="dep", provider="azure", azure_endpoint=server.root, **fast)
    other_host = server.root.replace("127.0.0.1", "localhost")  # the same server under another name
    return {
        "base_url": (plain, plain.with_(base_url=server.url.replace("127.0.0.1", "localhost"))),
        "model": (plain, plain.with_(model="m2")),
        "temperature": (plain, plain.with_(temperature=0.3)),
        "max_tokens": (plain, plain.with_(max_tokens=700)),
        "seed": (plain, plain.with_(seed=7)),
        "azure_endpoint": (azure, azure.with_(azure_endpoint=other_host)),
        "api_version": (azure, azure.with_(api_version="2024-06-01")),
        "judge_name": (JudgeConfig(judge_name="alpha", **fast), JudgeConfig(judge_name="beta", **fast)),
        "template_text": (plain, plain),
    }


@pytest.mark.parametrize("field", ["base_url", "model", "temperature", "max_tokens", "seed", "azure_endpoint",
                                   "api_version", "judge_name", "template_text"])
def test_cache_key_and_resume_fingerprint_follow_what_changes_a_reply(field, judge_server, store, tmp_path):
    _judges_file(tmp_path, judge_server.url)
    before, after = _cases(judge_server, tmp_path)[field]
    tpl = tmp_path / "mine.md"
    tpl.write_text("Rate {{response}} for {{query}}. JSON with reason and score.")
    templates = {"fluency": str(tpl)} if field == "template_text" else None
    out = tmp_path / "out"

    def go(cfg, out_dir):
        rid = prepare_run(store, FIVE, ["fluency"], judge=cfg, out_dir=out_dir, templates=templates)
        Runner(store, rid, api_key="k").run()
        return rid

    first = go(before, out)
    n = len(judge_server.calls)
    assert n == 5
    # kept: the same run resumes (nothing left to do) and another run is answered by the cache
    assert prepare_run(store, FIVE, ["fluency"], judge=before, out_dir=out, templates=templates) == first
    cached = go(before, None)
    assert len(judge_server.calls) == n and all(r.cached for r in store.load_results(cached))
    # changed: a new run (not a resume of the old one), and every row asked again
    if field == "template_text":
        tpl.write_text("Grade {{response}} given {{query}}. JSON with reason and score.")
    second = go(after, out)
    assert second != first
    assert len(judge_server.calls) == n + 5
    assert not any(r.cached for r in store.load_results(second))


def test_resumed_run_uses_the_template_text_it_started_with(judge_server, judge_config, store, tmp_path):
    mine = tmp_path / "mine.md"
    mine.write_text("ORIGINAL: grade {{response}}. JSON with reason and score.")
    rid = prepare_run(store, SINGLE, ["coherence"], judge=judge_config, templates={"coherence": str(mine)})
    assert store.get_run(rid)["spec"]["template_texts"] == {"coherence": mine.read_text()}
    ds = load_dataset(SINGLE)
    for i in range(3):
        judge_server.on_prompt(ds.records[i]["response"], Action(content="no verdict"))
    mine.write_text("CHANGED: grade {{response}}. JSON with reason and score.")  # edited after the start...
    Runner(store, rid).run()
    assert open_results(store, rid).metrics()["coherence.errored_rows"] == 3
    mine.unlink()  # ...or gone, for whoever resumes (a dashboard worker in another folder)
    store.clear_errors(rid)
    assert Runner(store, rid).run() == "completed"
    assert len(judge_server.calls) == 31 + 3
    assert all(p.startswith("ORIGINAL: ") for p in judge_server.prompts())
    assert open_results(store, rid).metrics()["coherence.scored_rows"] == 31


def test_missing_template_path_never_falls_back_to_a_builtin(judge_config, store):
    from evaluators.core.errors import UsageError

    with pytest.raises(UsageError, match="template for coherence: file not found: coherence.md"):
        prepare_run(store, SINGLE, ["coherence"], judge=judge_config, templates={"coherence": "coherence.md"})
    assert store.list_runs() == []


def test_retrying_failed_rows_of_an_interrupted_run_also_finishes_what_never_ran(judge_server, judge_config, store):
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[0]["response"], Action(content="no verdict"))
    judge_server.latency = 0.05
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge_config.with_(concurrency=1))

    def progress(p):
        if p.done + p.errored >= 6:
            store.request_cancel(rid)

    assert Runner(store, rid, on_progress=progress).run() == "cancelled"
    judge_server.latency = 0.0
    stored = store.load_results(rid)
    failed = {r.row_idx for r in stored if r.status == "error"}
    assert failed == {0} and len(stored) < 31  # one error, and rows that never ran
    store.clear_errors(rid)
    assert Runner(store, rid, rows=failed).run() == "completed"
    assert len(store.result_keys(rid)) == 31 and open_results(store, rid).metrics()["fluency.scored_rows"] == 31


def test_progress_counts_every_stored_result_while_the_judge_is_slow(judge_server, judge_config, store):
    """A run waiting on a slow judge shows what it has stored: the results written last are counted without
    waiting for the next ones to arrive (the dashboard's progress bar and ETA read tasks_done)."""
    judge_server.hold_calls(after=5)  # five rows judged, then the judge keeps the run waiting
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge_config.with_(concurrency=2, timeout=60))
    th, box = in_thread(Runner(store, rid).run)
    try:
        wait_until(lambda: len(store.done_keys(rid)) == 5 and judge_server.held == 2, what="five rows stored")
        wait_until(lambda: store.get_run(rid)["tasks_done"] == 5, timeout=10, what="the five counted as done")
    finally:
        judge_server.release()
        th.join(60)
    assert box["value"] == "completed" and store.get_run(rid)["tasks_done"] == 31


def test_a_held_run_is_not_started_twice_even_if_marked_queued(judge_server, judge_config, store):
    from evaluators.core.errors import EvalError

    judge_server.hold_calls(after=2)  # the run holds on to its next two calls until the second start was refused
    rid = prepare_run(store, SINGLE, ["fluency"], judge=judge_config.with_(concurrency=2, timeout=60))
    th, box = in_thread(Runner(store, rid).run)
    try:
        wait_until(lambda: store.worker_active(rid) and judge_server.held == 2, what="the run under way")
        store.update_run(rid, status="queued")  # what a dashboard's "resume" does before spawning a worker
        with pytest.raises(EvalError, match="being executed by another worker"):
            Runner(store, rid).run()
    finally:
        judge_server.release()
        th.join(60)
    assert box["value"] == "completed" and not store.worker_active(rid)
    assert len(judge_server.calls) == 31 and len(set(judge_server.prompts())) == 31  # nobody judged a row twice
    store.clear_errors(rid)
    assert Runner(store, rid).run() == "completed"  # a finished run may be run again at once


def test_a_builtin_template_is_named_explicitly(judge_server, judge_config, store):
    from evaluators.core.errors import UsageError

    data = [{"messages": [{"role": "user", "content": "Capital of France?"},
                          {"role": "assistant", "content": "Paris.", "ground_truth": "Paris is the capital."}]}]
    with pytest.raises(UsageError, match="write builtin:relevance_turn_ground_truth.md"):
        evaluate(data, ["relevance"], judge=judge_config, store=store,
                 templates={"relevance": "relevance_turn_ground_truth.md"})
    with pytest.raises(UsageError, match="no built-in template 'nope.md'"):
        evaluate(data, ["relevance"], judge=judge_config, store=store, templates={"relevance": "builtin:nope.md"})
    evaluate(data, ["relevance"], judge=judge_config, store=store,
             templates={"relevance": "builtin:relevance_turn_ground_truth.md"})
    assert any("Ground-truth answer:\nParis is the capital." in p for p in judge_server.prompts())


def test_resume_fingerprint_follows_a_metrics_run_options():
    from evaluators.judge.config import JudgeConfig

    judge = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1")

    def spec(**options):
        return RunSpec(["wildbench_pairwise"], judge=judge, options={"wildbench_pairwise": options} if options else {})

    assert spec().fingerprint() == spec().fingerprint()
    assert spec(both_orders=True).fingerprint() != spec().fingerprint()  # judging both orders is another run
    assert spec(length_penalty=-1).fingerprint() != spec(length_penalty=500).fingerprint()


def test_the_judges_finish_reason_is_kept_with_each_verdict(judge_server, judge_config, store):
    """The SDK records each call's finish_reason in <K>_properties; a reply cut at max_tokens says
    "length" there. The server says "stop" for every reply but the one scripted to say "length"."""
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[4]["response"], Action(content='{"reason": "cut", "score": 4}',
                                                             finish_reason="length"))
    res = evaluate(SINGLE, ["fluency"], judge=judge_config, store=store)
    got = {r.row_idx: r.meta.get("finish_reason") for r in store.load_results(res.run_id)}
    assert got == {i: ("length" if i == 4 else "stop") for i in range(31)}


def test_a_judge_failing_its_check_judges_no_row(judge_server, judge_config, store):
    """No real call leaves before the judge passed its check: a wrong URL, key or model costs the one
    check call, not a round of failing calls (issue 9), however slow the check's answer."""
    from evaluators.judge.config import PROBE_PROMPT
    from evaluators.judge.client import JudgeUnavailable

    judge_server.on_prompt(PROBE_PROMPT, Action(status=404, hang=0.4))  # the check: slow, then "no such model"
    rid = prepare_run(store, SINGLE, ["fluency"], judge_config.with_(concurrency=4))
    with pytest.raises(JudgeUnavailable, match="answered 404"):
        Runner(store, rid).run()
    assert judge_server.calls == [] and len(judge_server.probes) == 1
    assert store.load_results(rid) == []
    assert store.get_run(rid)["status"] == "failed"


def test_judge_check_passing_late_keeps_every_result(judge_server, judge_config, store):
    from evaluators.judge.config import PROBE_PROMPT

    judge_server.on_prompt(PROBE_PROMPT, Action(hang=0.4))  # results come back before the check does
    res = evaluate(SINGLE, ["fluency"], judge=judge_config.with_(concurrency=8), store=store)
    assert res.status == "completed" and res.metrics["fluency.scored_rows"] == 31
    assert len(judge_server.probes) == 1 and len(judge_server.calls) == 31


def test_classic_metrics_planned_per_row_read_each_record_once(store, monkeypatch):
    """All classic metrics of a row are computed on one canonical record (not one per metric and walk)."""
    from evaluators.data.dataset import Dataset

    rid = prepare_run(store, SINGLE, ["f1_score", "bleu", "rouge"])
    calls = []
    orig = Dataset.canonical
    monkeypatch.setattr(Dataset, "canonical", lambda self, i: calls.append(i) or orig(self, i))
    assert Runner(store, rid).run() == "completed"
    assert sorted(calls) == list(range(31))  # before: 3 metrics x 2 walks = 186
    assert open_results(store, rid).metrics()["bleu.scored_rows"] == 31


class _EagerRunner(Runner):
    EAGER_WRITES = True  # as a queue worker's chunk writes (run.chunked)


@pytest.mark.parametrize("runner", [Runner, _EagerRunner], ids=["clock", "eager"])
def test_a_store_refusing_every_result_fails_the_run_with_its_error_and_never_hangs(runner, judge_server,
                                                                                      judge_config, store, tmp_path):
    """The database refuses every result (a trigger on SQLite, a check constraint on PostgreSQL: the store's own
    error, as a full disk or a lost table gives): the run ends "failed" with that error. 120 rows, 2 slots: more
    tasks than the queue holds, so when a failed write ended the slot that met it and the clock's writer
    (before), nobody judged the rest and the run hung with its feeder waiting on a full queue."""
    import json

    from sqlalchemy import text

    data = tmp_path / "many.jsonl"
    data.write_text("".join(json.dumps({"query": f"q{i}?", "response": f"answer number {i}."}) + "\n"
                            for i in range(120)), encoding="utf-8")
    import dataclasses

    rid = prepare_run(store, str(data), ["fluency"], dataclasses.replace(judge_config, concurrency=2))
    with store.engine.begin() as c:
        if store.engine.dialect.name == "sqlite":
            c.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'store full'); END"))
        else:
            c.execute(text("ALTER TABLE results ADD CONSTRAINT store_full CHECK (row_idx < 0) NOT VALID"))
    outcome: list = []

    def go():
        try:
            outcome.append(runner(store, rid).run())
        except Exception as e:  # noqa: BLE001 — what the caller sees
            outcome.append(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(60)
    assert outcome, "the run never ended"
    assert isinstance(outcome[0], Exception), outcome
    run = store.get_run(rid)
    assert run["status"] == "failed" and ("store full" in run["error"] or "store_full" in run["error"]), run["error"]
    assert store.load_results(rid) == []


def test_time_left_is_said_only_after_a_few_results():
    """The CLI said "~38 s left" for a run that took 1.7 s: its first results (the cache's, or a concurrency's
    worth after one call's latency) are no pace. By hand: 20 results of 1,000 in 2 s leave 980 x 0.1 s."""
    from evaluators.run.planning import eta_seconds

    assert eta_seconds(5, 1_000, 0.06) is None  # five cached rows at once
    assert eta_seconds(19, 1_000, 1.0) is None
    assert eta_seconds(20, 1_000, 2.0) == 98.0
    assert eta_seconds(3, 62, 1.0) is None and eta_seconds(6, 62, 1.0) == 56 / 6  # a tenth of a smaller run
    assert eta_seconds(1, 8, 1.0) == 7.0 and eta_seconds(8, 8, 1.0) is None
