"""The Results page in Debian's headless Chromium (issue 10): what a reader sees, measured in the DOM.

Runs are stored with known scores (see tests/test_results_page.py); screenshots go to artifacts/screenshots/.
"""
from __future__ import annotations

import time

import pytest

from evaluators import Store
from evaluators.store import utcnow
from tests.browser import needs_chromium, settle, start_dashboard, stop
from tests.conftest import ROOT
from tests.test_results_page import COHERENCE, VIOLENCE, judged, known_results, stored_run

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium

# Six judge metrics and a classic one: nine cards with Rows and Errored rows, the longest label
# "hate_unfairness defect rate".
SIX = ["coherence", "fluency", "groundedness", "relevance", "violence", "hate_unfairness", "f1_score"]


def six_metric_results():
    out = known_results()
    out = [r for r in out if r.metric in SIX]
    for i in range(10):
        for name in ("fluency", "groundedness", "relevance"):
            out.append(judged(i, name, COHERENCE[::-1][i], {name: float(COHERENCE[::-1][i])}, f"{name} {i}"))
        out.append(judged(i, "hate_unfairness", VIOLENCE[i], {"hate_unfairness_score": float(VIOLENCE[i])}, "h"))
    return out


@pytest.fixture
def dash(tmp_path):
    home = tmp_path / "evalhome"
    proc, url = start_dashboard(home)
    yield url, Store(f"sqlite:///{home / 'evals.db'}")
    stop(proc)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


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
    settle(page, "hate_unfairness defect rate")
    shot(page, "results-headline-six-metrics")
    cards = page.locator('[data-testid="stMetric"]')
    assert cards.count() == 2 + len(SIX)
    assert cards.evaluate_all(CLIPPED) == []  # no label or value cut to "coh…" / "7…"
    texts = [" ".join(t.split()) for t in cards.all_inner_texts()]
    # hand counts: coherence 6 of 10 >= 3; hate_unfairness (the violence severities) 2 of 10 above 3
    assert "coherence pass rate 60%" in " ".join(texts) and "hate_unfairness defect rate 20%" in " ".join(texts)
    # at most four cards side by side: nine cards in rows of 4, 4 and 1
    tops = [round(cards.nth(k).bounding_box()["y"]) for k in range(cards.count())]
    assert sorted(tops.count(y) for y in set(tops)) == [1, 4, 4]


def test_headline_fills_in_while_the_run_is_running(dash, browser):
    url, store = dash
    rid = stored_run(store, [], metrics=["coherence"], status="running", total=10)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "coherence pass rate")
    card = page.locator('[data-testid="stMetric"]').filter(has_text="coherence pass rate")
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
