"""An agent run in a real headless Chromium (Debian's): a row's trace and the tools' success rates.

The bundled sample (``data/agent_trips.jsonl``, row 3 with latency and tokens planted as agent logs record them)
is evaluated with the computed task_navigation_efficiency and a judged tool_call_accuracy (the loopback judge
fails row 3, naming the call it found at fault). The Rows tab shows row 3's turns, each call with its arguments
and its result as text, the failed call marked as the judge's fault, a long result folded; the Trace tab, one
click from the run, the same trace with the arguments in monospace and the planted latency and tokens; the
Metrics tab shows each tool's success rate. Screenshots: artifacts/agents/.
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


def planted(folder) -> str:
    """The sample, row 3 with what agent logs record of cost: the first model call's usage and latency, the
    faulty call's latency on its part, the first tool's run time on its tool message."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    first, tool = rows[2]["response"][0], rows[2]["response"][1]
    assert first["content"][0]["tool_call_id"] == "call_003" and tool["tool_call_id"] == "call_003"
    first.update(usage={"prompt_tokens": 412, "completion_tokens": 18}, latency_ms=730)
    tool["latency_ms"] = 85
    faulty = [p for m in rows[2]["response"] for p in m["content"] if isinstance(p, dict)
              and p.get("tool_call_id") == FAULTY and p.get("type") == "tool_call"]
    faulty[0]["latency_ms"] = 1240
    path = folder / "agent_trips_costs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    store = default_store(home)
    with JudgeServer(reply) as server:
        res = evaluate(planted(tmp_path), ["task_navigation_efficiency", "tool_call_accuracy"], store=store,
                       judge=JudgeConfig(model="m", provider="compatible", base_url=server.url, max_retries=1))
    proc, url = start_dashboard(home)
    yield url, res.run_id
    stop(proc)


def test_a_rows_trace_and_the_tools_success_rates(app, browser):
    url, rid = app
    page = browser.new_context(viewport={"width": 1500, "height": 3400}).new_page()
    page.goto(f"{url}/results?run={rid}&view=Rows&row=3")
    settle(page, "Agent trace")
    assert page.get_by_text("at fault for: tool_call_accuracy").count() == 1  # only the call the judge named
    assert page.get_by_text("change_booking · id call_005 · error result").count() == 1
    # in a code block, which draws its highlighted text after the script run ends: waited for
    page.get_by_text("fare difference 35 EUR exceeds card pre-authorisation", exact=False).first.wait_for(
        timeout=30_000)
    assert page.get_by_text("error result", exact=False).count() >= 1
    screenshot(page, SHOTS, "row-trace")
    page.goto(f"{url}/results?run={rid}&view=Rows&row=2")
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


MONO = "el => getComputedStyle(el).fontFamily"


def test_the_trace_tab_one_click_from_the_run(app, browser):
    """From the run's Results page one click (the Trace tab) shows a row's trace; row 3's: each call's arguments
    in monospace, the planted latency and tokens, the call with an error result marked."""
    url, rid = app
    page = browser.new_context(viewport={"width": 1280, "height": 2400}).new_page()
    page.goto(f"{url}/results?run={rid}&row=3")
    settle(page, "Overview")
    page.get_by_role("tab", name="Trace").click()
    page.wait_for_url("**view=Trace**", timeout=30_000)
    settle(page, "Agent trace")
    faulty = page.locator('[data-testid="stExpander"]').filter(has_text="change_booking · id call_005")
    faulty.first.wait_for(timeout=30_000)
    assert faulty.count() == 1
    summary = faulty.locator("summary").inner_text()
    assert "error result" in summary and "1,240 ms" in summary  # the latency planted on the call
    # marked: an error box in it, the judge's fault named
    assert faulty.locator('[data-testid="stAlertContentError"]').filter(
        has_text="at fault for: tool_call_accuracy").count() == 1
    # the arguments (flight_id is in them, not in the result), drawn after the script run: waited for
    args = faulty.get_by_text('"BA763"', exact=False).filter(visible=True).first
    args.wait_for(timeout=30_000)
    assert "monospace" in args.evaluate(MONO).lower()
    # the tool's run time, from its tool message, on the call it answers
    first = page.locator('[data-testid="stExpander"]').filter(has_text="get_booking · id call_003")
    assert "85 ms" in first.locator("summary").inner_text()
    # the model call's latency and tokens, on its turn; the run's total above
    turn = page.get_by_text("730 ms · 430 tokens (412 in, 18 out)", exact=True).filter(visible=True)
    turn.first.wait_for(timeout=30_000)
    assert turn.count() == 1
    total = page.get_by_text("1 with an error · recorded: 430 tokens", exact=False).filter(visible=True)
    total.first.wait_for(timeout=30_000)
    screenshot(page, SHOTS, "trace-tab")
    # the other rows: the buttons walk them
    page.get_by_role("button", name="Next row ›").click()
    page.wait_for_url("**row=4**", timeout=30_000)
    settle(page, "Row 4")
