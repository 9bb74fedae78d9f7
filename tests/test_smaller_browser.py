"""Issue 35's "Smaller" list in Debian's headless Chromium: what a new user read on the page, fixed. One dashboard
for the module (each page load costs ~2 s); each test saves a screenshot of the fixed page."""
from __future__ import annotations

import json
import re

import pytest

from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    home = tmp_path_factory.mktemp("smaller-browser") / "evalhome"
    yield from served(home)


def test_a_chart_with_no_scores_yet_says_it_waits_for_the_judge_and_keeps_its_legends_inside(dash, browser):
    """A run whose judge has not answered yet drew empty charts with a lone '0.000000' tick on their count axis:
    each says 'waiting for the judge' instead, and shows no count axis. The overview's legends stay inside the
    chart (the row counts' legend ran past the right edge: "pendin")."""
    from tests.test_results_page import stored_run

    url, store = dash
    rid = stored_run(store, [], metrics=["coherence", "f1_score"], status="running", total=20)
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Score distributions")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    page.wait_for_selector('[data-testid="stVegaLiteChart"] svg .role-axis-label text', timeout=30_000)
    screenshot(page, SHOTS, "35-charts-waiting-for-the-judge")
    ticks = charts.locator(".role-axis-label text").evaluate_all("els => els.map(e => e.textContent)")
    assert "1" in ticks and "5" in ticks  # coherence's scores still on the x axis
    assert not [t for t in ticks if re.fullmatch(r"0\.0{3,}", t)], ticks  # no "0.000000" on a count axis
    waiting = charts.locator("svg text", has_text="waiting for the judge")
    assert waiting.count() == 2  # one panel per metric
    overview = charts.first
    edge = overview.bounding_box()
    legend = overview.locator(".role-legend-label text")
    assert legend.count() == 8 and "pending" in legend.evaluate_all("els => els.map(e => e.textContent)")
    for box in legend.evaluate_all("els => els.map(e => e.getBoundingClientRect().right)"):
        assert box <= edge["x"] + edge["width"] + 1
    assert edge["x"] + edge["width"] <= page.locator('[data-testid="stMainBlockContainer"]').bounding_box()["x"] + \
        page.locator('[data-testid="stMainBlockContainer"]').bounding_box()["width"] + 1


def test_an_uploaded_files_layout_is_said_in_words(dash, browser, tmp_path):
    """'detected schema: azure' was jargon: the upload says how its columns were read, in words."""
    url, _ = dash
    upload = tmp_path / "azure_rows.jsonl"
    upload.write_text("".join(json.dumps({"query": f"question {i}", "response": f"answer {i}",
                                          "ground_truth": f"truth {i}"}) + "\n" for i in range(3)))
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/datasets")
    settle(page, "Saved datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    settle(page, "all checks passed")
    said = page.get_by_text("azure_rows.jsonl · read as an Azure AI evaluation file · columns: query, response, "
                            "ground_truth")
    assert said.count() == 1
    assert page.get_by_text("schema", exact=False).count() == 0
    screenshot(page, SHOTS, "35-datasets-read-as")


def _overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def test_the_grids_toolbar_leaves_next_page_clickable(dash, browser):
    """The rows grid's toolbar (search, download, full screen), shown while the pointer is over the grid, covered
    'Next ›' above its right corner: the pager is out of its way, and a click on 'Next ›' turns the page."""
    from evaluators.store.schema import Result
    from tests.test_results_page import stored_run

    url, store = dash
    rows = [{"query": f"question {i}", "response": f"answer {i}"} for i in range(105)]
    rid = stored_run(store, [Result(i, "coherence", 0, "ok", 4.0, {"coherence": 4.0}) for i in range(105)],
                     metrics=["coherence"], rows=rows)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/results?run={rid}&view=Rows")
    settle(page, "page 1 of 2")
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.hover()
    toolbar = page.locator('[data-testid="stElementToolbar"]').filter(has=page.locator("button")).first
    toolbar.wait_for(state="visible", timeout=30_000)
    nxt = page.get_by_role("button", name="Next ›")
    screenshot(page, SHOTS, "35-rows-pager-and-grid-toolbar")
    assert not _overlap(toolbar.bounding_box(), nxt.bounding_box())
    nxt.click()  # Playwright refuses a click on a button something else covers
    settle(page, "page 2 of 2")
