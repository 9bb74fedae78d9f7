"""The Review page's Align tab in Debian's headless Chromium, from the baseline card to a promoted judge, on the
synthetic world of tests/align_world.py judged by the scripted loopback judge (tests/judge_server.py).

Open Review -> the Align tab -> the baseline card -> Build candidates -> the gate says better -> Promote -> the
run's corrected rate with the promoted judge beside the current one. Screenshots: artifacts/screenshots/align-*.png.
Every wait is on what the page shows (tests.browser.settle), never a fixed sleep.
"""
from __future__ import annotations

import pytest

from tests import align_world as w
from tests.browser import needs_chromium, screenshot, settle, start_dashboard, stop
from tests.conftest import ROOT
from tests.judge_server import JudgeServer
from tests.test_align_tab import _judged

pytestmark = needs_chromium
SHOTS = ROOT / "artifacts" / "screenshots"


@pytest.fixture
def aligned_world(home_store, tmp_path, monkeypatch, forget_custom_metrics):
    """The world judged and reviewed in the dashboard's store, the scripted judge still serving (the dashboard
    asks it for the candidates), and the dashboard on that store."""
    with JudgeServer(responder=w.responder) as server:
        # half the rows reviewed: the reviews correct the judge's rate over the other half too
        _judged(home_store, server, tmp_path, monkeypatch, n=240, reviewed=list(range(0, 240, 2)))
        proc, url = start_dashboard(tmp_path / "evalhome")
        try:
            yield url, home_store, server
        finally:
            stop(proc)


def test_align_walk_from_baseline_to_promotion(aligned_world, browser):
    url, store, server = aligned_world
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(f"{url}/review?run={w.RUN_ID}")
    settle(page, "Review")
    page.get_by_role("tab", name="Align").click()
    settle(page, "Baseline: the current judge against your reviewers")
    settle(page, "test split used 0 times")
    assert page.get_by_role("button", name="Promote").count() == 0
    screenshot(page, SHOTS, "align-1-baseline")
    served = len(server.calls)
    page.get_by_role("button", name="Build candidates").click()
    settle(page, "The gate, once, on the held-out test rows")
    settle(page, "Better: the candidate agrees with your reviewers more")
    assert len(server.calls) > served and store.test_split_uses(w.METRIC) == 1
    assert page.get_by_text("Candidate: rules", exact=False).count() >= 1
    promote = page.get_by_role("button", name="Promote")
    assert promote.is_enabled()
    settle(page, "test split used 1 time ·")  # the baseline card counts the gate's use too
    page.get_by_text("The gate, once, on the held-out test rows").scroll_into_view_if_needed()
    screenshot(page, SHOTS, "align-2-gate")
    promote.click()
    settle(page, "promoted judge (version 1)")
    settle(page, "The run's pass rate, corrected by its reviews, with each judge")
    assert store.saved_metric(w.METRIC)["version"] == 1 and store.promotion(w.METRIC, 1) is not None
    assert page.get_by_role("button", name="Promote").is_disabled()
    cells = {}
    for tr in page.locator("table").last.locator("tbody tr").all():
        who, *rest = [c.strip() for c in tr.locator("th, td").all_inner_texts()]
        cells[who] = rest
    low, high = (zip(*(map(float, cells[k][2].strip("[]").replace("%", "").split(", ")) for k in
                       ("current judge", "promoted judge (version 1)"))))
    assert high[1] - low[1] < high[0] - low[0], cells  # the same reviews, a narrower interval with the new judge
    page.get_by_text("corrected by its reviews, with each judge").scroll_into_view_if_needed()
    screenshot(page, SHOTS, "align-3-promoted")
