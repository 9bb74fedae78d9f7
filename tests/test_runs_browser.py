"""The Runs table in Debian's headless Chromium (issue 35, "Runs"): sorted by a metric's rate with a click on its
heading, two runs ticked and compared, one deleted once confirmed. Runs planted with known rates
(tests/test_runs_page.py); one dashboard, one page."""
from __future__ import annotations

import pytest

from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT
from tests.procs import wait_until
from tests.test_runs_page import ALPHA, BETA, plant
from ui.runs_table import WIDTHS

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium
GAMMA = [0.1, 0.2, 0.9, 0.3]  # 1 of 4 >= 0.5: 25.0%


@pytest.fixture
def dash(tmp_path):
    yield from served(tmp_path / "evalhome")


def names_shown(page) -> list[str]:
    """The Name column, top to bottom, from the grid's text copy of its cells (the grid itself is a canvas)."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid="stDataFrame"] tbody tr')]
        .map(tr => tr.querySelectorAll('td')[0].textContent)""")


def tick(page, *rows: int) -> None:
    """Click the selection boxes of these rows (35 px rows under a 35 px heading)."""
    box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    for k in rows:
        page.mouse.click(box["x"] + 20, box["y"] + 35 + 18 + 35 * k)
        settle(page)


def test_sort_by_a_rate_compare_two_and_delete_one_once_confirmed(dash, browser):
    url, store = dash
    a = plant(store, "alpha", ALPHA, errored=2)  # 50.0%
    b = plant(store, "beta", BETA)  # 75.0%
    c = plant(store, "gamma", GAMMA)  # 25.0%
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/runs")
    page.locator('td[role="gridcell"]', has_text="gamma").first.wait_for(state="attached", timeout=60_000)
    settle(page)
    assert names_shown(page) == ["gamma", "beta", "alpha"]  # newest first
    # the grid is a canvas: its heading is clicked where the columns' fixed widths put it (after the boxes' column)
    box, w = page.locator('[data-testid="stDataFrame"]').first.bounding_box(), WIDTHS
    page.mouse.click(box["x"] + 35 + w["name"] + w["dataset"] + w["status"] + w["rate"] / 2, box["y"] + 18)
    wait_until(lambda: names_shown(page) == ["gamma", "alpha", "beta"], 30, "the rows sorted by the rate")
    tick(page, 1, 2)  # alpha and beta, as sorted
    page.get_by_text("Selected: beta, alpha").wait_for()  # the runs, whatever the order shown
    screenshot(page, SHOTS, "runs")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/compare?**", timeout=30_000)
    settle(page, "Compare with")
    assert f"base={a}" in page.url and f"runs={b}" in page.url  # the older of the two is the baseline

    page.goto(f"{url}/runs")
    page.locator('td[role="gridcell"]', has_text="gamma").first.wait_for(state="attached", timeout=60_000)
    settle(page)
    tick(page, 0)  # gamma
    page.get_by_role("button", name="Delete").click()
    settle(page, "Delete 1 run and everything of them")
    assert store.get_run(c)["name"] == "gamma"  # nothing deleted before "Yes"
    page.get_by_role("button", name="Yes, delete").click()
    settle(page, "Deleted: 1 run.")
    wait_until(lambda: names_shown(page) == ["beta", "alpha"], 30, "gamma gone from the table")
    assert [r["id"] for r in store.list_runs()] == [b, a] and store.result_count(c) == 0
