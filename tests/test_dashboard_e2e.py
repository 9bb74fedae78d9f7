"""The dashboard end to end in a real headless Chromium (Debian's), against the loopback judge.

Waits on content and on Streamlit's ``data-test-script-state="notRunning"``, never on fixed
sleeps. Screenshots of each page go to artifacts/screenshots/ (kept out of git).
"""
from __future__ import annotations

import json
import time

import pytest

from evaluators.read.results import open_results
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT, SINGLE

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    yield from served(home)


def shot(page, name: str) -> None:
    screenshot(page, SHOTS, name)


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def expect_metric(page, label: str, value: str, timeout: float = 30) -> None:
    """Wait until the metric card shows ``value`` (a rerun may still be on its way); fail with what it shows."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metric_value(page, label) == value:
            return
        page.wait_for_timeout(100)
    assert metric_value(page, label) == value


def test_upload_run_read_and_share(app, browser, judge_server, tmp_path):
    url, store = app
    # An upload in DeepEval's column names, so detection is exercised too.
    rows = [json.loads(x) for x in SINGLE.read_text().splitlines()][:12]
    upload = tmp_path / "deepeval_style.jsonl"
    upload.write_text("".join(json.dumps({"input": r["query"], "actual_output": r["response"],
                                          "expected_output": r["ground_truth"], "retrieval_context": [r["context"]]}) + "\n"
                              for r in rows))
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    page.goto(url + "/datasets")
    settle(page, "Saved datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    settle(page, "all checks passed")
    assert page.get_by_text("read as a DeepEval test-case file").count() == 1
    shot(page, "1-datasets")
    page.get_by_role("button", name="Save dataset").click()
    settle(page, "Pick at least one metric")
    assert "/new" in page.url and "dataset=" in page.url

    for metric in ("Coherence", "F1 word overlap"):  # by their names
        page.locator('[data-testid="stCheckbox"]').filter(has_text=metric).first.locator("label").click()
        settle(page)
    page.get_by_label("Base URL").fill(judge_server.url)
    page.get_by_label("Base URL").press("Enter")
    settle(page)
    page.get_by_label("Model (Azure: deployment)").fill("loopback-judge")
    page.get_by_label("Model (Azure: deployment)").press("Enter")
    settle(page, "Judge calls")
    assert metric_value(page, "Judge calls") == "12"
    shot(page, "2-new-evaluation")
    page.get_by_role("button", name="Start evaluation").click()
    settle(page, "Results")
    # the page follows the worker through the store: no reload, just wait for both metrics to be complete
    page.wait_for_function("() => { const t = document.querySelector('[data-testid=\"stMain\"]').innerText;"
                           " return t.split('12 scored · 0 errored · 0 skipped').length === 3 && !t.includes('Cancel run'); }",
                           timeout=90_000)
    settle(page, "Coherence pass rate")
    run_id = page.url.split("run=")[1].split("&")[0]
    res = open_results(store, run_id)
    assert res.metrics()["coherence.scored_rows"] == 12 and len(judge_server.calls) == 12
    expected = res.summary(res.specs[0])["pass_rate"]
    expect_metric(page, "Coherence pass rate", f"{expected:.0%}")
    shot(page, "3-results")

    # raise the coherence threshold by one step with the keyboard: recomputed, not re-run
    page.get_by_role("tab", name="Thresholds").click()
    settle(page, "What if the threshold moved")
    page.locator('[data-testid="stSlider"]').filter(has_text="coherence threshold").get_by_role("slider").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url("**th.coherence=4**", timeout=30_000)
    settle(page)
    strict = open_results(store, run_id, {"coherence": 4}).summary(res.specs[0])["pass_rate"]
    expect_metric(page, "Coherence pass rate", f"{strict:.0%}")
    assert len(judge_server.calls) == 12

    page.get_by_role("tab", name="Rows").click()
    settle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + 35 + 18)  # the first row's selection box
    page.wait_for_url("**row=1**", timeout=30_000)
    settle(page, "Judge's reasoning")
    reason = res.cells["coherence"][0].reason
    assert page.get_by_text(reason).count() >= 1
    shot(page, "4-row-detail")

    link = page.url
    for part in (f"run={run_id}", "th.coherence=4", "row=1", "view=Rows"):
        assert part in link
    fresh = browser.new_context(viewport={"width": 1500, "height": 1400}).new_page()
    fresh.goto(link)
    settle(fresh, "Judge's reasoning")
    assert fresh.get_by_text(reason).count() >= 1
    expect_metric(fresh, "Coherence pass rate", f"{strict:.0%}")
    assert fresh.get_by_role("tab", name="Rows").get_attribute("aria-selected") == "true"
    shot(fresh, "5-shared-link")
    assert len(judge_server.calls) == 12  # reading never calls the judge


def test_bad_upload_lists_every_problem_and_saves_nothing(app, browser, tmp_path):
    url, store = app
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"query": "q1", "response": "r1"}\n{"query": "q2" "response": "r2"}\n{"query": "q3", "response": ["x"]}\n')
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    page.goto(url + "/datasets")
    settle(page, "Saved datasets")
    before = len(store.list_datasets())
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(bad))
    settle(page, "problems found")
    problems = page.locator('[data-testid="stDataFrame"]').filter(has_text="problem").first
    problems.wait_for()
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert "2 problems found; nothing was saved." in text
    assert "Traceback" not in text and page.get_by_role("button", name="Save dataset").count() == 0
    assert len(store.list_datasets()) == before
    shot(page, "6-bad-upload")


def test_compare_keeps_working_when_a_filter_empties_the_selected_table(app, browser):
    url, store = app
    from evaluators import evaluate

    base = evaluate(str(SINGLE), ["f1_score"], store=store).run_id
    other = evaluate(str(SINGLE), ["f1_score"], store=store).run_id  # same rows, same values: nothing differs
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    page.goto(f"{url}/compare?base={base}&runs={other}")
    settle(page, "rows changed verdict")
    grid = page.locator('[data-testid="stDataFrame"]').last
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + 35 + 18 + 2 * 35)  # the third row's selection box
    page.wait_for_url("**row=3**", timeout=30_000)
    settle(page)
    page.get_by_text("Show only differences").click()
    page.wait_for_url("**diff=true**", timeout=30_000)
    settle(page)
    shot(page, "compare-only-differences")
    assert page.get_by_text("Something went wrong").count() == 0
    assert page.get_by_text("0 of 31 rows changed verdict").count() == 1
