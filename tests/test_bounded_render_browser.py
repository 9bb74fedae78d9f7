"""The issue's runaway template in the browser (headless Debian Chromium): tried on 5 rows on New metric, and
ticked on New evaluation as a metric a store saved before saves were checked (its estimate renders prompts in
the server). Each row says why it has no prompt, the pages answer, and once the tab is closed the server's
render process is asleep, not left at 100% of a core."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import needs_chromium, settle, start_dashboard, stop
from tests.conftest import default_store
from tests.procs import PROC, cmdline, wait_until
from tests.test_bounded_render import NESTED_SILENT, WHY, _state, prompty

pytestmark = needs_chromium


def _render_processes(server_pid: int) -> list[int]:
    """The dashboard server's render processes (children running evaluators/metrics/custom/bounded.py)."""
    out = []
    for d in PROC.iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == server_pid and any(a.endswith(b"bounded.py") for a in cmdline(int(d.name))):
                out.append(int(d.name))
    return out


def _judge(page, url: str) -> None:
    for label, value in (("Base URL", url), ("Model (Azure: deployment)", "loopback-judge")):
        if page.get_by_label(label).input_value() != value:
            page.get_by_label(label).fill(value)
            page.get_by_label(label).press("Enter")
            settle(page)


def test_a_runaway_template_on_new_metric_and_new_evaluation_leaves_no_core_busy(browser, judge_server, tmp_path):
    from evaluators.store.saved_metrics import SavedMetricRow

    proc, url = start_dashboard(tmp_path / "evalhome")
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        page.goto(url + "/")
        settle(page)
        store = default_store(tmp_path / "evalhome")
        single = next(d for d in store.list_datasets() if d["shape"] == "single")
        with store.session() as s, s.begin():  # saved before saves were tried: New evaluation lists it
            s.add(SavedMetricRow(name="stored_loop", version=1, format="prompty", description="",
                                 text=prompty("stored_loop", NESTED_SILENT + "{{ response }}")))
        page.goto(url + f"/metric?dataset={single['id']}")
        settle(page, "Start from")
        page.locator('[data-testid="stSelectbox"]').filter(has_text="Start from").click()
        page.get_by_role("option", name="A metric file's text (paste it)").click()
        settle(page, "Format")
        page.locator('[data-testid="stSelectbox"]').filter(has_text="Format").click()
        page.get_by_role("option", name="Prompty (.prompty)").click()
        settle(page)
        box = page.get_by_label("Definition (editable)", exact=True)
        box.fill(prompty("looping", NESTED_SILENT))
        box.press("Control+Enter")
        settle(page, "looping: score")
        _judge(page, judge_server.url)
        page.get_by_role("button", name="Try on 5 rows").last.click()
        settle(page, "Row 5:")
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert main.count("the prompt could not be rendered") == 5 and WHY["loop_time"] in main
        assert "Traceback" not in main and judge_server.calls == []

        page.goto(url + f"/new?dataset={single['id']}")
        settle(page, "Your own metrics")
        page.locator('[data-testid="stCheckbox"]').filter(has_text="stored_loop").first.locator("label").click()
        settle(page)
        _judge(page, judge_server.url)
        settle(page, "Judge calls")  # the estimate: its sample failed to render, no call counted
        assert "Traceback" not in page.locator('[data-testid="stMain"]').inner_text()
        page.close()
        renders = _render_processes(proc.pid)
        assert renders, "the server rendered the prompts in a render process of its own"
        for pid in renders:
            wait_until(lambda: _state(pid) in ("S", "Z", ""), timeout=30, what="the render process asleep")
    finally:
        stop(proc)
    for pid in renders:  # and it ends with the server
        wait_until(lambda: _state(pid) in ("Z", ""), timeout=30, what="the render process ended")
