"""An agent run in a real headless Chromium (Debian's): a row's trace and the tools' success rates.

The bundled sample (``data/agent_trips.jsonl``) is evaluated with the computed task_navigation_efficiency and a
judged tool_call_accuracy (the loopback judge fails row 3, naming the call it found at fault). The Rows tab
shows row 3's turns, each call with its arguments and its result as text, the failed call marked as the judge's
fault, a long result collapsed; the Metrics tab shows each tool's success rate. Screenshots: artifacts/agents/.
"""
from __future__ import annotations

import json

import pytest

from evaluators import JudgeConfig, Store, evaluate
from tests.browser import needs_chromium, screenshot, settle, start_dashboard, stop
from tests.conftest import ROOT, default_store
from tests.judge_server import JudgeServer

pytestmark = needs_chromium
SAMPLE = ROOT / "data" / "agent_trips.jsonl"
SHOTS = ROOT / "artifacts" / "agents"
FAULTY = "call_005"  # row 3's change_booking refused by the payment pre-authorisation


def reply(prompt: str, request: dict) -> str:
    bad = FAULTY in prompt
    return json.dumps({"reason": f"The call {FAULTY} used a flight over the agreed fare." if bad else "Calls fit.",
                       "score": 2 if bad else 5, "status": "completed",
                       "properties": {"faulty_calls": [FAULTY] if bad else []}})


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    store = default_store(home)
    with JudgeServer(reply) as server:
        res = evaluate(str(SAMPLE), ["task_navigation_efficiency", "tool_call_accuracy"], store=store,
                       judge=JudgeConfig(model="m", provider="compatible", base_url=server.url, max_retries=1))
    proc, url = start_dashboard(home)
    yield url, res.run_id
    stop(proc)


def test_a_rows_trace_and_the_tools_success_rates(app, browser):
    url, rid = app
    page = browser.new_context(viewport={"width": 1500, "height": 3400}).new_page()
    page.goto(f"{url}/results?run={rid}&view=Rows&row=2")
    settle(page, "Agent trace")
    assert page.get_by_text("at fault for: tool_call_accuracy").count() == 1  # only the call the judge named
    assert page.get_by_text('change_booking  (id call_005)').count() == 1
    assert page.get_by_text('fare difference 35 EUR exceeds card pre-authorisation', exact=False).count() >= 1
    assert page.get_by_text("error result", exact=False).count() >= 1
    screenshot(page, SHOTS, "row-trace")
    page.goto(f"{url}/results?run={rid}&view=Rows&row=1")
    # the shown text: the data grid also keeps a hidden copy of its cells' text, which can come first in the page
    page.get_by_text("How many bags", exact=False).filter(visible=True).first.wait_for(timeout=60_000)
    settle(page)
    assert page.get_by_text("Result: all", exact=False).count() >= 1  # the knowledge base's long passage list
    page.goto(f"{url}/results?run={rid}&view=Metrics")
    settle(page, "Tool calls")
    table = page.locator('[data-testid="stDataFrame"]').last
    table.wait_for()
    screenshot(page, SHOTS, "tool-success-rates")
    assert page.locator("body").inner_text().count("<script") == 0
