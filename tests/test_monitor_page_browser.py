"""The Monitoring page in Chromium, as a team's first use of it on a fresh machine: a project and its token made in
the page, the page's environment lines and snippet copied into an app (the ``openai`` client against a loopback
model) that runs them as they are, its trace received by the monitor's receiver, listed, and opened with a click; the
model's name (so the span's name) and its answer hold Markdown and HTML, shown as text, loading nothing."""
from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from tests.browser import Recorder, screenshot, settle, start_dashboard, stop
from tests.conftest import ROOT, default_store, env_for_subprocess, home_url
from tests.judge_server import JudgeServer
from tests.monitor_procs import ReceiverProcess
from tests.procs import wait_until

SHOTS = ROOT / "artifacts" / "screenshots"


def test_a_token_made_in_the_page_runs_its_snippet_and_the_trace_opens_as_text(browser, tmp_path, monkeypatch):
    outside = Recorder()  # where the hostile text points: nothing may reach it
    model = f"gpt **4o** <img src='{outside.url}/span'>"
    answer = f"![x]({outside.url}/answer) <b>bold</b> [link](javascript:alert(1))"
    home = tmp_path / "evalhome"
    store = default_store(home)
    with JudgeServer(responder=lambda prompt, request: answer) as llm, \
            ReceiverProcess(home_url(home), "--assemble-every", "0.2") as receiver:
        monkeypatch.setenv("EVAL_MONITOR_PORT", str(receiver.port))  # the page's endpoint: this receiver
        proc, url = start_dashboard(home)
        try:
            page = browser.new_page()
            page.goto(f"{url}/monitoring")
            settle(page, "No project yet")
            page.get_by_label("New project's name").fill("shop")
            page.get_by_role("button", name="Make the project and its token").click()
            settle(page, "It is shown this once")
            assert "project=shop" in page.url and "evm_" not in page.url
            codes = page.locator('[data-testid="stCode"]').all_inner_texts()
            env_lines = next(c for c in codes if "OTEL_EXPORTER_OTLP_HEADERS" in c)
            snippet = next(c for c in codes if c.startswith("from opentelemetry import trace"))
            env = dict(kv.split("=", 1) for line in env_lines.splitlines() for kv in shlex.split(line)[1:])
            token = env["OTEL_EXPORTER_OTLP_HEADERS"].split("%20", 1)[1]
            assert store.token_project(token) == "shop"
            store.ensure_monitor_project("shop", quiet_seconds=0)  # mapped once its root span has ended
            app = tmp_path / "app.py"
            app.write_text(snippet + "\nimport openai\n"
                           f"c = openai.OpenAI(base_url={llm.url!r}, api_key='sk-app', max_retries=0)\n"
                           f"c.chat.completions.create(model={model!r}, messages=[{{'role': 'user', "
                           "'content': 'Where is my refund?'}])\np.shutdown()\n", encoding="utf-8")
            run = subprocess.run([sys.executable, str(app)], cwd=tmp_path, env=env_for_subprocess(**env),
                                 capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stderr
            wait_until(lambda: store.trace_counts("shop")["mapped"] == 1, what="the app's trace mapped", timeout=60)
            grid = page.locator('[data-testid="stDataFrame"]').first

            def listed() -> bool:  # the page's reads are cached for 5 s: loaded again until the trace is listed
                page.goto(f"{url}/monitoring?project=shop")
                settle(page, "Rates over time")
                return grid.count() > 0
            wait_until(listed, what="the trace listed", timeout=60)
            settle(page)
            grid.scroll_into_view_if_needed()
            box = grid.bounding_box()
            page.mouse.click(box["x"] + 20, box["y"] + 35 + 18)  # the first row's selection box (a canvas)
            page.wait_for_url("**trace=**", timeout=30_000)
            settle(page, "where each field came from")
            main = page.locator('[data-testid="stMain"]').inner_text()
            assert f"chat {model}" in main  # the span's name, as the instrumentation made it, as text
            assert answer in main and "Where is my refund?" in main
            assert "response ← gen_ai.output.messages" in main
            assert page.locator('[data-testid="stMain"] img').count() == 0
            assert page.locator('[data-testid="stMain"] b').count() == 0
            assert "Something went wrong" not in main
            # its turns in the trace view the Results page's Trace tab draws (issue 35): the question and the
            # model's answer as text, the call's latency and tokens
            assert "Agent trace" in main and "1 turn" not in main and "2 turns" in main
            page.get_by_text("Agent trace").first.scroll_into_view_if_needed()
            screenshot(page, SHOTS, "monitoring-trace-view")
        finally:
            stop(proc)
            outside.close()
    assert outside.seen == []
