"""The Results page in Debian's headless Chromium (issue 10): what a reader sees, measured in the DOM.

Runs are stored with known scores (see tests/test_results_page.py); screenshots go to artifacts/screenshots/.
"""
from __future__ import annotations

import time

import pytest

from evaluators.store.schema import utcnow
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT
from tests.test_results_page import COHERENCE, VIOLENCE, judged, known_results, stored_run

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium

# Six judge metrics and a classic one: nine cards with Rows and Errored rows, the longest label
# "Hate and unfairness defect rate".
SIX = ["coherence", "fluency", "groundedness", "relevance", "violence", "hate_unfairness", "f1_score"]


def six_metric_results():
    out = known_results()
    out = [r for r in out if r.metric in SIX]
    for i in range(10):
        for name in ("fluency", "groundedness", "relevance"):
            out.append(judged(i, name, COHERENCE[::-1][i], {name: float(COHERENCE[::-1][i])}, f"{name} {i}"))
        out.append(judged(i, "hate_unfairness", VIOLENCE[i], {"hate_unfairness_score": float(VIOLENCE[i])}, "h"))
    return out


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    # one dashboard for the module (each test stores its own run): a cold start costs seconds
    home = tmp_path_factory.mktemp("results-browser") / "evalhome"
    yield from served(home)


def shot(page, name: str) -> None:
    screenshot(page, SHOTS, name)


# Every box in a card whose content is wider than the box (what CSS cuts to "coh…"); inline boxes
# have no width of their own and are measured through the box that holds them.
CLIPPED = """els => els.flatMap(card => [card, ...card.querySelectorAll('*')]
    .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.innerText.replace(/\\s+/g, ' ')))"""


def test_headline_cards_show_full_names_and_values_with_six_metrics(dash, browser):
    url, store = dash
    rid = stored_run(store, six_metric_results(), metrics=SIX)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Hate and unfairness defect rate")
    shot(page, "results-headline-six-metrics")
    cards = page.locator('[data-testid="stMetric"]')
    assert cards.count() == 2 + len(SIX)
    assert cards.evaluate_all(CLIPPED) == []  # no label or value cut to "coh…" / "7…"
    texts = [" ".join(t.split()) for t in cards.all_inner_texts()]
    # hand counts: coherence 6 of 10 >= 3; hate_unfairness (the violence severities) 2 of 10 above 3
    assert "Coherence pass rate 60%" in " ".join(texts) and "Hate and unfairness defect rate 20%" in " ".join(texts)
    # nine cards (each with its n and interval under it) do not fit one line of this window: they wrap onto
    # more lines rather than squeeze
    tops = [round(cards.nth(k).bounding_box()["y"]) for k in range(cards.count())]
    assert len(set(tops)) >= 2 and tops == sorted(tops)
    page.set_viewport_size({"width": 800, "height": 1400})  # narrower still: more lines, nothing cut
    page.wait_for_function("() => new Set([...document.querySelectorAll('[data-testid=stMetric]')]"
                           ".map(e => Math.round(e.getBoundingClientRect().y))).size > 2", timeout=10_000)
    assert cards.evaluate_all(CLIPPED) == []


def test_headline_fills_in_while_the_run_is_running(dash, browser):
    url, store = dash
    rid = stored_run(store, [], metrics=["coherence"], status="running", total=10)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Coherence pass rate")
    card = page.locator('[data-testid="stMetric"]').filter(has_text="Coherence pass rate")
    assert card.locator('[data-testid="stMetricValue"]').inner_text().strip() == "–"
    # the first 5 rows finish (scores 5 4 3 2 1: 3 of 5 pass) while the page stays open, never reloaded
    store.write_results(rid, [r for r in known_results(range(5)) if r.metric == "coherence"])
    store.update_run(rid, tasks_done=5, heartbeat_at=utcnow())
    deadline = time.time() + 40
    while time.time() < deadline and card.locator('[data-testid="stMetricValue"]').inner_text().strip() != "60%":
        page.wait_for_timeout(250)
        store.update_run(rid, heartbeat_at=utcnow())  # the worker's heartbeat: the run stays "running"
    shot(page, "results-partial-run")
    assert card.locator('[data-testid="stMetricValue"]').inner_text().strip() == "60%"
    assert page.get_by_text("5 scored · 0 errored · 0 skipped · 5 pending").count() >= 1


def tops(page, selector: str) -> list[int]:
    boxes = page.locator(selector)
    return [round(boxes.nth(k).bounding_box()["y"]) for k in range(boxes.count())]


def test_metrics_tab_overview_grid_what_if_and_the_row_detail(dash, browser):
    url, store = dash
    rid = stored_run(store, known_results())
    page = browser.new_page(viewport={"width": 1400, "height": 3000})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Score distributions")
    chart = '[data-testid="stVegaLiteChart"]'
    drawn = f"n => [...document.querySelectorAll('{chart}')].filter(e => e.querySelector('svg.marks')).length >= n"
    page.wait_for_function(drawn, arg=2, timeout=30_000)
    charts = page.locator(chart)
    # overview first: its rows name each rate with its value, top to bottom (hand counts over 10 rows)
    ticks = charts.first.locator(".role-axis-label text").all_text_contents()  # SVG text: no innerText
    assert [t for t in ticks if " · " in t] == ["Coherence · pass rate 60%", "F1 word overlap · pass rate 30%",
                                               "Violence · defect rate 20%", "Protected material · defect rate 10%"]
    # then one grid of 4 distributions, three to a row (each titled with its metric, its summary under it)
    assert charts.count() == 2
    titles = charts.nth(1).locator(".role-title-text text")
    assert titles.all_text_contents() == ["Coherence", "F1 word overlap", "Violence", "Protected material"]  # readable names
    y = [round(titles.nth(k).bounding_box()["y"]) for k in range(4)]
    x = [round(titles.nth(k).bounding_box()["x"]) for k in range(4)]
    assert y[0] == y[1] == y[2] < y[3] and x[0] < x[1] < x[2] and abs(x[3] - x[0]) < 40  # (axes differ in width)
    shot(page, "results-metrics-tab")
    # the Thresholds tab: a slider per metric with a threshold (not the label metric), its curve under it
    page.get_by_role("tab", name="Thresholds").click()
    settle(page, "What if the threshold moved")
    page.wait_for_function(drawn, arg=3, timeout=30_000)
    sliders = page.locator('[data-testid="stSlider"]')
    # the tab's rerun over (a rerun shows the old elements until it ends): the three sliders, nothing else
    page.wait_for_function("() => document.querySelectorAll('[data-testid=stSlider]').length === 3", timeout=30_000)
    y_sliders, y_curves = tops(page, '[data-testid="stSlider"]'), tops(page, chart)
    assert len(set(y_sliders)) == 1 and len(set(y_curves)) == 1 and y_curves[0] > y_sliders[0]
    shot(page, "results-thresholds-tab")
    # moving the coherence threshold to 4 (keyboard, as a user can) moves the marked point to 40%
    sliders.filter(has_text="coherence threshold").get_by_role("slider").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url("**th.coherence=4**", timeout=30_000)
    settle(page)
    # the coherence curve (found by its axis title, not its place: a rerun may re-mount the charts)
    what_if = charts.filter(has_text="coherence threshold")
    deadline = time.time() + 30
    point = what_if.locator(".mark-text.role-mark text")  # the rate written beside the marked point
    while time.time() < deadline and "40%" not in point.all_text_contents():
        page.wait_for_timeout(200)
    assert point.all_text_contents() == ["40%"]  # 4 of 10 scores at or above 4

    page.goto(f"{url}/results?run={rid}&view=Rows&row=1")
    settle(page, "coherence reason 0")
    raw = page.get_by_text('"reason": "coherence reason 0"', exact=False)
    assert raw.count() == 0 or not raw.first.is_visible()  # the raw reply waits, collapsed
    page.get_by_text("coherence: raw judge reply and call details").click()
    page.get_by_text('"reason": "coherence reason 0"', exact=False).first.wait_for(state="visible", timeout=10_000)
    assert page.get_by_text("f1_score: 0.4213", exact=False).count() == 1
    assert page.get_by_text("ok", exact=True).count() == 0  # a classic metric shows no "reason"
    shot(page, "results-row-detail")


def test_conversation_turns_show_scores_and_the_worst_turn_in_the_browser(dash, browser):
    url, store = dash
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                          {"role": "user", "content": "help"}, {"role": "assistant", "content": "no"}]}]
    results = [judged(0, "violence", 1, {"violence_score": 1.0}, "calm", turn=0),
               judged(0, "violence", 5, {"violence_score": 5.0}, "violent", turn=1)]
    rid = stored_run(store, results, metrics=["violence"], rows=rows)
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{url}/results?run={rid}&view=Rows&row=1")
    settle(page, "Row 1")
    bubbles = page.locator('[data-testid="stChatMessage"]')
    assert bubbles.count() == 4
    assert "violence 1 · pass" in bubbles.nth(1).inner_text() and "worst" not in bubbles.nth(1).inner_text()
    assert "violence 5 · fail · ◀ worst turn, decides the row" in bubbles.nth(3).inner_text()
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=30_000)  # a complete page for the screenshot
    shot(page, "results-conversation")
