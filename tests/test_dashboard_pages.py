"""Each dashboard page through Streamlit's AppTest, on a real SQLite store and the loopback judge."""
from __future__ import annotations

import re

import pytest

from evaluators import JudgeConfig, Store, evaluate
from evaluators.read.results import open_results
from tests.conftest import CONVERSATIONS, DETACHED_WORKER, SINGLE, wait_for_run
from tests.apptest import app

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches


def test_first_start_has_the_samples_and_no_runs(home_store):
    at = app("pages/runs.py")
    assert "No runs yet" in at.info[0].value
    names = {d["name"] for d in home_store.list_datasets()}
    assert names == {"rag_single_turn.jsonl", "support_conversations.jsonl", "agent_trips.jsonl"}


def test_datasets_page_lists_and_previews(home_store):
    at = app("pages/datasets.py")
    table = at.dataframe[0].value
    assert set(table["name"]) == {"rag_single_turn.jsonl", "support_conversations.jsonl", "agent_trips.jsonl"}
    assert set(table["rows"]) == {31, 20, 8}
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "conversation")
    at = app("pages/datasets.py", dataset=did)
    assert any("20 rows · conversation" in m.value for m in at.markdown)




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_new_run_gates_metrics_estimates_and_starts(home_store, judge_server):
    app()  # seeds the samples
    conv = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "conversation")
    assert app("pages/new.py", dataset=conv).checkbox(key="new.metric.bleu.unavailable").disabled  # single-turn only
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = app("pages/new.py", dataset=did)
    assert not at.checkbox(key="new.metric.retrieval").disabled  # query + context, as in SDK 1.18
    at.checkbox(key="new.metric.coherence").check()
    at.checkbox(key="new.metric.bleu").check()
    at.run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Judge calls"] == "31"
    at.button(key="new.start").click().run()
    run = home_store.list_runs()[0]
    assert run["spec"]["metrics"] == ["coherence", "bleu"]
    assert wait_for_run(home_store, run["id"])["status"] == "completed"
    assert len(judge_server.calls) == 31
    # the same choice again: everything is in the cache now
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.run()
    assert at.metric[0].value == "0" and "31 more answered from the cache" in at.metric[0].help


@pytest.fixture
def finished_run(home_store, judge_server):
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    app()  # seeds the samples
    return evaluate(SINGLE, ["coherence", "f1_score"], judge=judge, store=home_store).run_id


def test_results_page_reads_thresholds_filters_and_row_from_the_url(home_store, finished_run):
    res = open_results(home_store, finished_run, {"coherence": 4})
    rate = res.summary(res.specs[0])["pass_rate"]
    at = app("pages/results.py", run=finished_run, **{"th.coherence": "4"}, verdict="fail", metric="coherence", row="3", view="Rows")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Rows"] == "31" and metrics["Coherence pass rate"] == f"{rate:.0%}"
    failing = sum(1 for c in res.cells["coherence"] if not res.passed(res.specs[0], c))
    rows = at.dataframe[0].value
    assert len(rows) == failing and set(rows["coherence verdict"]) == {"fail"}
    reason = res.cells["coherence"][2].reason
    assert any(t.value == reason for t in at.text)  # the detail pane of row 3, as text
    assert not any(reason in m.value for m in at.markdown)  # ...never through Markdown
    assert any(e.label.startswith("coherence:") for e in at.expander)


def run_with_an_errored_row(store, judge_server) -> str:
    """A fluency run of the sample whose fifth row errored (the judge answers it only with HTTP 500)."""
    from tests.judge_server import Action
    from evaluators.data.loading import load_dataset

    bad = load_dataset(SINGLE).records[4]["response"]
    judge_server.on_prompt(bad, *[Action(status=500)] * 10)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, max_retries=1,
                        backoff_base=0.01)
    return evaluate(SINGLE, ["fluency"], judge=judge, store=store).run_id




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_results_page_errors_tab_offers_retry(home_store, judge_server):
    app()
    rid = run_with_an_errored_row(home_store, judge_server)
    at = app("pages/results.py", run=rid, view="Errors")
    assert {m.label: m.value for m in at.metric}["Errored rows"] == "1"
    errors = at.dataframe[-1].value if len(at.dataframe) else None
    assert errors is not None and list(errors["row"]) == [5] and "HTTP 500" in errors["error"][0]
    at.button(key="retry").click().run()
    judge_server.by_prompt.clear()
    run = wait_for_run(home_store, rid)
    assert run["status"] == "completed"
    assert open_results(home_store, rid).metrics()["fluency.errored_rows"] == 0


def test_compare_page_shows_deltas_and_changed_rows(home_store, judge_server):
    from evaluators.read.compare import metric_deltas

    app()
    a = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"f1_score": 0.5}).run_id
    b = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"f1_score": 0.7}).run_id
    at = app("pages/compare.py", base=a, runs=b)
    deltas = at.table[0].value
    f1 = deltas[deltas["Metric"] == "f1_score"].iloc[0]
    base, other = open_results(home_store, a), open_results(home_store, b)
    assert f1["Δ mean"] == "0"
    expected = other.summary(other.specs[0])["pass_rate"] - base.summary(base.specs[0])["pass_rate"]
    assert f1["Δ pass rate"] == f"{expected:+.1%}"
    changed = metric_deltas(base, other)[0]["changed"]
    assert int(f1["Regressed rows"]) > 0 and f1["Improved rows"] == "0"
    rows = at.dataframe[0].value
    assert len(rows) == 31
    # verdict cells coloured as on the Results page: one red cell per failing verdict, one green per passing
    css = at.dataframe[0].proto.arrow_data.styler.styles  # "sel1, sel2 { background-color: ... }" per style
    cells = {rule.split("{")[1]: rule.split("{")[0].count("_row") for rule in css.split("}") if "{" in rule}
    verdicts = rows[[c for c in rows.columns if c.endswith(" verdict")]].to_numpy().ravel().tolist()
    red = sum(n for style, n in cells.items() if "#ffebee" in style)
    green = sum(n for style, n in cells.items() if "#e8f5e9" in style)
    assert red == verdicts.count("fail") > 0 and green == verdicts.count("pass") > 0
    at = app("pages/compare.py", base=a, runs=b, diff="true")
    assert len(at.dataframe[0].value) == changed


def test_conversation_results_page(home_store, judge_server):
    app()
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = evaluate(CONVERSATIONS, ["groundedness"], judge=judge, store=home_store).run_id
    at = app("pages/results.py", run=rid, row="15", view="Rows")
    assert any("turn 1: skipped" in c.value for c in at.caption)  # the greeting turn has no citations
    assert len(at.chat_message) == 5  # system, user, assistant, user, assistant


def _start_from_dashboard(home_store, judge_server, metrics, concurrency=8, dataset_shape="single") -> str:
    """Start a run the way a user does: New evaluation page, loopback judge, Start; returns the run id."""
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == dataset_shape)
    at = app("pages/new.py", dataset=did)
    for m in metrics:
        at.checkbox(key=f"new.metric.{m}").check()
    at.run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.number_input(key="judge.concurrency").set_value(concurrency)
    at.run()
    at.button(key="new.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return home_store.list_runs()[0]["id"]


@pytest.mark.skipif(not __import__("pathlib").Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
@pytest.mark.sqlite_only(DETACHED_WORKER)
def test_sigkilled_worker_resumed_from_the_dashboard_equals_an_uninterrupted_run(home_store, judge_server, tmp_path,
                                                                                  new_store_url):
    import os
    import signal

    from evaluators.run.workers import worker_stopped
    from tests.procs import wait_for_worker, wait_until

    judge_server.latency = 0.03
    rid = _start_from_dashboard(home_store, judge_server, ["coherence", "fluency"], concurrency=2)
    pid = wait_for_worker(rid)
    wait_until(lambda: home_store.get_run(rid)["tasks_done"] >= 15, what="15 results")
    os.kill(pid, signal.SIGKILL)
    try:  # it is this process's child (AppTest runs the page here): reaped here or by its reaper thread
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    calls_at_kill, stored_at_kill = len(judge_server.calls), len(home_store.load_results(rid))
    assert 0 < stored_at_kill < 62 and home_store.get_run(rid)["status"] == "running"
    wait_until(lambda: worker_stopped(home_store.get_run(rid)), timeout=10, what="the dashboard to see the worker gone")
    at = app("pages/results.py", run=rid)
    assert any("worker stopped" in w.value for w in at.warning)
    at.button(key="resume").click().run()
    assert wait_for_run(home_store, rid)["status"] == "completed"
    # every row judged once, plus only the calls that were in flight or unwritten at the kill
    assert len(judge_server.calls) == calls_at_kill + (62 - stored_at_kill)
    got = {(r.row_idx, r.metric, r.turn): r for r in home_store.load_results(rid)}
    ref_store = Store(new_store_url("reference"))
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    ref = {(r.row_idx, r.metric, r.turn): r for r in
           ref_store.load_results(evaluate(SINGLE, ["coherence", "fluency"], judge=judge, store=ref_store).run_id)}
    assert set(got) == set(ref) and len(got) == 62
    for k, r in got.items():  # whole results: value, outputs, reasoning and raw reply all there
        assert (r.status, r.value, r.outputs, r.reason, r.raw) == (ref[k].status, ref[k].value, ref[k].outputs,
                                                                   ref[k].reason, ref[k].raw), k
    with home_store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"


def test_rows_the_sdk_tokenizer_cannot_compare_are_flagged_in_results_and_the_page(home_store):
    rows = [{"response": "東京は日本の首都です。", "ground_truth": "東京は首都です。"},
            {"response": "Paris is the capital of France.", "ground_truth": "The capital of France is Paris."}]
    res = evaluate(rows, ["rouge"], store=home_store)
    out = res.rows
    note = out["outputs.rouge.rouge_note"]
    assert "rouge_unicode" in note[0] and note.isna()[1]  # only the Japanese row, pointing to the option
    assert res.metrics["rouge.noted_rows"] == 1
    at = app("pages/results.py", run=res.run_id)  # the Metrics tab: the metric's warning
    assert any(w.value.startswith("rouge: 1 row flagged") and "rouge_unicode" in w.value for w in at.warning)
    at = app("pages/results.py", run=res.run_id, row="1", view="Rows")  # the row's own note in its detail
    assert any("rouge_unicode" in w.value and "flagged" not in w.value for w in at.warning)


def test_compare_sees_a_run_that_completed_within_the_list_cache(home_store, finished_run):
    """A run listed as running a moment ago and completed since is comparable at once (the walk test
    met "Two completed runs are needed" for the 2 s the run list is cached)."""
    second = evaluate(SINGLE, ["f1_score"], store=home_store).run_id
    home_store.update_run(second, status="running")
    at = app("pages/compare.py", base=finished_run)  # the run list is cached with the second run running
    home_store.update_run(second, status="completed")
    at.run()  # the same session, well within the list's 2 s
    assert not any("Two completed runs" in i.value for i in at.info)
    assert [m.label for m in at.multiselect] == ["Compare with"]


def test_runs_page_lists_50_runs_a_page_newest_first_and_filters(home_store):
    from tests.test_results_page import known_results, stored_run

    app()
    ids = []
    for k in range(52):
        ids.append(stored_run(home_store, known_results()))
        home_store.update_run(ids[-1], name=f"nightly {k:02d}" if k % 2 else f"weekly {k:02d}")
    from ui import loaders
    loaders.forget_lists()

    def listed(at):
        frame = at.dataframe[0].value
        return list(zip(frame["name"], frame["id"]))

    at = app("pages/runs.py")
    shown = listed(at)
    assert [name for name, _ in shown] == [f"{'nightly' if k % 2 else 'weekly'} {k:02d}" for k in range(51, 1, -1)]
    assert [rid for _, rid in shown] == ids[51:1:-1]
    assert "Page 1 of 2" in [c.value for c in at.caption]
    assert [p.proto.popover.label for p in at.get("popover")] == ["Filter"]  # no filter in use
    at = app("pages/runs.py", page="2")
    assert listed(at) == [("nightly 01", ids[1]), ("weekly 00", ids[0])]
    at = app("pages/runs.py", q="NIGHTLY")  # any case; 26 of 52, one page
    assert [name for name, _ in listed(at)] == [f"nightly {k:02d}" for k in range(51, 0, -2)]
    assert any(c.value.startswith("26 of 52 runs") for c in at.caption) and not any("Page" in c.value for c in at.caption)
    assert [p.proto.popover.label for p in at.get("popover")] == ["Filter: ` NIGHTLY `"]  # the filter in use
    at.text_input(key="q").input("weekly").run()  # typed: the button names it in the rerun the change makes
    assert [p.proto.popover.label for p in at.get("popover")] == ["Filter: ` weekly `"]
    assert [name for name, _ in listed(at)] == [f"weekly {k:02d}" for k in range(50, -1, -2)]
