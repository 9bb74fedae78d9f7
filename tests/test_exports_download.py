"""The Results page's downloads in a real headless Chromium (Debian's): each button hands over the file the
engine writes a chunk of rows at a time, and that file holds what the stored rows say, at the thresholds
of the view (the URL's), over more rows than one chunk."""
from __future__ import annotations

import pytest

from evaluators import Store, load_dataset
from evaluators.read.results import open_results
from evaluators.store.schema import Result
from tests.browser import needs_chromium, settle, start_dashboard, stop
from tests.test_exports_stream import _expected_report_rows, _pandas_csv, _previous_jsonl, _Rows

pytestmark = needs_chromium
N = 1100  # three chunks of 500 rows; errors and notes first appear after the first chunk


def _result(i: int) -> Result:
    if i % 400 == 399:
        return Result(i, "coherence", 0, "error", error=f"judge timed out on row {i + 1}")
    outputs = {"coherence": float(i % 5 + 1)}
    if i % 300 == 299:
        outputs["_note"] = f"note on row {i + 1}"
    return Result(i, "coherence", 0, "ok", outputs["coherence"], outputs, reason=f"<b>reason</b> {i + 1}", raw="{}")


@pytest.fixture
def app(tmp_path):
    home = tmp_path / "evalhome"
    store = Store(f"sqlite:///{home / 'evals.db'}")
    rows = [{"query": f"=Question {i}, \"quoted\"", "response": f"Answer {i}\nÉLAN <script>x</script>"} for i in range(N)]
    spec = {"metrics": ["coherence"], "thresholds": {"coherence": 3}}  # the URL's threshold, 4, is in force
    rid = store.create_run(store.save_dataset(load_dataset(rows)), spec, "h", "export run")
    store.write_results(rid, [_result(i) for i in range(N)])
    store.update_run(rid, status="completed", tasks_total=N, tasks_done=N)
    proc, url = start_dashboard(home)
    yield url, store, rid
    stop(proc)


def test_each_download_holds_the_stored_rows_at_the_views_thresholds(app, browser, tmp_path):
    url, store, rid = app
    page = browser.new_context(viewport={"width": 1500, "height": 1200}, accept_downloads=True).new_page()
    page.goto(f"{url}/results?run={rid}&view=Share+%26+export&th.coherence=4")
    settle(page, "Rows as CSV")
    got = {}
    for fmt, button in (("csv", "Rows as CSV"), ("jsonl", "Rows as JSONL"), ("html", "HTML report")):
        with page.expect_download(timeout=120_000) as dl:
            page.get_by_role("button", name=button).click()
        path = tmp_path / f"export.{fmt}"
        dl.value.save_as(str(path))
        got[fmt] = path.read_bytes().decode("utf-8")
    stored = open_results(store, rid, {"coherence": 4})
    rows = stored.rows()
    assert {r["outputs.coherence.coherence_threshold"] for r in rows} == {4.0}
    assert got["csv"] == _pandas_csv(rows)
    assert got["jsonl"] == _previous_jsonl(rows)
    parser = _Rows()
    parser.feed(got["html"])
    assert len(parser.rows) == N + 1 and parser.rows[1:] == _expected_report_rows(stored)
    assert "<script>x</script>" not in got["html"] and "&lt;b&gt;reason&lt;/b&gt; 1" in got["html"]  # text, escaped
