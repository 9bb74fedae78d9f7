"""Issue 24, what a new user meets, in Debian's headless Chromium on a dashboard served from this checkout with
its own store: the run lines read and wrap as text, a remapped field in the Datasets preview, ticks kept across
the sidebar, published WildBench judgments imported from the Leaderboard page, the pairwise inspector, the risk
pages and a greyed button that says why. One walk over every page these changes touch, a screenshot at each
step under artifacts/walk-ui/ (the AppTest side is tests/test_dashboard_newuser.py)."""
from __future__ import annotations

import json

import pytest

from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT, SHARED
from tests.test_dashboard_walk import main_text, wait_text

SHOTS = ROOT / "artifacts" / "walk-ui"
SCORES = SHARED / "fixtures" / "wildbench" / "eval_results" / "v2.0625" / "score.v2" / "eval=gpt-4o-2024-05-13"
pytestmark = needs_chromium


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    yield from served(tmp_path_factory.mktemp("newuser-browser") / "evalhome")


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1280, "height": 1300})
    yield p
    p.close()


def shot(page, name: str, at=None) -> None:
    """A screenshot of the page, scrolled to ``at`` (a locator) first: the main area scrolls inside the page."""
    if at is not None:
        at.scroll_into_view_if_needed()
    screenshot(page, SHOTS, name)


def tick(page, label: str) -> None:
    page.locator('[data-testid="stCheckbox"]').filter(has_text=label).first.locator("label").click()
    settle(page)


def header(page, name: str):
    return page.locator('th[role="columnheader"]', has_text=name).first


def choose(page, css: str, option: str) -> None:
    page.locator(css).locator('[data-testid="stSelectbox"]').click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def test_home_and_a_remapped_field_in_the_datasets_preview(dash, page, tmp_path):
    url, _ = dash
    page.goto(url)
    settle(page, "Evaluate the sample")
    assert "31 questions with answers and references" in main_text(page)
    shot(page, "01-home")
    drafts = tmp_path / "drafts.jsonl"
    drafts.write_text("".join(json.dumps({"query": f"question {i}", "response": "" if i == 1 else f"draft {i}",
                                          "answer": f"final {i}"}) + "\n" for i in range(3)))
    page.goto(f"{url}/datasets")
    settle(page, "Saved datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(drafts))
    settle(page, "1 problem found; nothing was saved.")
    shot(page, "02-datasets-detected")
    choose(page, '[class*="st-key-datasets-map-"][class*="-response"]', "answer")
    wait_text(page, "3 rows, single shape, all checks passed.")
    # the preview's headings are the grid's column headers: the field read from "answer", the column beside it
    for name in ("response ← answer", "response (not used)"):
        header(page, name).wait_for(state="attached")  # (the grid's accessible table: its cells are a canvas)
    page.locator('td[role="gridcell"]', has_text="final 1").first.wait_for(state="attached")
    shot(page, "03-datasets-remapped")


def test_ticks_and_thresholds_survive_the_sidebar(dash, page):
    url, store = dash
    page.goto(url)  # (the first request stores the bundled samples)
    settle(page, "Evaluate the sample")
    sample = next(d["id"] for d in store.list_datasets() if d["name"] == "rag_single_turn.jsonl")
    page.goto(f"{url}/new?dataset={sample}")
    settle(page, "Pick at least one metric")
    tick(page, "F1 word overlap")
    threshold = page.get_by_label("F1 word overlap passes at ≥")
    threshold.fill("0.7")
    threshold.press("Enter")
    settle(page)
    shot(page, "04-new-ticked")
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Runs", exact=True).click()
    settle(page, "Start a new evaluation")
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="New evaluation", exact=True).click()
    settle(page, "Thresholds")
    assert page.locator('[data-testid="stCheckbox"]').filter(has_text="F1 word overlap").first.locator(
        "input").is_checked()
    assert page.get_by_label("F1 word overlap passes at ≥").input_value() == "0.70"
    tick(page, "Coherence")  # a judge metric: the estimate, its cost in dollars
    for label, value in (("Base URL", "http://127.0.0.1:9/v1"), ("Model (Azure: deployment)", "some-model")):
        page.get_by_label(label).fill(value)
        page.get_by_label(label).press("Enter")
        settle(page)
    wait_text(page, "Cost (est., USD)")
    assert "$" in page.get_by_test_id("stMetric").filter(has_text="Cost (est., USD)").inner_text()
    shot(page, "05-new-back-with-cost")


def test_published_judgments_import_on_the_leaderboard(dash, page, tmp_path):
    if not SCORES.is_dir():
        pytest.skip("../shared/fixtures/wildbench is not present")
    url, store = dash
    page.goto(f"{url}/leaderboard")
    settle(page, "Import published WildBench judgments")
    assert "python -m" not in main_text(page)  # a web page names no command to type
    shot(page, "06-leaderboard-empty")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(sorted(map(str, SCORES.glob("*.json"))))
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stFileChip\"]').length == 3")
    settle(page, "gemma-7b-it.json")
    page.get_by_role("textbox", name="Judge model (the eval= folder the files came from)").fill("gpt-4o-2024-05-13")
    page.get_by_role("textbox", name="Judge model (the eval= folder the files came from)").press("Enter")
    settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    wait_text(page, "3 files imported; the leaderboard below includes them.")
    for heading in ("WB-Score", "95% CI low", "Task macro", "Length (characters)"):
        header(page, heading).wait_for(state="attached")
    assert page.locator('th[role="columnheader"]', has_text="WB_score").count() == 0
    # gemma-7b-it's published WB-Score, 10.1758 (the accessible table holds the unrounded value)
    page.locator('td[role="gridcell"]', has_text="10.1757").first.wait_for(state="attached")
    assert "Task macro shows – where the rows carry no task tags" in main_text(page)
    shot(page, "07-leaderboard-imported", page.locator('[data-testid="stDataFrame"]').nth(1))
    stored = len(store.list_runs())
    assert len([r for r in store.list_runs() if "(imported)" in r["name"]]) == 3
    # a file that is not a judgment file: named, with its record and field, and nothing stored
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps([{"session_id": "s", "model_test": "m", "score": "eleven", "model_output": "x"}]))
    page.get_by_text("Import published WildBench judgments").click()  # folded once the board has runs
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(bad))
    settle(page, "broken.json")
    page.get_by_role("button", name="Import", exact=True).click()
    wait_text(page, "Nothing was imported")
    assert "broken.json: record 1, field score: 'eleven' is not a number" in main_text(page)
    assert len(store.list_runs()) == stored
    shot(page, "08-leaderboard-refused")


def test_runs_read_as_text(dash, page):
    url, store = dash
    from tests.test_dashboard_newuser import _score_file
    from evaluators.suites.wildbench import import_files

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        run = import_files(store, [_score_file(Path(tmp), scores=(7,))])[0][0]
    store.update_run(run.run_id, name="a run whose name is long enough to need a second line on a narrow "
                                      "window, as names of real experiments often are")
    page.set_viewport_size({"width": 900, "height": 900})
    page.goto(f"{url}/runs")
    # a cell of the table (the grid's text copy: the grid itself is a canvas, so no name is Markdown or HTML)
    page.locator('td[role="gridcell"]', has_text="a run whose name is long").first.wait_for(state="attached",
                                                                                        timeout=60_000)
    settle(page)
    assert page.locator('[data-testid="stMarkdown"] a').count() == 0
    shot(page, "09-runs")


def test_pairwise_risk_and_attack_pages_read_as_a_person_reads(dash, page, tmp_path):
    from tests.test_safety_dashboard import ROWS, make_run
    from tests.test_wildbench_import import _pairwise_file

    url, store = dash
    # a pairwise judgment file not named after its tested model: the reference is typed where the CLI reads ref=
    pair = tmp_path / "judgments.json"
    pair.write_bytes(_pairwise_file(tmp_path).read_bytes())
    page.goto(f"{url}/leaderboard")
    settle(page, "Import published WildBench judgments")
    if page.get_by_role("button", name="Import", exact=True).count() == 0:
        page.get_by_text("Import published WildBench judgments").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(pair))
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stFileChip\"]').length >= 1")
    settle(page)
    box = page.get_by_role("textbox", name="Reference (pairwise files: the ref= folder)")
    box.fill("claude-3-haiku-20240307")
    box.press("Enter")
    settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    wait_text(page, "imported; the leaderboard below includes them.")
    run = next(r for r in store.list_runs() if "wildbench_pairwise" in r["spec"]["metrics"])
    page.goto(f"{url}/pairwise?run={run['id']}&row=1")
    settle(page, "Response B")
    for heading in ("Model A", "Model B", "Reward A", "Choice"):
        header(page, heading).wait_for(state="attached")
    assert "1 of 4 pairs" not in main_text(page) and "4 of 4 pairs" in main_text(page)
    shot(page, "10-pairwise")
    # risk and safety: headings in words, the refused row's severity a dash
    rid = make_run(store, ROWS, ["violence", "protected_material", "indirect_attack"])
    page.goto(f"{url}/safety?run={rid}")
    settle(page, "Violence defect rate")
    for heading in ("Measure", "Defect rate", "95% CI low", "Threshold"):
        header(page, heading).wait_for(state="attached")
    assert page.locator('th[role="columnheader"]', has_text="defect_rate").count() == 0
    shot(page, "11-safety", page.locator('[data-testid="stDataFrame"]').first)
    # jailbreak attacks: the greyed button says what it waits for
    page.goto(f"{url}/attacks?atab=Generate+an+attack+set")
    settle(page, "Fill responses from the application under test")
    page.get_by_text("Fill responses from the application under test").click()
    why = "Give the target's base URL and model above to fill the responses, or turn filling off."
    wait_text(page, why)
    assert page.get_by_role("button", name="Generate attack set").is_disabled()
    shot(page, "12-attacks-generate-waiting")
