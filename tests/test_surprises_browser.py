"""Issue 24, "dead ends and surprises in the browser", in Debian's headless Chromium: what only a browser
shows (cut labels, widths, a drawn legend). The AppTest side is in tests/test_dashboard_surprises.py, the
share link's in tests/test_rows_browser.py. Screenshots go to artifacts/screenshots/."""
from __future__ import annotations

import pytest

from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT
from tests.test_results_browser import CLIPPED
from tests.test_results_page import known_results, stored_run
from tests.test_safety_dashboard import make_run

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = needs_chromium
HARMS = ["hate_unfairness", "sexual", "violence", "self_harm"]


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    home = tmp_path_factory.mktemp("surprises-browser") / "evalhome"
    yield from served(home)


def harm_rows(prefix: str, levels: str) -> list[dict]:
    return [{"id": k, "query": f"question {k}", "context": f"document {k}",
             "response": f"{prefix} {k} " + " ".join(f"[{h}:{v}]" for h in HARMS) + " [pm:false] [xpia:false:]"}
            for k, v in zip("abcd", levels)]


def test_risk_and_attack_cards_show_whole_names(dash, browser):
    url, store = dash
    rid = make_run(store, harm_rows("b", "0152"), [*HARMS, "protected_material", "indirect_attack"])
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{url}/safety?run={rid}")
    settle(page, "Hate and unfairness defect rate")
    cards = page.locator('[data-testid="stMetric"]')
    assert cards.count() == 6
    assert cards.evaluate_all(CLIPPED) == []  # "hate_unfairn…" before: six fixed columns
    screenshot(page, SHOTS, "safety-cards")
    attack = make_run(store, harm_rows("a", "6635"), HARMS)
    page.goto(f"{url}/attacks?base={rid}&attack={attack}")
    settle(page, "Self-harm direct-attack defect rate")
    cards = page.locator('[data-testid="stMetric"]')
    assert cards.count() == 2 + len(HARMS)
    assert cards.evaluate_all(CLIPPED) == []  # "hate_unfairness direct-att…" before
    screenshot(page, SHOTS, "attack-cards")


def test_rows_table_spans_the_tab_and_the_detail_reads_under_it(dash, browser):
    url, store = dash
    rid = stored_run(store, known_results())
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{url}/results?run={rid}&view=Rows&row=1")
    settle(page, "coherence reason 0")
    table = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    tabs = page.locator('[data-testid="stTabs"]').first.bounding_box()
    assert table["width"] >= 0.98 * tabs["width"]  # was 3/5 of it, the detail pane beside
    heading = page.get_by_role("heading", name="Row 1", exact=True)
    heading.wait_for()
    # both tops in the page's own coordinates, read at one moment: the page scrolls to the detail when it
    # shows, and two viewport boxes read on either side of that scroll do not compare
    table_bottom, heading_top = page.evaluate("""() => {
        const t = document.querySelector('[data-testid="stDataFrame"]').getBoundingClientRect();
        const h = [...document.querySelectorAll('h1,h2,h3,h4')].find(e => e.innerText.trim() === 'Row 1')
            .getBoundingClientRect();
        return [t.bottom + window.scrollY, h.top + window.scrollY]; }""")
    assert heading_top > table_bottom
    # the row's inputs and its scores side by side under the table
    # the shown texts (the grid also keeps its cells' text in a hidden copy, which may come first)
    shown = [page.get_by_text(t, exact=True).filter(visible=True).first for t in ("question 0", "coherence reason 0")]
    for el in shown:
        el.wait_for()
    query, reason = (el.bounding_box() for el in shown)
    assert abs(query["y"] - reason["y"]) < 200 and reason["x"] > query["x"] + 0.4 * table["width"]
    screenshot(page, SHOTS, "results-rows-full-width")


def test_overview_legend_names_the_colours(dash, browser):
    url, store = dash
    rid = stored_run(store, known_results())
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Score distributions")
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.locator("svg.marks").wait_for(timeout=30_000)
    labels = chart.locator(".role-legend-label text").all_text_contents()  # SVG text
    assert labels == ["meets the target", "too close to tell", "below the target", "no scored rows",
                      "scored", "errored", "skipped", "pending"]
    assert chart.locator(".role-legend-title text").all_text_contents() == ["Rate against the target"]


NOT_FOUND = [("results?run=doesnotexist", "Run not found", "run = doesnotexist"),
             ("safety?run=doesnotexist", "Run not found", "run = doesnotexist"),
             ("compare?base=doesnotexist", "Baseline not found", "base = doesnotexist"),
             ("datasets?dataset=doesnotexist", "Dataset not found", "dataset = doesnotexist")]


def test_a_link_to_something_that_does_not_exist_says_so_and_shows_nothing_else(dash, browser):
    """Issue 35: /results?run=doesnotexist opened the newest run and rewrote the URL, so a teammate read
    another run's numbers as the linked one's. Every page now says what the link names is not found, keeps
    the URL, and shows no run's numbers."""
    url, store = dash
    rid = stored_run(store, known_results())
    stored_run(store, known_results())  # the compare page needs two completed runs to pick from
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    for path, message, shown in [*NOT_FOUND, (f"results?run={rid}&view=Rows&row=999", "Row not found", None),
                                 (f"review?run={rid}&queue=doesnotexist", "Review queue not found",
                                  "queue = doesnotexist")]:
        page.goto(f"{url}/{path}")
        if path.startswith("review"):  # the Review tab asks the reviewer's name before it reads a queue
            settle(page, "Your name")
            page.get_by_role("textbox", name="Your name").fill("alice")
            page.get_by_role("button", name="Start reviewing").click()
        settle(page, message)
        assert page.url.endswith(path), page.url  # the link is kept, not rewritten to another run's
        if shown:
            page.get_by_text(shown, exact=True).wait_for()
        if shown:  # no run's numbers beside the message (a missing row's run is there: its cards stay)
            assert page.locator('[data-testid="stMetric"]').count() == 0
        assert page.get_by_text("coherence reason", exact=False).count() == 0
    page.goto(f"{url}/results?run=doesnotexist")
    settle(page, "Run not found")
    page.get_by_role("button", name="Open this page without it").click()
    settle(page, "Score distributions")  # the newest run, now named in the URL
    assert "run=doesnotexist" not in page.url


def test_a_rate_on_few_rows_says_its_n_and_interval_and_a_run_with_errors_says_so(dash, browser):
    """Issue 35: "pass rate 100%" rested on 2 scored rows of 8 with the rest errored, and the run showed the
    same green "completed" as a clean one. The card now says its rule, its n and its interval (scipy's
    Wilson), marks fewer than 10 scored rows, and the run reads "completed with errors" on Results and Runs."""
    from scipy.stats import binomtest

    from evaluators.store.schema import Result
    from tests.test_results_page import ROWS, judged

    url, store = dash
    results = [judged(i, "coherence", 5, {"coherence": 5.0}, f"fine {i}") for i in range(2)]
    results += [Result(i, "coherence", 0, "error", error="HTTP 500 from the judge") for i in range(2, 8)]
    rid = stored_run(store, results, metrics=["coherence"], rows=ROWS[:8])
    store.update_run(rid, tasks_done=2, tasks_errored=6, name="two of eight")
    ci = binomtest(2, 2).proportion_ci(method="wilson")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Coherence pass rate")
    under = (f"too few to say · ≥ 3 · 2 of 8 scored, 6 errored · "
             f"95% CI {ci.low:.0%}–{ci.high:.0%}")
    page.get_by_text(under, exact=True).wait_for()
    page.get_by_text("Completed with errors: 6 judged tasks of 8", exact=False).wait_for()
    screenshot(page, SHOTS, "results-few-rows-with-errors")
    page.goto(f"{url}/runs")  # the grid's text copy of its cells (the grid itself is a canvas)
    page.locator('td[role="gridcell"]', has_text="two of eight").first.wait_for(state="attached", timeout=60_000)
    page.locator('td[role="gridcell"]', has_text="completed with errors").first.wait_for(state="attached")


def test_a_what_if_threshold_is_said_on_every_tab_until_reset(dash, browser):
    """Issue 35: a what-if threshold changed every number on every tab with nothing saying so. A shared link
    carrying one (th.coherence=4 on a run made at 3) opens with a banner above every tab, and Reset ends it."""
    url, store = dash
    rid = stored_run(store, known_results())
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    banner = "What-if thresholds in force: coherence 4 (the run's: 3)"
    for view in ("Metrics", "Rows", "Errors"):
        page.goto(f"{url}/results?run={rid}&th.coherence=4&view={view}")
        settle(page, banner)
    # coherence scores 5 4 3 2 1 5 4 2 1 3: 4 of 10 at 4 or above, as the card says under the banner
    page.get_by_text("≥ 4 · 10 of 10 scored", exact=False).wait_for()
    page.get_by_role("button", name="Reset thresholds").click()
    page.wait_for_url(lambda u: "th.coherence" not in u, timeout=30_000)
    settle(page, "≥ 3 · 10 of 10 scored")
    assert page.get_by_text("What-if thresholds in force", exact=False).count() == 0


def test_a_judge_that_disagrees_with_its_reviewers_is_flagged_on_its_card(dash, browser):
    """Issue 35: κ −0.80 [−1.00, −0.21] and a corrected rate were shown with no verdict. A reviewer who
    answers every row against the judge (κ = −1 by hand: every verdict flipped, 6 passes and 4 fails)
    makes the coherence card and the line under the cards say not to trust the rate."""
    from tests.test_results_page import COHERENCE

    url, store = dash
    rid = stored_run(store, known_results())
    store.save_reviews(rid, [dict(row_idx=i, metric="coherence", reviewer="rita", value=1.0 if v >= 3 else 5.0,
                                  judge_value=float(v)) for i, v in enumerate(COHERENCE)])
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/results?run={rid}")
    settle(page, "Coherence pass rate")
    page.get_by_text("do not trust: the judge disagrees with your reviewers · ≥ 3 · 10 of 10 scored",
                     exact=False).wait_for()
    page.get_by_text("disagrees with your reviewers more than chance", exact=False).first.wait_for()
    card = page.locator('[data-testid="stMetric"]').filter(has_text="Violence defect rate")
    assert "do not trust" not in card.inner_text()  # only the reviewed metric's card
