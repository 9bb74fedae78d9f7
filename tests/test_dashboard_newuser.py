"""Issue 24, what a new user meets in the browser, through Streamlit's AppTest: the Datasets preview under a
remapped field, the metrics kept on New evaluation, the WildBench import on the Leaderboard page and the
wording of counts, costs, headings and disabled buttons. Each test fails without its fix. The browser's side
(wrapping, headings as drawn, the upload in Chromium) is in tests/test_newuser_browser.py."""
from __future__ import annotations

import json

import pytest

from tests.apptest import app
from tests.conftest import wait_for_run
from tests.test_dashboard_rest import sample_id

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches


def preview_of(at):
    return next(d.value for d in at.dataframe if d.value.index.name == "row")


# ---------------------------------------------------------------- 1. a remapped field beside a column of its name
def test_the_preview_follows_a_field_remapped_away_from_a_column_of_its_name(home_store):
    # a "response" column (empty on row 2) and the response the user means to score, in "answer"
    rows = [{"query": f"q{i}", "response": "" if i == 1 else f"draft {i}", "answer": f"final {i}"} for i in range(3)]
    at = app("pages/datasets.py", allow_errors=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    at.file_uploader(key="datasets.upload").set_value(("drafts.jsonl", data, "application/octet-stream")).run()
    fid = next(s.key for s in at.selectbox if s.key.endswith(".response")).rsplit(".", 2)[1]
    assert at.selectbox(key=f"datasets.map.{fid}.response").value == "response"  # detected by its name
    assert [(p["row"], p["field"]) for _, p in next(d.value for d in at.dataframe if "problem" in d.value).iterrows()] \
        == [(2, "response")]  # the empty draft on row 2 is what the check found
    at.selectbox(key=f"datasets.map.{fid}.response").set_value("answer").run()
    # the field is read from "answer"; the "response" column beside it is not read, and both show as such
    frame = preview_of(at)
    assert list(frame.columns) == ["query", "response ← answer", "response (not used)"]
    assert list(frame["response ← answer"]) == ["final 0", "final 1", "final 2"]
    assert list(frame["response (not used)"]) == ["draft 0", "", "draft 2"]
    assert list(frame.index) == [1, 2, 3]
    # and the checks read the same column: row 2's empty draft is no longer a problem
    assert any("3 rows, single shape, all checks passed" in s.value for s in at.success)
    at.button(key="datasets.save").click().run()
    saved = next(d for d in home_store.list_datasets() if d["name"] == "drafts.jsonl")
    assert home_store.get_dataset(saved["id"]).mapping == {"query": "query", "response": "answer"}


# ---------------------------------------------------------------- 2. the ticked metrics and thresholds are kept
def test_ticked_metrics_and_thresholds_are_kept_for_the_browser_session(home_store):
    app()
    did = sample_id(home_store)
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.f1_score").check().run()
    at.checkbox(key="new.metric.bleu").check().run()
    at.number_input(key="new.th.f1_score").set_value(0.7).run()
    # away to another page of the app and back, in the same tab (session)
    at.switch_page("pages/runs.py")
    at.run()
    at.switch_page("pages/new.py")
    at.query_params.update({"dataset": did})
    at.run()
    ticked = [c.key for c in at.checkbox if c.key.startswith("new.metric.") and c.value]
    assert sorted(ticked) == ["new.metric.bleu", "new.metric.f1_score"]
    assert at.number_input(key="new.th.f1_score").value == 0.7
    assert at.number_input(key="new.th.bleu").value == 0.5  # bleu's default, untouched
    # another dataset that cannot feed them (conversations, no ground truth): shown unticked, nothing chosen
    conv = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "conversation")
    at.query_params["dataset"] = conv
    at.run()
    assert at.checkbox(key="new.metric.bleu.unavailable").disabled and not at.checkbox(
        key="new.metric.bleu.unavailable").value
    assert [i.value for i in at.info] == ["Pick at least one metric."]
    at.query_params["dataset"] = did  # and back: the ticks the user made are there again
    at.run()
    assert at.checkbox(key="new.metric.bleu").value and at.number_input(key="new.th.f1_score").value == 0.7
    at.button(key="new.start").click().run()
    run = wait_for_run(home_store, home_store.list_runs()[0]["id"])
    assert sorted(run["spec"]["metrics"]) == ["bleu", "f1_score"] and run["spec"]["thresholds"]["f1_score"] == 0.7
    # a new browser session starts with nothing ticked
    fresh = app("pages/new.py", dataset=did)
    assert not [c.key for c in fresh.checkbox if c.key.startswith("new.metric.") and c.value]
