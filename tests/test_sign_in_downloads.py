"""The Review page's Agreement downloads (verdicts CSV and JSON lines, metrics.json) are served as Results'
exports are (ui.downloads), never from Streamlit's /media/ route: with sign-in on, a link gets nothing
without the browser's cookie, after sign-out, or after its browser closed; in its own signed-in page it
serves the stored verdicts, written anew on each click. Headless Chromium against a real `streamlit run` with a password."""
from __future__ import annotations

import csv
import hashlib
import io
import re
import urllib.request

from evaluators import load_dataset
from evaluators.store.schema import Result
from tests.browser import Dashboard, needs_chromium, settle
from tests.conftest import ROOT, default_store
from tests.procs import wait_until
from ui.downloads import GONE

pytestmark = needs_chromium
PASSWORD = "agreement password"


def _reviewed(home) -> str:
    store = default_store(home)
    ds = load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(4)])
    rid = store.create_run(store.save_dataset(ds), {"metrics": ["coherence"], "thresholds": {"coherence": 3}}, "h", "run")
    store.write_results(rid, [Result(i, "coherence", 0, "ok", 4.0, {"coherence": 4.0}) for i in range(4)])
    store.update_run(rid, status="completed", tasks_total=4, tasks_done=4)
    store.save_review(rid, 1, "coherence", "alice", 5.0, note="alice: clearly fine")
    store.save_review(rid, 2, "coherence", "bob", 1.0)
    store.engine.dispose()
    return rid


def _signed_in(browser, dash, rid):
    context = browser.new_context(viewport={"width": 1500, "height": 1400}, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{dash.url}/review?run={rid}&view=Agreement")
    settle(page, "sign in to continue")
    page.get_by_role("textbox", name="Your name").fill("carol")
    page.get_by_role("textbox", name="Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    settle(page, "Verdicts (CSV)")
    assert page.locator('[data-testid="stDownloadButton"], a[href*="/media/"]').count() == 0  # not Streamlit's
    return context, page


def _link(page, button: str, filename: str) -> str:
    link = page.get_by_role("link", name=button)
    link.wait_for(timeout=60_000)
    assert link.get_attribute("download") == filename
    href = link.get_attribute("href")
    assert re.fullmatch(r"exports/[A-Za-z0-9_-]{43}", href), href
    return href


def _refused(response) -> None:
    assert response.status == 404 and response.text() == GONE and "content-disposition" not in response.headers


def _sessions(url: str) -> int:
    text = urllib.request.urlopen(f"{url}/_stcore/metrics?families=active_sessions", timeout=5).read().decode()
    return int(re.search(r"^active_sessions(?:\{[^}]*\})?\s+(\d+)", text, re.M).group(1))


def test_agreement_downloads_serve_only_the_signed_in_browser_that_asked(browser, recorder, tmp_path):
    home = tmp_path / "evalhome"
    rid = _reviewed(home)
    dash = Dashboard(home, tmp_path / "logs", recorder,
                     EVAL_DASHBOARD_PASSWORD_SHA256=hashlib.sha256(PASSWORD.encode()).hexdigest())
    try:
        context, page = _signed_in(browser, dash, rid)
        csv_href = _link(page, "Verdicts (CSV)", f"verdicts-{rid}.csv")
        _refused(browser.new_context().request.get(f"{dash.url}/{csv_href}"))  # no cookie: nothing
        with page.expect_download(timeout=60_000) as dl:  # its own page: the stored verdicts
            page.get_by_role("link", name="Verdicts (CSV)").click()  # one click
        rows = list(csv.DictReader(io.StringIO(open(dl.value.path(), encoding="utf-8-sig").read())))
        assert [(r["reviewer"], r["value"], r["note"]) for r in rows] == [("alice", "5.0", "alice: clearly fine"),
                                                                         ("bob", "1.0", "")]
        again = page.request.get(f"{dash.url}/{csv_href}")  # its own browser again: written anew
        assert again.status == 200 and "alice: clearly fine" in again.text()
        jsonl_href = _link(page, "Verdicts (JSON lines)", f"verdicts-{rid}.jsonl")
        page.get_by_role("button", name="Sign out").click()
        settle(page, "sign in to continue")
        _refused(page.request.get(f"{dash.url}/{jsonl_href}"))  # signed out: its own page's link is dead
        context.close()
        # a browser that closed: its cookies kept and sent again, the link is dead with its session
        context, page = _signed_in(browser, dash, rid)
        json_href = _link(page, "metrics.json with the agreement keys", f"metrics-{rid}.json")
        cookies = context.storage_state()
        context.close()
        wait_until(lambda: _sessions(dash.url) == 0, timeout=30, what="the closed browser's session gone")
        _refused(browser.new_context(storage_state=cookies).request.get(f"{dash.url}/{json_href}"))
        assert list((home / "exports").iterdir()) == []  # no file left behind by a refused link
    finally:
        dash.stop()
    assert recorder.seen == []


def test_no_page_serves_a_download_from_streamlits_media_route():
    """Found by review after the Agreement tab's fix: an attack set's JSONL (Jailbreak attacks) and a metric's
    export (New metric) still came from st.download_button, whose /media/ URL any request gets, signed in or
    not. Every download goes through ui.downloads (single use, bound to the browser that asked)."""
    import re

    calls = [f"{p.relative_to(ROOT)}:{n}" for p in [*(ROOT / "ui").glob("*.py"), *(ROOT / "pages").glob("*.py"),
                                                     ROOT / "app.py"]
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\.download_button\(", line)]
    assert calls == []
