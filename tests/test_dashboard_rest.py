"""Home, run status, judge settings, retry with another judge, dataset pages: AppTest on a real
SQLite store, with the loopback judge server."""
from __future__ import annotations

import datetime as dt

import pytest

from evaluators import JudgeConfig, Store, evaluate
from evaluators.read.results import open_results
from evaluators.api import prepare_run
from evaluators.store.schema import Result, utcnow
from tests.conftest import SINGLE, TYPED_KEY_REASON, wait_for_run
from tests import apptest

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches


def app(page: str | None = None, at=None, **params):
    return apptest.app(page, at, allow_errors=True, **params)  # these pages are expected to show errors


def shown(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "text", "info", "success", "error", "warning", "code")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def sample_id(store: Store) -> str:
    return next(d["id"] for d in store.list_datasets() if d["name"] == "rag_single_turn.jsonl")


# ---------------------------------------------------------------- home
@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_home_says_what_it_does_and_a_sample_is_one_click_from_a_result(home_store):
    at = app()
    text = shown(at)
    assert "Score what your LLM application answered" in text
    for step in ("1 · Dataset", "2 · Evaluation", "3 · Results"):
        assert step in text
    assert {p.proto.page for p in at.get("page_link")} >= {"datasets", "new", "runs"}
    at.button(key="home.sample").click().run()
    assert not at.exception and not at.error
    run = home_store.list_runs()[0]
    assert run["spec"]["metrics"] == ["f1_score", "bleu", "rouge"] and run["spec"]["judge"] is None
    assert wait_for_run(home_store, run["id"])["status"] == "completed"
    # the same numbers as the same metrics computed by the Python API on the sample file
    direct = evaluate(SINGLE, ["f1_score", "bleu", "rouge"], store=home_store).results.metrics()
    assert open_results(home_store, run["id"]).metrics() == direct
    assert direct["f1_score.scored_rows"] == 31


# ---------------------------------------------------------------- run status
def _active_run(store: Store, judged: bool = True) -> str:
    """A run as its worker leaves it mid-way: classic metric done, the judge not answered yet."""
    judge = JudgeConfig(model="nobody", provider="compatible", base_url="http://127.0.0.1:9/v1")
    metrics = ["f1_score", "coherence"] if judged else ["f1_score"]
    rid = prepare_run(store, f"ds:{sample_id(store)}", metrics, judge if judged else None)
    store.write_results(rid, [Result(i, "f1_score", 0, "ok", value=0.5) for i in range(31)])
    if judged:
        store.write_results(rid, [Result(0, "coherence", 0, "error", error="HTTP 503: the judge is down for maintenance")])
    store.update_run(rid, status="running", started_at=utcnow() - dt.timedelta(seconds=60), heartbeat_at=utcnow(),
                     tasks_total=62 if judged else 31, tasks_done=31, tasks_errored=1 if judged else 0, judge_calls=4)
    return rid


def _bar(at) -> str:
    bars = at.get("progress")
    assert bars, "no progress bar"
    return bars[0].proto.text


def test_no_time_left_is_promised_while_the_judge_has_answered_nothing(home_store):
    app()
    rid = _active_run(home_store)
    at = app("pages/results.py", run=rid)
    bar = _bar(at)
    assert bar.startswith("running: 32/62 scored · 1 errored · no judged result yet (4 judge calls made)")
    assert "left" not in bar  # the classic metric's 31 rows in a moment say nothing of the judge's pace
    assert "HTTP 503: the judge is down for maintenance" in shown(at)


def test_time_left_comes_from_judged_results(home_store):
    from ui.widgets import progress_text

    run = dict(status="running", tasks_total=62, tasks_done=41, tasks_errored=0, judge_calls=10,
               started_at=utcnow() - dt.timedelta(seconds=50), rate_limited_until=None)
    text, note = progress_text(run, {"ok": 10}, None)
    # 21 tasks left at 10 judged results in 50 s: 105 s (the 31 classic results are not a judge's pace)
    assert text.endswith("about 105 s left") and note is None
    text, _ = progress_text(dict(run, tasks_done=31), None, None)  # no judge: the pace of everything done
    assert text.endswith(f"about {31 * 50 / 31:.0f} s left")


def test_run_picker_and_bar_say_the_same_state(home_store):
    app()
    rid = _active_run(home_store, judged=False)
    home_store.update_run(rid, status="queued")
    at = app("pages/results.py", run=rid)
    [label] = at.selectbox[0].options  # the only run
    assert " · queued · " in label
    home_store.update_run(rid, status="running", heartbeat_at=utcnow())  # the worker took it
    at = app("pages/results.py", run=rid)  # within the run list's cache time (2 s), so the list still says queued
    [label] = at.selectbox[0].options
    assert " · running · " in label and _bar(at).startswith("running:")


def test_a_run_whose_judge_never_answered_ends_failed_on_the_page(home_store):
    app()
    judge = JudgeConfig(model="nobody", provider="compatible", base_url="http://127.0.0.1:9/v1", max_retries=0,
                        timeout=2)
    try:
        evaluate(SINGLE, ["coherence"], judge=judge, store=home_store)
    except Exception:  # noqa: BLE001 — the judge check refuses; the stored run says why
        pass
    run = home_store.list_runs()[0]
    assert run["status"] == "failed"
    at = app("pages/results.py", run=run["id"])
    assert any("The run failed" in e.value for e in at.error)
    assert "127.0.0.1:9" in shown(at)
    [label] = at.selectbox[0].options
    assert " · failed · " in label


def test_cost_only_when_a_judge_is_used(home_store):
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.f1_score").check().run()
    assert not any(m.label.startswith("Cost") for m in at.metric)
    assert "no judge calls and no cost" in shown(at)
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input("http://127.0.0.1:9/v1")
    at.text_input(key="judge.model").input("some-model").run()
    assert any(m.label == "Cost (est., USD)" and m.value.startswith("$") for m in at.metric)


# ---------------------------------------------------------------- judge settings
def test_judge_form_starts_empty_and_tests_the_connection(home_store, judge_server):
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.coherence").check().run()
    assert at.text_input(key="judge.model").value == "" and at.text_input(key="judge.base_url").value == ""
    assert not [b for b in at.button if b.key == "new.start"]  # nothing to start until the judge is named
    assert "Give the model and the base URL of the judge." in shown(at)
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback").run()
    at.button(key="judge.test").click().run()
    assert len(judge_server.probes) == 1 and not judge_server.calls  # one call, not a run
    assert any("The judge answered" in s.value and judge_server.url in s.value for s in at.success)


def test_connection_test_shows_the_exact_error_never_the_key(home_store, judge_server):
    judge_server.require_key = "right-key"
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.text_input(key="judge_api_key").input("sk-wrong-key-0123456789").run()
    at.button(key="judge.test").click().run()
    errors = " ".join(e.value for e in at.error)
    assert "refused the key (HTTP 401)" in errors and judge_server.url in errors
    assert "0123456789" not in shown(at) and "wrong-key" not in shown(at)




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_retry_with_another_judge_is_recorded_with_the_run(home_store, judge_server):
    from tests.test_dashboard_pages import run_with_an_errored_row

    app()
    rid = run_with_an_errored_row(home_store, judge_server)
    at = app("pages/results.py", run=rid, view="Errors")
    at.toggle(key="retry.change").set_value(True).run()
    assert at.text_input(key="retry.model").value == "loopback"  # starts from the run's judge
    assert at.text_input(key="retry.base_url").value == judge_server.url
    at.text_input(key="retry.model").input("loopback-2").run()
    judge_server.by_prompt.clear()
    at.button(key="retry").click().run()
    assert not at.exception
    run = wait_for_run(home_store, rid)
    assert run["status"] == "completed"
    assert run["spec"]["judge"]["model"] == "loopback-2"
    history = run["spec"]["judge_history"]
    assert [h["judge"]["model"] for h in history] == ["loopback"] and history[0]["errored_results_left"] == 1
    res = open_results(home_store, rid)
    assert res.metrics()["fluency.errored_rows"] == 0
    models = [c.turns[0].meta["model"] for c in res.cells["fluency"]]
    assert models[4] == "loopback-2" and set(models[:4] + models[5:]) == {"loopback"}  # who judged which row
    assert [c["model"] for c in judge_server.calls[-1:]] == ["loopback-2"]


# ---------------------------------------------------------------- datasets and empty pages
def test_dataset_mapping_reads_as_a_table(home_store):
    app()
    at = app("pages/datasets.py", dataset=sample_id(home_store))
    mapping = at.table[0].value
    ds = home_store.get_dataset(sample_id(home_store))
    from ui.widgets import plain  # (st.table renders Markdown: its cells are escaped text)

    assert dict(zip(mapping["Field"], mapping["Column"])) == {plain(f): plain(c) for f, c in ds.mapping.items()}
    assert not any("{" in m.value for m in at.markdown)  # no raw dict


@pytest.mark.parametrize("page, says", [
    ("pages/leaderboard.py", "run wildbench_score or wildbench_pairwise"),
    ("pages/pairwise.py", "pick wildbench_pairwise"),
    ("pages/attacks.py", "run hate_unfairness, sexual, violence or self_harm"),
])
def test_empty_pages_say_what_to_run(home_store, page, says):
    at = app(page)
    assert any(says in i.value for i in at.info)




@pytest.mark.sqlite_only(TYPED_KEY_REASON)
def test_a_retry_sent_elsewhere_does_not_carry_the_key_typed_for_the_first_judge(home_store, judge_server):
    from tests.judge_server import Action, JudgeServer
    from evaluators.data.loading import load_dataset

    secret = "typed-for-the-first-judge-only"
    judge_server.require_key = secret
    app()
    bad = load_dataset(SINGLE).records[2]["response"]
    judge_server.on_prompt(bad, *[Action(status=500)] * 10)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url, max_retries=1,
                        backoff_base=0.01)
    rid = evaluate(SINGLE, ["fluency"], judge=judge, store=home_store, api_key=secret).run_id
    with JudgeServer() as elsewhere:
        at = app("pages/results.py", run=rid, view="Errors")
        at.session_state["judge_api_key"] = secret  # typed on New evaluation earlier in this session
        at.toggle(key="retry.change").set_value(True).run()
        at.text_input(key="retry.base_url").input(elsewhere.url).run()
        at.button(key="retry").click().run()
        assert wait_for_run(home_store, rid)["status"] == "completed"
        assert len(elsewhere.calls) == 1
        assert not any(secret in (c["_auth"] or "") for c in elsewhere.calls + elsewhere.probes)
    assert home_store.get_run(rid)["spec"]["judge"]["base_url"] == elsewhere.url


def test_start_waits_after_a_failed_connection_test_and_the_test_is_where_it_will_be(home_store, judge_server):
    judge_server.require_key = "right-key"
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.coherence").check().run()
    assert at.button(key="judge.test").disabled  # shown before the model and URL are given, not yet usable
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.text_input(key="judge_api_key").input("sk-wrong-key-0123456789").run()
    assert not at.button(key="new.start").disabled
    at.button(key="judge.test").click().run()
    assert at.button(key="new.start").disabled and "did not answer the connection test" in shown(at)
    at.text_input(key="judge_api_key").input("right-key").run()  # other settings: Start again
    assert not at.button(key="new.start").disabled
    at.button(key="judge.test").click().run()
    assert "The judge answered" in shown(at) and not at.button(key="new.start").disabled
