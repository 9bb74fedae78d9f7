"""Issue 35, "Ways forward", in Debian's headless Chromium: a flow that ended in a dead end now offers the next
step. One dashboard for the module (each page load costs ~2 s); the loopback judge server answers."""
from __future__ import annotations

import pytest

from evaluators import JudgeConfig, evaluate
from evaluators.judge.client import JudgeUnavailable
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT, SINGLE
from tests.procs import wait_until

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium
NOWHERE = "http://127.0.0.1:9/v1"  # the discard port: nothing answers


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    home = tmp_path_factory.mktemp("ways-browser") / "evalhome"
    yield from served(home)


def test_a_failed_run_offers_another_judge_and_its_errors_tab_says_why(dash, browser, judge_server):
    """A run whose judge was unreachable offered only "Resume run" (the same broken URL) and its Errors tab said
    "No errored rows" in green. Now the Errors tab says why it failed, and under the error the judge is changed
    and the same run runs again to the end with the new one."""
    url, store = dash
    broken = JudgeConfig(model="m", provider="compatible", base_url=NOWHERE, max_retries=1, backoff_base=0.01)
    with pytest.raises(JudgeUnavailable):
        evaluate(SINGLE, ["coherence"], judge=broken, store=store)
    rid = store.list_runs()[0]["id"]
    assert store.get_run(rid)["status"] == "failed"
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/results?run={rid}&view=Errors")
    settle(page, "The run failed before its rows were judged")
    assert page.get_by_text("No errored rows").count() == 0
    page.locator('[data-testid="stCode"]').get_by_text("cannot reach the judge at").wait_for()  # under the error
    page.get_by_test_id("stAlertContentWarning").get_by_text("cannot reach the judge at").wait_for()  # and the tab
    page.get_by_test_id("stWidgetLabel").get_by_text("Change the judge and run again").click()
    settle(page, "Base URL")
    screenshot(page, SHOTS, "failed-run-other-judge")  # the failure, why, and the judge to change
    assert page.get_by_role("textbox", name="Base URL").input_value() == NOWHERE  # starts from the run's judge
    page.get_by_role("textbox", name="Base URL").fill(judge_server.url)
    page.get_by_role("textbox", name="Base URL").press("Enter")
    page.get_by_role("button", name="Run again with these judge settings").click()
    wait_until(lambda: store.get_run(rid)["status"] == "completed", 90, "the run run again to its end")
    run = store.get_run(rid)
    assert run["spec"]["judge"]["base_url"] == judge_server.url and run["tasks_done"] == 31
    assert [h["judge"]["base_url"] for h in run["spec"]["judge_history"]] == [NOWHERE]
    assert len(judge_server.calls) == 31


def test_test_connection_says_the_likely_cause_and_start_waits_for_every_failed_setting(dash, browser):
    """'HTTP 405 Method Not Allowed' for a base URL without /v1 now says the likely cause; Start, blocked after a
    failed test, was enabled again by going back to an earlier failed URL (only the last failure was kept)."""
    from evaluators.data.loading import load_dataset
    from tests.test_judge import root_only_server

    url, store = dash
    did = store.save_dataset(load_dataset(SINGLE))
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    page.goto(f"{url}/new?dataset={did}")
    settle(page, "coherence")
    page.get_by_test_id("stCheckbox").get_by_text("Coherence", exact=True).click()
    settle(page, "Give the model and the base URL of the judge.")
    start = page.get_by_role("button", name="Start evaluation")
    model, base = (page.get_by_role("textbox", name=n) for n in ("Model (Azure: deployment)", "Base URL"))
    model.fill("m")
    model.press("Tab")

    def test(base_url: str, cause: str) -> None:
        base.fill(base_url)
        base.press("Enter")
        start.wait_for()  # the settings are complete: the page reaches Start
        settle(page)
        page.get_by_role("button", name="Test connection").click()
        settle(page, cause)
        assert start.is_disabled()

    with root_only_server() as root:
        test(root, "is the base URL missing /v1?")
        test(NOWHERE, "Is the server running, at this address and port?")
        screenshot(page, SHOTS, "test-connection-likely-cause")
        base.fill(root)  # back to the first failed URL
        base.press("Enter")
        page.get_by_text("Is the server running").wait_for(state="detached")  # the page drawn for this URL
        settle(page)
        assert start.is_disabled()  # enabled before: only the last failure was remembered
        page.get_by_text("did not answer the connection test with these settings").wait_for()


def test_bad_rows_can_be_left_out_and_near_misses_and_missing_answers_are_said(dash, browser, tmp_path):
    """One bad row blocked the whole upload: now 'Leave out these 2 rows and save' stores the others, the dataset
    saying which file rows it is without. A near-miss column (reponse) is suggested; an OpenAI Evals file with input
    and ideal but no answers is read as questions only, saying a model can answer them; long problems wrap."""
    import json

    url, store = dash
    lines = [json.dumps({"query": f"question {k}", "response": f"answer {k}"}) for k in range(1, 32)]
    lines[2] = json.dumps({"query": "question 3", "response": {"not": "text"}})
    lines[6] = '{"query": "question 7", broken'
    upload = tmp_path / "two-bad-rows.jsonl"
    upload.write_text("\n".join(lines) + "\n")
    page = browser.new_page(viewport={"width": 1280, "height": 1200})
    page.goto(f"{url}/datasets")
    settle(page, "Upload JSONL")
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    dropzone.set_input_files(str(upload))
    settle(page, "2 problems found; nothing was saved.")
    grid = page.locator('[data-testid="stDataFrame"]').filter(has=page.locator('th', has_text="problem"))
    # rows tall enough for Streamlit's grid to wrap a problem (it wraps only in rows over 4rem): polled, as the grid
    # sizes itself after its first frame (107 px without, 2 rows of 35 under the header)
    grid.element_handle().wait_for_element_state("stable")
    page.wait_for_function("el => el.getBoundingClientRect().height >= 35 + 2 * 64", arg=grid.element_handle(),
                           timeout=30_000)
    grid.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    grid.screenshot(path=str(SHOTS / "datasets-problems-wrap.png"))
    page.get_by_text("stored without rows 3 and 7 of the file").wait_for()
    page.get_by_role("button", name="Leave out these 2 rows and save").click()
    settle(page)  # ("New evaluation" is in the sidebar from the start: the save is waited for in the store itself)
    wait_until(lambda: any(d["name"].startswith("two-bad-rows.jsonl") for d in store.list_datasets()), timeout=60,
               what="the dataset saved without its two bad rows")
    [saved] = [d for d in store.list_datasets() if d["name"].startswith("two-bad-rows.jsonl")]
    ds = store.get_dataset(saved["id"])
    assert ds.source == ds.name == "two-bad-rows.jsonl without rows 3 and 7"
    assert len(ds) == 29 and list(ds.row_numbers) == [n for n in range(1, 32) if n not in (3, 7)]
    assert [r["query"] for r in ds.records[:3]] == ["question 1", "question 2", "question 4"]
    page.goto(f"{url}/datasets?dataset={saved['id']}")
    settle(page, "29 rows")
    evals = tmp_path / "evals.jsonl"  # questions and ideal answers only: read, saying a model can answer them
    evals.write_text(json.dumps({"input": "2+2?", "ideal": "4"}) + "\n")
    dropzone.set_input_files(str(evals))
    page.get_by_text("Questions only: this file has no answers to judge yet").wait_for()
    for name, rows, says in [("typo.jsonl", [{"query": "q", "reponse": "a"}], "is 'reponse' the response")]:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        dropzone.set_input_files(str(path))
        page.locator('td[role="gridcell"]', has_text=says).first.wait_for(state="attached")  # the grid's text copy
        settle(page)
        assert page.get_by_role("button", name="Leave out these 1 row and save").count() == 0  # the whole file's
        if name == "evals.jsonl":  # said in words, without the CLI's flag
            assert page.locator('td[role="gridcell"]', has_text="--map").count() == 0


def test_new_evaluation_starts_on_the_dataset_last_judged_and_never_offers_a_judgment_set(dash, browser, tmp_path):
    """New evaluation opened on an imported WildBench judgment set (the newest dataset), with nearly every metric
    disabled. Judgment sets are not offered (a link to one says what it is) and the default is the dataset of the
    newest run, not the newest dataset."""
    from evaluators.data.loading import load_dataset
    from evaluators.suites.wildbench import import_files
    from tests.test_dashboard_newuser import _score_file
    from tests.test_results_page import stored_run

    url, store = dash
    used = [{"query": f"the dataset judged last {k}", "response": f"yes {k}"} for k in range(3)]
    rid = stored_run(store, [], metrics=["f1_score"], rows=used)
    last = store.get_run(rid)["dataset_id"]
    newer = store.save_dataset(load_dataset([{"query": "uploaded later", "response": "never judged"}]))
    [imported] = import_files(store, [_score_file(tmp_path)])[0]
    judged = store.get_run(imported.run_id)["dataset_id"]
    assert [d["id"] for d in store.list_datasets()][:3] == [judged, newer, last]  # the judgment set is the newest
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/new")
    settle(page, "Pick at least one metric.")
    assert page.url.endswith(f"/new?dataset={last}")  # the dataset last judged, written in the link
    page.get_by_test_id("stSelectbox").first.click()
    options = page.get_by_role("option").all_inner_texts()
    assert len(options) >= 3 and not [o for o in options if o.startswith("WildBench")], options
    page.goto(f"{url}/new?dataset={judged}")
    settle(page, "is an imported WildBench judgment set")
    assert page.get_by_text("Pick at least one metric.").count() == 0  # no metric picker for it


def test_an_export_can_hold_only_the_filtered_rows(dash, browser, tmp_path):
    """Exports took two clicks, ignored the Rows tab's filter and left reviews out: one click on 'Rows as CSV' saves
    the file, 'Only the filtered rows' writes just the rows it leaves, in its order, and each row carries its
    reviewers' verdicts and whether they agree with the judge."""
    import csv
    import io
    import json

    from tests.test_results_page import COHERENCE, known_results, stored_run

    url, store = dash
    rid = stored_run(store, known_results())
    store.save_review(rid, 3, "coherence", "alice", 4.0, note="reads fine")  # the judge said 2: fail
    store.save_review(rid, 4, "coherence", "bob", 2.0)  # the judge said 1: fail too
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/results?run={rid}&view=Rows&verdict=fail")
    settle(page, "Search query and response")
    page.get_by_role("tab", name="Share & export").click()
    failing = [i for i, v in enumerate(COHERENCE) if v < 3]  # coherence passes at 3 or more (its default)
    toggle = page.get_by_text(f"Only the filtered rows: {len(failing)} of 10")
    toggle.click()
    settle(page, f"A click writes the file ({len(failing)} rows")  # the links now write the filtered rows
    screenshot(page, SHOTS, "35-export-one-click")
    with page.expect_download(timeout=60_000) as dl:  # one click saves it (it took a button, then a link)
        page.get_by_role("link", name="Rows as CSV").click()
    assert dl.value.suggested_filename == "known_scores.csv"
    dl.value.save_as(str(tmp_path / "rows.csv"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "rows.csv").read_text(encoding="utf-8"))))
    assert [r["inputs.query"] for r in rows] == [f"question {i}" for i in failing]
    assert {r["outputs.coherence.coherence_result"] for r in rows} == {"fail"}
    # people's verdicts beside the judge's (exports left them out)
    people = {r["inputs.query"]: (r["reviews.coherence.result"], r["reviews.coherence.agrees_with_judge"],
                                  json.loads(r["reviews.coherence.verdicts"] or "[]")) for r in rows}
    assert people["question 3"] == ("pass", "False", [{"reviewer": "alice", "value": 4.0, "result": "pass",
                                                        "note": "reads fine"}])
    assert people["question 4"][:2] == ("fail", "True") and people["question 7"] == ("", "", [])
