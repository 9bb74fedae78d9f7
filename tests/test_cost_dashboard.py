"""The dashboard's side of cost: prices, Batch API and budget on New evaluation; the run's cost, cached share
and batches on Results; a run stopped at its budget resumed there with a higher one (AppTest, real workers)."""
from __future__ import annotations

import pytest

from evaluators.api import prepare_run
from evaluators.judge.config import JudgeConfig
from evaluators.run.runner import Runner
from tests.apptest import app, shown_text
from tests.conftest import SINGLE, wait_for_run
from tests.test_cost import PRICE, by_hand

pytestmark = pytest.mark.usefixtures("fresh_caches")




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_batch_run_started_from_the_dashboard_shows_its_cost_and_batch(home_store, judge_server, monkeypatch):
    monkeypatch.setenv("EVAL_BATCH_POLL", "0.05")  # (passed to the worker)
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.coherence").check()
    at.run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("gpt-4o-mini")
    at.run()
    for key, value in (("price.in", 2.0), ("price.cached", 0.5), ("price.out", 8.0)):
        at.number_input(key=key).set_value(value)
    at.checkbox(key="new.batch").check()
    at.run()
    assert "Batch: half price, results within 24 h" in [c.label for c in at.checkbox]
    assert any(m.label == "Time (est.)" and m.value == "within 24 h" for m in at.metric)
    at.button(key="new.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    rid = home_store.list_runs()[0]["id"]
    assert wait_for_run(home_store, rid)["status"] == "completed"
    spec = home_store.get_run(rid)["spec"]
    assert spec["batch"] and spec["prices"]["gpt-4o-mini"] == PRICE and spec["estimate"]["usd"] > 0
    assert len(judge_server.requests) == 0 and len(judge_server.batch_api.created) == 1
    at = app("pages/results.py", run=rid)
    text = shown_text(at)
    assert f"Cost: ${by_hand(judge_server.usages, batch=True):,.4f} · Batch API" in text
    assert "(round 1): collected, 31 of 31 done, 0 failed" in text




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_budget_stop_resumed_from_the_results_page(home_store, judge_server):
    app()
    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=0,
                        concurrency=1)
    rid = prepare_run(home_store, SINGLE, ["coherence"], judge,
                      cost={"prices": {"gpt-4o-mini": PRICE}, "budget": 0.005})
    assert Runner(home_store, rid).run() == "stopped"
    at = app("pages/results.py", run=rid)
    assert "The run stopped before exceeding its budget" in at.warning[0].value
    assert at.code[0].value.startswith("budget: the next call would have taken the run past its budget of $0.0050")
    at.number_input(key="resume.budget").set_value(1.0)
    at.button(key="resume.raised").click().run()
    assert wait_for_run(home_store, rid)["status"] == "completed"
    assert home_store.get_run(rid)["spec"]["budget"] == 1.0
    prompts = judge_server.prompts()
    assert len(prompts) == 31 == len(set(prompts))  # nothing answered before was asked again


def test_the_estimate_follows_a_newer_saved_version_of_a_metric(home_store, judge_server):
    """New evaluation's estimate was keyed by the metric's name and settings, not its saved version: after a
    longer version 2 was saved it still said version 1's prompt tokens. Each figure equals the engine's own
    estimate (api.estimate_run) of the version the picker holds at that moment."""
    from evaluators.api import estimate_run
    from evaluators.core import registry
    from evaluators.run.spec import RunSpec
    from tests.test_hostile_browser import metric_file
    from ui import loaders

    app()  # the bundled samples
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url)
    spec = RunSpec(["hostile_tone"], {}, judge)
    text = metric_file("Tone of the answer.")
    figures = []
    try:
        for version, extra in ((1, ""), (2, " Read every sentence of the answer twice before you judge it." * 20)):
            saved = home_store.save_metric(text.replace("{{response}}", extra + "{{response}}"), "template")
            assert saved["version"] == version
            loaders._saved_metrics.clear()  # (cached 2 s: a page drawn later reads the new version)
            loaders.saved_metrics()
            got = loaders.estimate(did, spec, wait=60)
            assert got["prompt_tokens"] == estimate_run(home_store, loaders.dataset(did), spec)["prompt_tokens"]
            figures.append(got["prompt_tokens"])
    finally:
        registry._REGISTRY.pop("hostile_tone", None)
    assert figures[1] > figures[0]
