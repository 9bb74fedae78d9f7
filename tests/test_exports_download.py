"""The Results page's downloads in a real headless Chromium (Debian's) against a real `streamlit run app.py`:
one click on an export's link has the engine write it a chunk of rows at a time to a file, which the same request
streams from disk (ui.downloads); the file holds what the stored rows say, at the thresholds of the view (the
URL's), over more rows than one chunk. A link works for the session and browser that it was made for, each click
a new file, and nothing is served to a request without them or after sign-out; the files are gone afterwards."""
from __future__ import annotations

import hashlib
import re
import secrets

import pytest

from evaluators import Store, load_dataset
from evaluators.read.results import open_results
from evaluators.store.schema import Result
from tests.browser import Dashboard, needs_chromium, settle, start_dashboard, stop
from tests.test_exports_stream import _expected_report_rows, _pandas_csv, _previous_jsonl, _Rows
from ui.downloads import GONE
from tests.conftest import default_store

pytestmark = needs_chromium
N = 1100  # three chunks of 500 rows; errors and notes first appear after the first chunk


def _result(i: int) -> Result:
    if i % 400 == 399:
        return Result(i, "coherence", 0, "error", error=f"judge timed out on row {i + 1}")
    outputs = {"coherence": float(i % 5 + 1)}
    if i % 300 == 299:
        outputs["_note"] = f"note on row {i + 1}"
    return Result(i, "coherence", 0, "ok", outputs["coherence"], outputs, reason=f"<b>reason</b> {i + 1}", raw="{}")


def _run(home) -> tuple[Store, str]:
    store = default_store(home)
    rows = [{"query": f"=Question {i}, \"quoted\"", "response": f"Answer {i}\nÉLAN <script>x</script>"} for i in range(N)]
    spec = {"metrics": ["coherence"], "thresholds": {"coherence": 3}}  # the URL's threshold, 4, is in force
    rid = store.create_run(store.save_dataset(load_dataset(rows)), spec, "h", "export run")
    store.write_results(rid, [_result(i) for i in range(N)])
    store.update_run(rid, status="completed", tasks_total=N, tasks_done=N)
    return store, rid


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    store, rid = _run(home)
    proc, url = start_dashboard(home)
    yield url, store, rid, home
    stop(proc)


def _prepare(page, fmt: str, button: str) -> str:
    """The address an export's link points to."""
    link = page.get_by_role("link", name=button)
    link.wait_for(timeout=60_000)
    href = link.get_attribute("href")
    # the token only: 256 random bits, no run id, no path, no key
    assert re.fullmatch(r"exports/[A-Za-z0-9_-]{43}", href), href
    assert link.get_attribute("download") == f"export_run.{fmt}"
    return href


def _download(page, fmt: str, path) -> str:
    """One click on the export's link: the file saved."""
    button = dict(FORMATS)[fmt]
    with page.expect_download(timeout=120_000) as dl:
        page.get_by_role("link", name=button).click()
    dl.value.save_as(str(path))
    assert dl.value.suggested_filename == f"export_run.{fmt}"
    return path.read_bytes().decode("utf-8")


def _nothing(response) -> None:
    """What a refused request gets: a status saying so and one line of text, no file and no run data."""
    assert response.status == 404 and response.text() == GONE
    assert "content-disposition" not in response.headers


FORMATS = (("csv", "Rows as CSV"), ("jsonl", "Rows as JSONL"), ("html", "HTML report"))


def test_each_download_holds_the_stored_rows_at_the_views_thresholds(app, browser, tmp_path):
    url, store, rid, home = app
    page = browser.new_context(viewport={"width": 1500, "height": 1200}, accept_downloads=True).new_page()
    page.goto(f"{url}/results?run={rid}&view=Share+%26+export&th.coherence=4")
    settle(page, "Rows as CSV")
    got, links = {}, {}
    for fmt, button in FORMATS:
        links[fmt] = _prepare(page, fmt, button)
        got[fmt] = _download(page, fmt, tmp_path / f"export.{fmt}")
    assert list((home / "exports").iterdir()) == []  # each file deleted once served
    again = page.request.get(f"{url}/{links['jsonl']}")  # a link followed again: a new file, the same rows
    assert again.status == 200 and again.text() == got["jsonl"]
    assert list((home / "exports").iterdir()) == []
    stored = open_results(store, rid, {"coherence": 4})
    rows = stored.rows()
    assert {r["outputs.coherence.coherence_threshold"] for r in rows} == {4.0}
    assert got["csv"] == _pandas_csv(rows)
    assert got["jsonl"] == _previous_jsonl(rows)
    parser = _Rows()
    parser.feed(got["html"])
    assert len(parser.rows) == N + 1 and parser.rows[1:] == _expected_report_rows(stored)
    assert "<script>x</script>" not in got["html"] and "&lt;b&gt;reason&lt;/b&gt; 1" in got["html"]  # text, escaped


def test_a_guessed_or_forged_link_gets_nothing_and_leaves_the_real_one_working(app, browser, tmp_path):
    url, store, rid, home = app
    page = browser.new_context(viewport={"width": 1500, "height": 1200}, accept_downloads=True).new_page()
    page.goto(f"{url}/results?run={rid}&view=Share+%26+export")
    settle(page, "Rows as CSV")
    token = _prepare(page, "csv", "Rows as CSV").split("/")[1]  # the page's link
    near = token[:-1] + ("A" if token[-1] != "A" else "B")
    for guess in (secrets.token_urlsafe(32), near, rid, token.upper() if token.upper() != token else token.lower()):
        _nothing(page.request.get(f"{url}/exports/{guess}"))
    for forged in ("..%2Fevals.db", f"..%2F..%2F{home.name}%2Fevals.db", f"..%2Fexports%2F{token}.csv"):
        r = page.request.get(f"{url}/exports/{forged}")  # a path, or the file's own name, is never a token
        body = r.body()
        assert b"SQLite format 3" not in body and b"Question 1" not in body and rid.encode() not in body, forged
        assert "content-disposition" not in r.headers
    elsewhere = browser.new_context()  # the real link, leaked to another browser while its page is still open
    _nothing(elsewhere.request.get(f"{url}/exports/{token}"))
    other = elsewhere.new_page()
    other.goto(f"{url}/runs")  # even one that holds a cookie of this dashboard's own
    settle(other, "Runs")
    assert "_streamlit_xsrf" in {c["name"] for c in elsewhere.cookies()}
    _nothing(other.request.get(f"{url}/exports/{token}"))
    assert "Question 1" in _download(page, "csv", tmp_path / "export.csv")  # the refusals did not spend it
    assert list((home / "exports").iterdir()) == []


@needs_chromium
def test_with_sign_in_a_signed_out_request_or_session_gets_nothing(browser, recorder, tmp_path):
    home = tmp_path / "evalhome"
    store, rid = _run(home)
    store.engine.dispose()
    digest = hashlib.sha256(b"export password").hexdigest()
    dash = Dashboard(home, tmp_path / "server-logs", recorder, EVAL_DASHBOARD_PASSWORD_SHA256=digest)
    try:
        page = browser.new_context(viewport={"width": 1500, "height": 1200}, accept_downloads=True).new_page()
        page.goto(f"{dash.url}/results?run={rid}&view=Share+%26+export")
        settle(page, "sign in to continue")
        page.get_by_role("textbox", name="Your name").fill("Ana")
        page.get_by_role("textbox", name="Password").fill("export password")
        page.get_by_role("button", name="Sign in").click()
        settle(page, "Rows as CSV")
        _prepare(page, "csv", "Rows as CSV")
        jsonl = _prepare(page, "jsonl", "Rows as JSONL")
        outsider = browser.new_context().request  # a browser that never signed in
        for guess in (secrets.token_urlsafe(32), rid, ""):
            r = outsider.get(f"{dash.url}/exports/{guess}")
            assert b"Question 1" not in r.body() and "content-disposition" not in r.headers
        assert "Question 1" in _download(page, "csv", tmp_path / "signed_in.csv")  # signed in, a link works
        page.get_by_role("button", name="Sign out").click()
        settle(page, "sign in to continue")
        _nothing(page.request.get(f"{dash.url}/{jsonl}"))  # signed out, the page's own link gets nothing
        assert list((home / "exports").iterdir()) == []  # and its file is gone
    finally:
        dash.stop()
    assert recorder.seen == []
