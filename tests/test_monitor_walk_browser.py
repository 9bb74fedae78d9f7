"""Issue 32's done-when, walked in Debian's headless Chromium: an instrumented app's traffic (tests/monitor_app.py, the
``openai`` client and opentelemetry-instrumentation-openai-v2) arrives through the receiver (`monitor serve`) in two
batches an hour apart (tests/monitor_walk_app.py moves its clock), a monitor rule judges it with the loopback judge,
whose verdicts plant a shift (the first batch passes 36 of 40, the second 16 of 40); the Monitoring page shows the
rate per window with its Wilson interval and the number judged; an alert rule made with the CLI fires on the shift
and its webhook reaches a loopback receiver with a valid X-Signature; the page's Alerts panel shows it; a reviewer
makes a review sample on the page, reviews its 20 traces on the Review page with the keyboard, and the rate
corrected by their reviews appears on the Monitoring page; a click on a bar of the traffic chart lists that window's
traces. Every value asserted is the one planted or computed here (statsmodels' Wilson interval, ppi-python's
corrected rate, the test's own HMAC and CUSUM). Screenshots: artifacts/screenshots/monitoring-walk-*.png."""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import hmac
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from tests.browser import needs_chromium, screenshot, settle, start_dashboard, stop
from tests.conftest import ROOT, default_store, env_for_subprocess, home_url
from tests.judge_server import JudgeServer
from tests.monitor_procs import ReceiverProcess
from tests.procs import wait_until
from tests.test_monitor_alerts_webhooks import SECRET, Receiver
from evaluators.read.monitor_reviewed import judged_in_windows, reviewed_series

pytestmark = needs_chromium
SHOTS = ROOT / "artifacts" / "screenshots"
HOUR = 3600 * 10**9
N = 40  # calls a batch


def bad_first(i: int) -> bool:  # the first batch: 4 bad answers of 40 (questions 3, 13, 23, 33)
    return i % 10 == 3


def bad_then(i: int) -> bool:  # an hour later: 24 of 40
    return i % 10 < 6


def cusum(bad: list[bool], bound: float, h: float = 3.0, min_n: int = 30) -> tuple[int, int]:
    """The alert's reference (as tests/test_monitor_alerts_e2e.py's): a Bernoulli CUSUM of p1 = bound + 0.4
    min(bound, 1 - bound) against the bound; (the index it fires at, the index its excursion began at)."""
    p1 = bound + 0.4 * min(bound, 1 - bound)
    s, began = 0.0, 0
    for i, b in enumerate(bad):
        s = max(0.0, s + (np.log(p1 / bound) if b else np.log((1 - p1) / (1 - bound))))
        if s == 0.0:
            began = i + 1
        elif s >= h and i + 1 >= min_n:
            return i, began
    raise AssertionError("the planted shift does not fire the reference")


def pct(rate: float, lo: float, hi: float) -> str:
    return f"{rate:.1%} [{lo:.1%}, {hi:.1%}]"


def _main(*args: str) -> None:
    from evaluators.cli.main import main

    assert main(["monitor", *args]) == 0


def _run_app(tmp_path, receiver, token: str, model_url: str, start_ns: int, name: str) -> list[dict]:
    sent = tmp_path / f"{name}.jsonl"
    env = env_for_subprocess(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
                             OTEL_EXPORTER_OTLP_HEADERS=f"Authorization=Bearer%20{token}",
                             OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
                             OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY")
    app = subprocess.run([sys.executable, str(ROOT / "tests" / "monitor_walk_app.py"), str(start_ns), model_url,
                          str(N), str(sent)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert app.returncode == 0, app.stderr
    return [json.loads(line) for line in sent.read_text(encoding="utf-8").splitlines()]


def test_traffic_judged_alerted_reviewed_and_drilled_in_the_monitoring_page(browser, tmp_path, monkeypatch):
    home = tmp_path / "evalhome"
    store = default_store(home)
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    hour0 = int(dt.datetime.now(dt.timezone.utc).timestamp()) // 3600 * 3600 * 10**9  # this hour's window
    w1, w2 = hour0 - 2 * HOUR, hour0 - HOUR  # the two batches' windows
    first, then, hook = _traffic_judged(tmp_path, home, store, w1, w2)
    alert = _alert_checked(store, first, then, hook)
    proc, url = start_dashboard(home)
    try:
        page = browser.new_context(viewport={"width": 1500, "height": 1400}, accept_downloads=True).new_page()
        # a table's CSV as a plain download (else Chromium offers its save-file picker, which headless cannot answer)
        page.add_init_script("delete window.showSaveFilePicker")
        _rates_and_alert_on_the_page(page, url, alert, w1, w2)
        mine, judged = _production_reviewed(browser, page, url, store, hour0)
        _corrected_on_the_page(page, url, store, hour0, w1, w2, mine, judged)
        _bar_clicked(page, store, then, w2)
    finally:
        stop(proc)


def _traffic_judged(tmp_path, home, store, w1: int, w2: int):
    """1. The app's two batches, a minute into each window (the second's answers mostly bad), judged by the rule's
    round, which also evaluates the alert rules; returns (first, then: what the app got, the webhook receiver)."""
    url_db = home_url(home)
    store.ensure_monitor_project("shop", quiet_seconds=0)  # mapped once its root span has ended
    _, token = store.create_ingest_token("shop")
    schedule = {"bad": bad_first}

    def model(prompt: str, request: dict) -> str:
        i = int(re.search(r"Question (\d+):", prompt).group(1))
        return ("BAD answer" if schedule["bad"](i) else "fine answer") + f" to question {i}"

    hook = Receiver()
    with JudgeServer(responder=model) as llm, \
            JudgeServer(responder=lambda prompt, req: json.dumps(
                {"reason": "planted", "score": 1 if "BAD answer" in prompt else 5})) as judge, \
            ReceiverProcess(url_db, "--assemble-every", "0.2") as receiver, hook:
        db = ("--db", url_db)
        _main("rule", "add", "--project", "shop", "--name", "quality", "--metrics", "coherence",
              "--judge-base-url", judge.url, *db)
        _main("alert", "add", "--project", "shop", "--name", "low", "--metric", "coherence", "--below", "80",
              "--webhook", hook.url, "--secret-env", "HOOK_SECRET", *db)
        first = _run_app(tmp_path, receiver, token, llm.url, w1 + 60 * 10**9, "first")
        schedule["bad"] = bad_then
        then = _run_app(tmp_path, receiver, token, llm.url, w2 + 60 * 10**9, "then")
        assert sum("BAD" in r["response"] for r in first) == 4 and sum("BAD" in r["response"] for r in then) == 24
        wait_until(lambda: store.trace_counts("shop")["mapped"] == 2 * N, what="both batches mapped", timeout=60)
        _main("rule", "run", "--project", "shop", *db)  # the rule's round: judged, then the alert rules
        assert len(judge.calls) == 2 * N
    return first, then, hook


def _alert_checked(store, first: list, then: list, hook) -> dict:
    """3. (the round above) the alert fired on the shift, its webhook signed with the rule's secret."""
    stream = [("BAD" in r["response"]) for r in first + then]  # in event time: the calls were made in order
    fired, began = cusum(stream, 0.2)
    [alert] = store.alert_events("shop")
    n, passed = fired - began + 1, sum(not b for b in stream[began:fired + 1])
    low, high = proportion_confint(passed, n, alpha=0.05, method="wilson")
    assert (alert["n"], alert["rate"]) == (n, pytest.approx(passed / n))
    assert (alert["low"], alert["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert alert["delivery"] == "delivered" and fired >= N  # fired in the second batch
    assert alert["fired_ns"] == sorted(start for _, start in _starts(store))[fired]  # in event time
    [(body, sig, verified)] = hook.got
    assert verified and hmac.compare_digest(sig, hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest())
    sent = json.loads(body)
    assert (sent["alert"], sent["id"], sent["n"], sent["text"]) == ("low", alert["id"], n, alert["text"])
    assert SECRET not in body.decode()
    return alert


def _rates_and_alert_on_the_page(page, url: str, alert: dict, w1: int, w2: int) -> None:
    """2. The rate per window with its Wilson interval and the number judged under each point; 3. the Alerts
    panel: the alert that fired, in its own words, delivered."""
    rates = _open_monitoring(page, url, f"{2 * N} judged traces in the range")
    points = rates.locator(".layer_4_marks path")
    assert points.count() == 2
    for p, (w, k) in zip(points.all(), ((w1, 36), (w2, 16))):
        lo, hi = proportion_confint(k, N, alpha=0.05, method="wilson")
        assert p.get_attribute("aria-label").endswith(
            f"pass rate: {k / N:.6%}; window: {_hm(w)}; 95% low: {lo:.1%}; 95% high: {hi:.1%}; judged: {N}")
    assert rates.locator(".layer_5_marks text").all_text_contents() == [str(N), str(N)]  # n under the points
    assert rates.locator(".layer_1_marks path").count() == 1  # the band (both windows one stretch)
    screenshot(page, SHOTS, "monitoring-walk-1-rates")
    main = page.locator('[data-testid="stMain"]')
    assert f"#{alert['id']} {alert['text']}" in main.inner_text()
    page.get_by_text(f"#{alert['id']} {alert['text']}").scroll_into_view_if_needed()
    screenshot(page, SHOTS, "monitoring-walk-2-alert")


def _production_reviewed(browser, page, url: str, store, hour0: int) -> tuple[dict, list]:
    """4. A review sample of production made on the page (10 traces a window), reviewed blind by keyboard, the
    reviewer overruling the judge on 3; returns (row -> the reviewer's score, the judged traces by window)."""
    page.get_by_text("Review a sample of production").click()
    page.get_by_role("button", name="Review a sample of these windows").click()
    settle(page, "20 traces to review in 1 queue(s).")
    [q] = _queues(store)
    link = page.get_by_role("link", name=f"Review 20 traces (queue {q['id']})")
    review = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
    review.goto(f"{url}/{link.get_attribute('href')}")
    settle(review, "Your name")
    review.get_by_label("Your name", exact=True).and_(review.get_by_test_id("stTextInputField")).fill("ann")
    review.keyboard.press("Enter")
    settle(review, "0 of 20 rows reviewed by you")
    assert review.get_by_text("hidden until you answer").count() == 1  # blind
    since = hour0 + HOUR - 86_400 * 10**9
    judged, _ = judged_in_windows(store, "shop", "quality", 1, "coherence", since, hour0 + HOUR, HOUR)
    judge_of = {row: float(v) for _, _, row, v in judged}
    overruled = set(q["rows"][:2] + q["rows"][12:13])  # the reviewer disagrees with the judge on 3 rows
    mine = {row: (6.0 - judge_of[row]) if row in overruled else judge_of[row] for row in q["rows"]}
    for k, row in enumerate(q["rows"]):  # in the queue's order, a digit each
        review.keyboard.press(str(int(mine[row])))
        wait_until(lambda: len(store.reviews(q["run_id"], reviewer="ann")) == k + 1, 30, f"verdict {k + 1}")
        settle(review, f"{k + 1} of 20 rows reviewed by you")
    assert {r["row_idx"]: r["value"] for r in store.reviews(q["run_id"], reviewer="ann")} == mine
    screenshot(review, SHOTS, "monitoring-walk-3-reviewed")
    return mine, judged


def _corrected_on_the_page(page, url: str, store, hour0: int, w1: int, w2: int, mine: dict, judged: list) -> None:
    """The corrected rate per window: the point ppi-python computes from these verdicts (PPI++), its interval at
    least ppi-python's cut to [0, 1] (the engine widens it when a verdict's reviews hold few disagreements, as
    here: evaluators.core.inference's guard), and the same numbers the engine's read gives."""
    import ppi_py

    since = hour0 + HOUR - 86_400 * 10**9
    window_of = {row: int(w) for w, _, row, _ in judged}
    judge_of = {row: float(v) for _, _, row, v in judged}
    table = _open_monitoring(page, url, "Windows people reviewed",
                             then=lambda: _grid_text(page, "corrected by reviews"))
    shown = {line.split(",", 1)[0]: next(csv.reader([line])) for line in table.splitlines()[1:]}
    engine = reviewed_series(store, "shop", "quality", "coherence", since, hour0 + HOUR, 3600)
    assert sorted(shown) == [_hm(w1), _hm(w2)] and sorted(engine) == [w1, w2]
    for w_ns in (w1, w2):
        w = (w_ns - since) // HOUR
        rows = [r for r in window_of if window_of[r] == w]
        sampled = [r for r in rows if r in mine]
        y = np.array([mine[r] >= 3 for r in sampled], float)
        f = np.array([judge_of[r] >= 3 for r in sampled], float)
        rest = np.array([judge_of[r] >= 3 for r in rows if r not in mine], float)
        lo, hi = (float(x[0]) for x in ppi_py.ppi_mean_ci(y, f, rest, alpha=0.05))
        est = float(ppi_py.ppi_mean_pointestimate(y, f, rest)[0])
        got = engine[w_ns]
        assert len(sampled) == got["reviews"] == 10
        assert got["corrected"] == pytest.approx(min(1.0, max(0.0, est)), abs=1e-9)  # a rate, cut to [0, 1]
        assert got["low"] <= max(0.0, lo) + 1e-9 and got["high"] >= min(1.0, hi) - 1e-9
        k = {w1: 36, w2: 16}[w_ns]
        judge_line = pct(k / N, *proportion_confint(k, N, alpha=0.05, method="wilson"))
        assert shown[_hm(w_ns)][1:5] == [str(N), judge_line, "10", pct(got["corrected"], got["low"], got["high"])]
    page.get_by_text("Windows people reviewed").scroll_into_view_if_needed()
    screenshot(page, SHOTS, "monitoring-walk-4-corrected")


def _bar_clicked(page, store, then: list, w2: int) -> None:
    """5. A click on the second window's bar lists the 40 traces it counts (they started in it, arrived later)."""
    traffic = page.locator(".vega-embed svg.marks").filter(has_text="traces per 1 hour")
    traffic.scroll_into_view_if_needed()
    # the bar, clicked where it is drawn (the judged part over it: the rule judged every trace), as a person does
    [bar] = [b for b in traffic.locator(".layer_0_marks path").all()
             if f"window: {_hm(w2)};" in b.get_attribute("aria-label")]
    assert {f"traces: {N}", f"judged: {N}"} <= set(bar.get_attribute("aria-label").split("; "))
    box = bar.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(f"**at={w2}**", timeout=30_000)
    settle(page, f"The traces that started from {_hm(w2)}:00 to {_hm(w2 + HOUR)}:00 UTC")
    listed = list(csv.DictReader(io.StringIO(_grid_text(page, "arrived (UTC)"))))
    started = {tid for tid, start in _starts(store) if w2 <= start < w2 + HOUR}
    assert len(started) == N and {r["trace"] for r in listed} == started
    assert sorted(r["response"] for r in listed) == sorted(r["response"] for r in then)  # what the app got
    page.get_by_text("The traces that started from").scroll_into_view_if_needed()
    screenshot(page, SHOTS, "monitoring-walk-5-window")


def _hm(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _queues(store) -> list[dict]:
    import sqlalchemy as sa

    with store.engine.connect() as c:
        ids = [r[0] for r in c.execute(sa.text("SELECT id FROM review_queues"))]
    return [{**store.get_queue(i), "id": i} for i in ids]


def _starts(store) -> list[tuple[str, int]]:
    import sqlalchemy as sa

    with store.engine.connect() as c:
        return [tuple(r) for r in c.execute(sa.text("SELECT trace_id, start_ns FROM monitor_traces"))]


def _grid_text(page, heading: str) -> str:
    """The CSV of the page's table whose columns include ``heading``, as its toolbar's download gives it (the grid
    is drawn on a canvas: its cells are not in the DOM)."""
    seen = []
    frames = page.locator('[data-testid="stFullScreenFrame"]').filter(has=page.locator('[data-testid="stDataFrame"]'))
    for frame in frames.all():
        frame.scroll_into_view_if_needed()
        frame.locator('[data-testid="stDataFrame"]').hover()
        with page.expect_download(timeout=15_000) as got:
            # (dispatched: the toolbar shows on hover, and a sticky header may lie over it)
            frame.get_by_role("button", name="Download as CSV").dispatch_event("click")
        text = Path(got.value.path()).read_text(encoding="utf-8-sig")
        if heading in text.splitlines()[0]:
            return text
        seen.append(text.splitlines()[0])
    raise AssertionError(f"no table with {heading!r}: {seen}")


def _open_monitoring(page, url: str, text: str, then=None):
    """The Monitoring page loaded (again: its reads are cached 5 s) until ``text`` shows; its charts drawn. Returns
    the rate chart (an SVG), or what ``then`` reads."""
    def shown() -> bool:
        page.goto(f"{url}/monitoring?project=shop")
        settle(page, "Rates over time")
        return page.get_by_text(text).count() > 0
    wait_until(shown, what=text, timeout=60)
    page.wait_for_function("() => document.querySelectorAll('.vega-embed svg.marks').length >= 3")
    if then is not None:
        return then()
    return page.locator(".vega-embed svg.marks").filter(has_text="pass rate per 1 hour")
