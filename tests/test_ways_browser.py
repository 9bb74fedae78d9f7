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
    assert page.get_by_role("textbox", name="Base URL").input_value() == NOWHERE  # starts from the run's judge
    page.get_by_role("textbox", name="Base URL").fill(judge_server.url)
    page.get_by_role("textbox", name="Base URL").press("Enter")
    page.get_by_role("button", name="Run again with these judge settings").click()
    wait_until(lambda: store.get_run(rid)["status"] == "completed", 90, "the run run again to its end")
    run = store.get_run(rid)
    assert run["spec"]["judge"]["base_url"] == judge_server.url and run["tasks_done"] == 31
    assert [h["judge"]["base_url"] for h in run["spec"]["judge_history"]] == [NOWHERE]
    assert len(judge_server.calls) == 31
    screenshot(page, SHOTS, "failed-run-other-judge")


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
    page.get_by_test_id("stCheckbox").get_by_text("coherence", exact=True).click()
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
