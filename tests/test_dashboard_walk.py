"""A new user's walk through the dashboard in headless Chromium (Debian's), against the loopback judge:
first screen -> upload -> run -> overview -> rows -> detail -> share link in a fresh browser ->
compare -> HTML report. Screenshots go to artifacts/walk/ (CI keeps them).

Only text and ARIA roles are used to find things (the Results page is being reworked), except the
rows grid, which draws its cells on a canvas: its first row is clicked by position.
"""
from __future__ import annotations

import json
import re

import pytest

from evaluators.read.results import open_results
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT, SINGLE, wait_for_run

SHOTS = ROOT / "artifacts" / "walk"
pytestmark = needs_chromium
# (url path, the page's title): every page opens under its own address; the home page is "/"
PAGES = [("", "evaldash"), ("runs", "Runs"), ("datasets", "Datasets"), ("new", "New evaluation"),
         ("results", "Results"), ("compare", "Compare runs"), ("safety", "Risk and safety"),
         ("attacks", "Jailbreak attacks"), ("redteam", "Red team"), ("leaderboard", "WildBench leaderboard"), ("pairwise", "Pairwise inspector")]


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    yield from served(home)


def shot(page, name: str) -> None:
    screenshot(page, SHOTS, name)


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def wait_text(page, text: str, timeout: float = 90_000) -> None:
    try:
        page.wait_for_function("t => document.querySelector('[data-testid=\"stMain\"]').innerText.includes(t)",
                               arg=text, timeout=timeout)
    except Exception:
        shot(page, "failed-waiting")  # what the page showed instead, for the CI artifacts
        raise AssertionError(f"never showed {text!r}; it shows:\n{main_text(page)[:3000]}") from None
    settle(page)


def finished(page) -> None:
    """Wait for the page to drop the live progress (it redraws itself when the run ends)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stMain\"]').innerText.includes('Cancel run')",
                           timeout=60_000)
    settle(page)


def run_started_by(page, store, button: str) -> str:
    """Click ``button``, follow the app to the new run's Results page, wait for the run to complete and for the
    page to show it finished; the run's id."""
    page.get_by_role("button", name=button).click()
    page.wait_for_url("**/results?run=*", timeout=30_000)
    run_id = page.url.split("run=")[1].split("&")[0]
    assert wait_for_run(store, run_id, timeout=120)["status"] == "completed"
    finished(page)
    return run_id


def test_every_page_opens_at_its_own_address_and_the_sample_is_one_click_away(app, browser):
    url, store = app
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    for path, title in PAGES:
        page.goto(f"{url}/{path}")
        page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=60_000)
        settle(page)
        assert page.get_by_text("Page not found").count() == 0, path
        assert page.url.split("?")[0].rstrip("/") == f"{url}/{path}".rstrip("/"), (path, page.url)
    page.goto(url)
    settle(page, "Try it now")
    run_id = run_started_by(page, store, "Evaluate the sample")
    rate = open_results(store, run_id).summary(open_results(store, run_id).specs[0])["pass_rate"]
    text = main_text(page)
    assert "f1_score" in text and (f"{rate:.0%}" in text or f"{rate:.1%}" in text)
    shot(page, "00-sample-result")


def _upload_twice(page, url: str, upload) -> str:
    """Steps 1-2: the first screen, then the upload; the same file again is said to be stored already."""
    page.goto(url)
    settle(page, "Score what your LLM application answered")
    for step in ("1 · Dataset", "2 · Evaluation", "3 · Results"):
        assert step in main_text(page)
    shot(page, "01-home")
    page.get_by_role("link", name="Add a dataset").click()
    page.wait_for_url(f"{url}/datasets**")
    settle(page, "Saved datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    settle(page, "all checks passed")
    shot(page, "02-upload")
    page.get_by_role("button", name="Save dataset").click()
    page.wait_for_url("**/new?dataset=*")
    did = page.url.split("dataset=")[1].split("&")[0]
    page.goto(f"{url}/datasets")
    settle(page, "Saved datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    settle(page, "all checks passed")
    page.get_by_role("button", name="Save dataset").click()
    wait_text(page, "already stored")
    assert "my_support_answers.jsonl" in main_text(page)
    shot(page, "03-already-stored")
    page.get_by_role("link", name="Evaluate it").click()
    page.wait_for_url(f"**/new?dataset={did}**")
    return did


def _judged_run(page, store, judge_server):
    """Steps 3-4: a judge metric on the loopback judge (connection tested first) and a classic metric; the
    overview once the run has finished (the page follows the worker through the store)."""
    settle(page, "Pick at least one metric")
    for metric in ("Coherence", "F1 word overlap"):  # the metrics by their names (their keys stay in the URL)
        page.locator('[data-testid="stCheckbox"]').filter(has_text=metric).first.locator("label").click()
        settle(page)
    for label, value in (("Base URL", judge_server.url), ("Model (Azure: deployment)", "loopback")):
        page.get_by_label(label).fill(value)
        page.get_by_label(label).press("Enter")
        settle(page)
    page.get_by_role("button", name="Test connection").click()
    wait_text(page, "The judge answered")
    assert len(judge_server.probes) == 1 and not judge_server.calls
    shot(page, "04-new-evaluation")
    run_id = run_started_by(page, store, "Start evaluation")
    res = open_results(store, run_id)
    assert res.metrics()["coherence.scored_rows"] == 10 and len(judge_server.calls) == 10
    rate = res.summary(res.specs[0])["pass_rate"]
    text = main_text(page)
    assert f"{rate:.0%}" in text or f"{rate:.1%}" in text  # coherence's pass rate, however the overview draws it
    shot(page, "05-overview")
    return run_id, res


def _row_and_its_link(page, browser, res) -> None:
    """Steps 5-6: the rows, the first row's detail, and the view's link opened by someone else (a fresh
    browser context: same run, tab and row)."""
    page.get_by_role("tab", name="Rows").click()
    settle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + 35 + 18)  # the first row's selection box (cells are a canvas)
    page.wait_for_url(re.compile(r".*[?&]row=1(&|$).*"), timeout=30_000)
    reason = res.cells["coherence"][0].reason
    page.get_by_text(reason).first.wait_for(timeout=30_000)
    settle(page)
    shot(page, "06-row-detail")
    link = page.url
    other = browser.new_context(viewport={"width": 1500, "height": 1300}).new_page()
    other.goto(link)
    other.get_by_text(reason).first.wait_for(timeout=60_000)
    settle(other)
    assert other.get_by_role("tab", name="Rows").get_attribute("aria-selected") == "true"
    shot(other, "07-shared-link")
    other.context.close()


def _second_run_compared(page, store, url: str, did: str, run_id: str, res) -> None:
    """Step 7: a second run on the same rows (classic metric only: no cost shown), then the two compared."""
    page.goto(f"{url}/new?dataset={did}")
    settle(page, "Pick at least one metric")
    page.locator('[data-testid="stCheckbox"]').filter(has_text="F1 word overlap").first.locator("label").click()
    settle(page, "no judge calls and no cost")
    assert page.get_by_text("Cost (est.").count() == 0
    page.get_by_label("Run name").fill("second look")
    page.get_by_label("Run name").press("Enter")
    settle(page)
    run_started_by(page, store, "Start evaluation")
    page.get_by_role("link", name="Compare runs").click()
    settle(page, "Compare with")
    page.get_by_role("combobox", name=re.compile("Compare with")).click()
    page.get_by_role("option", name=re.compile("second look")).click()
    page.keyboard.press("Escape")
    wait_text(page, "Δ pass rate")
    text = main_text(page)
    assert "Baseline pass rate" in text and "base_pass_rate" not in text
    f1 = open_results(store, run_id).summary(res.specs[1])["pass_rate"]
    assert f"{f1:.1%}" in text  # f1_score's pass rate, as a percentage
    shot(page, "08-compare")


def _report(page, context, url: str, run_id: str) -> None:
    """Step 8: the HTML report, downloaded from the run, opened on its own, charts drawn."""
    page.goto(f"{url}/results?run={run_id}")
    settle(page)
    page.get_by_role("tab", name="Share & export").click()
    settle(page, "HTML report")
    with page.expect_download(timeout=60_000) as dl:  # one click: the server writes the report and sends it
        page.get_by_role("link", name="HTML report").click()
    report = SHOTS / "report.html"
    SHOTS.mkdir(parents=True, exist_ok=True)
    dl.value.save_as(str(report))
    viewer = context.new_page()
    viewer.goto(report.as_uri())
    # its charts are SVG written into the file (no plotly.js since issue 35): two or more, with bars drawn
    viewer.wait_for_function("() => document.querySelectorAll('svg.chart rect.bar').length >= 2")
    assert "How long does the Aurora X2 e-bike battery last on one charge?" in viewer.content()
    shot(viewer, "09-report")


def test_a_new_user_walks_from_the_first_screen_to_the_shared_report(app, browser, judge_server, tmp_path):
    url, store = app
    rows = [json.loads(x) for x in SINGLE.read_text().splitlines()][:10]
    upload = tmp_path / "my_support_answers.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in rows))
    context = browser.new_context(viewport={"width": 1500, "height": 1300}, accept_downloads=True)
    page = context.new_page()
    did = _upload_twice(page, url, upload)
    run_id, res = _judged_run(page, store, judge_server)
    _row_and_its_link(page, browser, res)
    _second_run_compared(page, store, url, did, run_id, res)
    _report(page, context, url, run_id)
    context.close()
