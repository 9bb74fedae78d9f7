"""The Compare page in headless Chromium (issue 35): every rate says its threshold, two runs that differ only in
thresholds are said to differ there first (and can be read at one threshold), judge agreement only where the
judges differ, a trend chart a reader can read, and numbers as people write them."""
from __future__ import annotations

import datetime as dt
import re

import pytest
import sqlalchemy as sa

from evaluators import load_dataset
from evaluators.store.schema import Result
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT

pytestmark = needs_chromium
N = 40
JUDGE = {"model": "loopback-judge", "provider": "compatible", "base_url": "http://127.0.0.1:9/v1"}
SHOTS = ROOT / "artifacts" / "compare"


def score(i: int) -> float:
    return float(i % 5 + 1)  # 1..5 in turn: 8 rows of each


@pytest.fixture
def dash(tmp_path):
    yield from served(tmp_path / "evalhome")


def _run(store, did: str, name: str, threshold: float, values, day: int, model: str = "loopback-judge") -> str:
    spec = {"metrics": ["coherence"], "thresholds": {"coherence": threshold}, "judge": {**JUDGE, "model": model}}
    rid = store.create_run(did, spec, "h", name)
    store.write_results(rid, [Result(i, "coherence", 0, "ok", values(i), {"coherence": values(i)}, reason=f"because {i}")
                              for i in range(N)])
    store.update_run(rid, status="completed", tasks_total=N, tasks_done=N)
    with store.engine.begin() as c:  # a run a day, so the trend's dates are known
        c.execute(sa.text("UPDATE runs SET created_at = :t WHERE id = :i"), {"t": dt.datetime(2026, 11, day, 9), "i": rid})
    return rid


def _text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _table(page, heading: str):
    """The st.table holding ``heading``, once drawn (its component can come a moment after the script's run ends)."""
    table = page.locator('[data-testid="stTable"]').filter(has_text=heading).first
    table.wait_for(timeout=30_000)
    return table.inner_text()


def _cells(page, shown: str) -> list[str]:
    """The data grids' cells as their accessible tables give them (a grid itself is a canvas), once a cell
    reads ``shown`` (each grid's table is attached when that grid is drawn)."""
    page.locator('td[role="gridcell"]', has_text=shown).first.wait_for(state="attached", timeout=30_000)
    return page.evaluate("() => [...document.querySelectorAll('td[role=gridcell]')].map(c => c.textContent)")


def test_compare_says_thresholds_first_and_shows_agreement_only_for_two_judges(dash, browser):
    url, store = dash
    did = store.save_dataset(load_dataset([{"query": f"Question {i}", "response": f"Answer {i}"} for i in range(N)]))
    a = _run(store, did, "release A (threshold 3)", 3, score, 2)
    b = _run(store, did, "release A again (threshold 4)", 4, score, 3)  # the same answers: only the threshold moved
    c = _run(store, did, "release C", 3, lambda i: max(1.0, score(i) - 2), 4, model="another-judge")
    page = browser.new_page(viewport={"width": 1400, "height": 1400})

    # 1. B against A: the thresholds said before any number, no judge agreement (one judge), no "chance" claim
    page.goto(f"{url}/compare?base={a}&runs={b}&trend=true&row=3")
    settle(page, "Row 3")
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.locator("svg.marks").wait_for()  # (its legend says "unlikely to be chance" too: read once it is there)
    text = _text(page)
    notice = "These runs count a pass at different thresholds"
    assert notice in text and "coherence: ≥ 3 in the baseline; ≥ 4 in release A again (threshold 4)" in text
    assert text.index(notice) < text.index("Trend over runs") < text.index("Run 1:")
    assert "Run 1's pass rate (≥ 4) on coherence is 20.0 points lower than the baseline's (≥ 3)" in text
    assert "the thresholds differ, so this compares the thresholds as much as the runs" in text
    assert "unlikely to be chance (" not in text
    assert "Judges compared" not in text and "κ" not in text
    assert "The same judge (model, template and settings) judged coherence in both runs" in text
    deltas = _table(page, "Baseline pass rate")
    assert "≥ 3 → ≥ 4" in deltas and "60.0%" in deltas and "40.0%" in deltas
    # the trend: a readable height, 0-100% in quarters, dates (not rotated names), the target line
    axis = chart.evaluate("""c => [...c.querySelectorAll('.role-axis-label text')].map(t => {
        const r = t.getBoundingClientRect(); return [t.textContent, r.top, t.getAttribute('transform') || ''] })""")
    ticks = {t: top for t, top, _ in axis}
    assert [t for t, _, _ in axis if t.endswith("%")] == ["0%", "25%", "50%", "75%", "100%"]
    assert ticks["0%"] - ticks["100%"] >= 200  # the plot's height in pixels (~40 px before)
    dates = [t for t, _, _ in axis if not t.endswith("%")]
    assert {"Nov 02", "Nov 03", "Nov 04"} <= set(dates) and len(set(dates)) == len(dates) and all(re.fullmatch(r"[A-Z][a-z]{2} \d\d", t) for t in dates)
    assert not any("rotate" in tr for _, _, tr in axis) and "release" not in " ".join(dates)
    assert "target 80%" in chart.inner_text() and "thresholds differ between runs: ≥ 3, ≥ 4" in chart.inner_text()
    # the row: its inputs once, its scores per run (a score of 3 as "3"), the metric whose verdict differs first
    assert text.count("Question 2") == 1 and "The row's inputs (the same in every run)" in text
    cells = _cells(page, "3 · fail")  # (a grid's data, not what its canvas draws: see test_compare_report)
    assert ["Coherence", "yes", "3 · pass", "3 · fail"] == cells[cells.index("Coherence"):][:4]
    screenshot(page, SHOTS, "1-thresholds-differ")

    # 2. at one threshold: the same answers read the same
    page.get_by_text("Compare at one threshold: the baseline's for every run").click()
    page.wait_for_url("**one_threshold=true**", timeout=30_000)
    settle(page, "Every run is read at the baseline's thresholds (coherence ≥ 3)")
    page.get_by_text("is the same as the baseline's").first.wait_for()
    text = _text(page)
    assert "Run 1's pass rate (≥ 3) on coherence is the same as the baseline's" in text
    assert "thresholds differ, so" not in text and "0 of 40 rows changed verdict" in text
    screenshot(page, SHOTS, "2-one-threshold")

    # 3. C against A: another judge model, so agreement is shown, and a tiny p reads "< 0.001", never "0"
    page.goto(f"{url}/compare?base={a}&runs={c}")
    settle(page, "rows changed verdict")
    text = _text(page)
    assert notice not in text
    assert "Run 1's pass rate (≥ 3) on coherence is 40.0 points lower than the baseline's" in text
    assert "unlikely to be chance (McNemar exact, p < 0.001)" in text
    table = _table(page, "p (bootstrap)")
    assert "< 0.001" in table and not re.search(r"(^|\s)0(\s|$)", table.split("p (bootstrap)")[1])
    page.get_by_text("Judges compared: the baseline's judge against run 1's on the same rows").click()
    page.get_by_text("coherence: the model differs").wait_for()
    assert "Cohen's κ (pass/fail)" in _text(page)
    screenshot(page, SHOTS, "3-two-judges")
