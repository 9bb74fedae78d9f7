"""The Red team page in a real headless Chromium (Debian's), issue 33: a scan started from the page against a scripted
loopback target and the scripted safety judge (each requiring the key typed on the page), followed while the target
holds its answers, then read to the end: the scorecard, and an attack's conversation opened from the attacks table.
Screenshots: artifacts/screenshots/redteam-*.png. Every wait is on a condition (text shown, the URL, the script run
finished), never a sleep."""
from __future__ import annotations

import json

import pytest

from evaluators.suites.redteam import background
from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT
from tests.judge_server import JudgeServer
from tests.safety_judge import safety_responder
from tests.test_redteam_page import JUDGE_KEY, TARGET_KEY, scripted_target

pytestmark = needs_chromium
SHOTS = ROOT / "artifacts" / "screenshots"
CATEGORIES = ("violence", "hate_unfairness", "sexual", "self_harm")  # the page's default: all four


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "evalhome"))  # (background.scans_home: the dashboard's home)
    yield from served(tmp_path / "evalhome")


def shot(page, name: str) -> None:
    screenshot(page, SHOTS, f"redteam-{name}")


def typed(page, label: str, value: str, role: str = "textbox") -> None:
    box = page.get_by_role(role, name=label, exact=True)
    box.fill(value)
    box.press("Enter")
    settle(page)


def under_way(page) -> None:
    """Wait for the scan's progress ("answers: N of 32", N the answers before the target held the rest); when it does
    not show, fail with what the page and the scan's output say instead."""
    try:
        settle(page, " of 32")
    except Exception:  # noqa: BLE001 — said below, with what was shown instead
        logs = {p.parent.name: p.read_text(errors="replace")[-600:] for p in background.scans_home().glob("*/log.txt")}
        shot(page, "failed")
        pytest.fail(f"no progress shown; the page: {page.locator('[data-testid=stMain]').inner_text()[:1500]!r}; "
                    f"the scans' output: {logs!r}")


def test_a_scan_started_followed_and_read_from_the_page(app, browser):
    url, _store = app
    techniques = ("baseline", "base64", "flip", "morse")  # easy, the default, and baseline
    with JudgeServer(responder=scripted_target(CATEGORIES, 2, techniques), require_key=TARGET_KEY) as target, \
            JudgeServer(responder=safety_responder, require_key=JUDGE_KEY) as judge:
        page = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
        page.goto(f"{url}/redteam")
        settle(page, "No scan yet")
        typed(page, "Target base URL", target.url)
        typed(page, "Target model", "app")
        typed(page, "Target API key", TARGET_KEY)
        typed(page, "Objectives per category", "2", role="spinbutton")
        typed(page, "Model (Azure: deployment)", "judge")
        typed(page, "Base URL", judge.url)
        typed(page, "API key", JUDGE_KEY)
        shot(page, "1-new-scan")
        target.hold_calls(after=3)  # a few answers, then the target waits: the page shows the scan under way
        page.get_by_role("button", name="Start scan").click()
        page.wait_for_url("**scan=**", timeout=30_000)
        under_way(page)
        page.get_by_text("Status:").first.wait_for()
        assert "running" in page.locator('[data-testid="stMain"]').inner_text()
        shot(page, "2-running")
        target.release()
        settle(page, "Attack success by risk category and strategy")  # the fragment saw it end: the page redrawn
    name = page.url.split("scan=")[1].split("&")[0]
    card = json.loads((background.folder(name) / "scorecard.json").read_text())
    main = page.locator('[data-testid="stMain"]')
    overall = card["risk_category_summary"][0]
    assert overall["overall_total"] == 32 and overall["overall_successful_attacks"] == 3  # planted: flip 6, 5; base64 4
    assert overall["overall_asr"] == round(3 / 32 * 100, 2)
    text = main.inner_text()
    assert f"{overall['overall_asr']:.2f}%" in text and "ASR by threshold" in text
    chart = main.locator('[data-testid="stVegaLiteChart"]')
    chart.first.wait_for(timeout=30_000)  # (drawn once its library has loaded)
    assert chart.count() == 1
    shot(page, "3-scorecard")
    # the attacks' grid (its cells' text is kept in a hidden copy): its first row's selection box, clicked
    grid = page.locator('[data-testid="stDataFrame"]').filter(has_text="violence/").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + 35 + 18)
    page.wait_for_url("**attack=**", timeout=30_000)
    settle(page, "Conversation")
    detail = page.locator(".st-key-rt_attack")
    first = background.read(name)[1][0]
    assert first["attack_technique"] == "baseline"  # sent as the objective is: the text shows twice
    detail.get_by_text(first["conversation"][1]["content"], exact=True).wait_for(timeout=30_000)
    assert detail.get_by_text(first["objective"], exact=True).count() == 2  # the objective, and the prompt sent
    shot(page, "4-conversation")
