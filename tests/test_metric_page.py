"""The New metric page under AppTest: a metric built from the form, tried on 5 rows against the loopback judge
(prompt, reply, value or the reason there is none), saved as version 1 then 2, offered in New evaluation's picker."""
from __future__ import annotations

import json

import pytest

from evaluators.core import registry
from tests.apptest import app, shown_text
from tests.conftest import SINGLE

pytestmark = pytest.mark.usefixtures("fresh_caches", "forget_custom_metrics")


def _judge(at, url: str) -> None:
    at.selectbox(key="judge.provider").set_value("OpenAI-compatible base URL").run()
    at.text_input(key="judge.base_url").set_value(url).run()
    at.text_input(key="judge.model").set_value("loopback-judge").run()


def test_build_try_save_and_pick(judge_server, home_store):
    at = app()  # the home page: the bundled samples are stored
    single = next(d for d in home_store.list_datasets() if d["shape"] == "single")
    at = app("pages/metric.py", at, dataset=single["id"])
    at.text_input(key="metric.name").set_value("politeness").run()
    at.text_input(key="metric.description").set_value("How polite the answer is.").run()
    at.text_area(key="metric.rubric").set_value("1 = rude\n5 = courteous").run()
    text = at.text_area(key="metric.text").value
    assert "name: politeness" in text and "{{response}}" in text and "Property to judge: How polite" in text
    _judge(at, judge_server.url)
    # one reply the metric cannot read: said in words on its row
    second = json.loads(SINGLE.read_text().splitlines()[1])["response"]  # row 2 of the dataset tried
    judge_server.responder = lambda prompt, req: ("I would say four" if second in prompt
                                                 else json.dumps({"reason": "ok", "score": 4}))
    at.button(key="metric.try").click().run()
    shown = shown_text(at)
    assert len(judge_server.calls) == 5 and shown.count("Prompt sent to the judge") == 5
    assert "the reply could not be read: no JSON object with a 'score' in the reply" in shown
    assert "Row 1: politeness = 4" in shown and "Row 2: no value" in shown and "I would say four" in shown
    at.button(key="metric.save").click().run()
    assert "version 1" in shown_text(at) and home_store.saved_metric("politeness")["version"] == 1
    # edit the saved metric into version 2
    at.selectbox(key="metric.start").set_value("politeness (version 1)").run()
    at.text_area(key="metric.text").set_value(at.text_area(key="metric.text").value.replace("threshold: 3",
                                                                                            "threshold: 4")).run()
    at.button(key="metric.save").click().run()
    assert home_store.saved_metric_versions("politeness") == [1, 2]
    new = app("pages/new.py", at)
    assert "Your own metrics" in shown_text(new) and new.checkbox(key="new.metric.politeness") is not None


def test_a_bad_edit_is_said_not_raised(home_store):
    at = app("pages/metric.py")
    at.text_area(key="metric.text").set_value("---\nname: x\nfields: [response]\nkind: stars\n---\n{{response}}\n").run()
    assert not at.exception
    assert "the definition:4: kind: unknown kind 'stars'" in " ".join(e.value for e in at.error)


def test_a_pasted_prompty_file_is_tried_and_saved(judge_server, home_store):
    prompty = ("---\nname: Coherence\ninputs:\n  query: {type: string}\n  response: {type: string}\n---\nsystem:\n"
               "Judge how the answer holds together.\n\nuser:\nQ: {{query}}\nA: {{response}}\n"
               'Reply {"reason": "...", "score": <1-5>}\n')
    at = app("pages/metric.py")
    at.selectbox(key="metric.start").set_value("A metric file's text (paste it)").run()
    at.selectbox(key="metric.format").set_value("Prompty (.prompty)").run()
    at.text_area(key="metric.text").set_value(prompty).run()
    _judge(at, judge_server.url)
    at.button(key="metric.try").click().run()
    assert judge_server.calls[0]["messages"][0] == {"role": "system", "content": "Judge how the answer holds together."}
    at.button(key="metric.save").click().run()  # named like a built-in: said, nothing saved
    assert "'coherence' is a built-in metric's name" in " ".join(e.value for e in at.error)
    assert home_store.saved_metrics() == []
    at.text_input(key="metric.rename").set_value("my_coherence").run()
    at.button(key="metric.save").click().run()
    assert home_store.saved_metric("my_coherence")["format"] == "prompty"


def test_runs_with_file_metrics_read_in_a_dashboard_that_never_loaded_the_files(judge_server, home_store):
    from evaluators import evaluate
    from tests.conftest import ROOT

    res = evaluate(SINGLE, ["politeness", "word_count"], store=home_store,
                   judge={"model": "m", "provider": "compatible", "base_url": judge_server.url},
                   metric_files=[str(ROOT / "examples" / "metrics" / f) for f in ("politeness.md", "word_count.py")])
    for name in ("politeness", "word_count", "answer_shape"):
        registry._REGISTRY.pop(name)  # the dashboard's process knows nothing of these files
    at = app("pages/results.py", run=res.run_id)
    assert "politeness pass rate" in shown_text(at) and "word_count pass rate" in shown_text(at)
    at = app("pages/review.py", at, run=res.run_id)
    assert "No completed run with a judged metric" not in shown_text(at)




def test_a_code_metric_installed_as_a_package_runs_from_the_dashboard(home_store, tmp_path, monkeypatch, request):
    """A code metric reaches a dashboard as an installed package's entry point (no one uploads Python to a shared
    server): New evaluation offers it, its worker computes it, the Results page reads it."""
    import os
    import sys

    from evaluators.metrics.custom import register_entry_points
    from tests.conftest import start_queue_worker, stop_queue_worker, wait_for_run

    (tmp_path / "acme_shout.py").write_text(
        "from evaluators import metric\n\n@metric(name='shouting', fields=['response'], threshold=0.2,"
        " higher_is_better=False)\ndef shouting(row):\n    t = row['response']\n"
        "    return sum(c.isupper() for c in t) / max(1, sum(c.isalpha() for c in t))\n")
    info = tmp_path / "acme_shout-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-shout\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[evaluators.metrics]\nshouting = acme_shout:shouting\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # installed for this process (the dashboard) ...
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # ... and for the worker it starts
    worker = start_queue_worker(os.environ.get("EVAL_DATABASE_URL", ""))  # (PostgreSQL: the queue's, installed too)
    request.addfinalizer(lambda: stop_queue_worker(worker))
    register_entry_points()
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.shouting").check().run()
    at.button(key="new.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    rid = home_store.list_runs()[0]["id"]
    assert wait_for_run(home_store, rid)["status"] == "completed"
    ds = home_store.get_dataset(did)
    got = {r.row_idx: r.value for r in home_store.load_results(rid)}
    for i, rec in enumerate(ds.records):  # by hand: capitals over letters of each stored response
        t = rec[ds.mapping["response"]]
        assert got[i] == pytest.approx(sum(c.isupper() for c in t) / max(1, sum(c.isalpha() for c in t)))
    assert "shouting pass rate" in shown_text(app("pages/results.py", run=rid))
    sys.modules.pop("acme_shout", None)


def test_a_yes_no_metric_passes_on_its_answer_not_at_a_number(home_store):
    """Issue 35: a labels metric showed a numeric 'Passes at 0.00' field. Its rule is said in its answers: a row
    passes when the judge answers no; a score keeps its number."""
    at = app("pages/metric.py")
    at.text_input(key="metric.name").set_value("leaks_data").run()
    assert at.number_input(key="metric.threshold.1-5").label == "Passes at"  # 1-5: a number
    assert at.number_input(key="metric.threshold.1-5").value == 3.0
    assert "score, 1-5, passes ≥ 3" in shown_text(at)
    at.selectbox(key="metric.scale").set_value("labels").run()
    assert [n.label for n in at.number_input if n.label == "Passes at"] == []
    answer = at.radio(key="metric.threshold.labels")
    assert answer.label == "A row passes when the judge answers" and answer.value == "no (false): not found"
    assert "leaks_data: yes/no, a row passes when the judge answers no (not found)" in shown_text(at)
    assert "0.00" not in shown_text(at) and "≤ 0" not in shown_text(at)
