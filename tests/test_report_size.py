"""The HTML report stays self-contained and small: one copy of plotly.js for every chart, each chart drawn.

The bound comes from plotly's own bundle (``plotly.offline.get_plotlyjs()``, the minified library the
report inlines): a 10-row report weighs at most that plus 200 KB, and holds the library exactly once.
"""
from __future__ import annotations

import json

import pytest

from evaluators import JudgeConfig, evaluate
from evaluators.read.report import html_report
from tests.browser import needs_chromium
from tests.conftest import SINGLE

METRICS = ["coherence", "f1_score", "bleu", "rouge", "gleu"]  # five charts, one of them a judge's 1-5 scale


@pytest.fixture
def report(store, judge_server, tmp_path):
    rows = [json.loads(x) for x in SINGLE.read_text().splitlines()][:10]
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    out = evaluate(rows, METRICS, judge=judge, store=store)
    page = html_report(out.results, store.get_run(out.run_id))
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    return page, path


def test_a_10_row_report_holds_plotly_once_and_weighs_the_library_plus_200_kb(report):
    from plotly.offline import get_plotlyjs

    page, path = report
    library = get_plotlyjs()
    assert path.stat().st_size < len(library.encode("utf-8")) + 200_000
    # the library's head, middle and tail each appear once: one copy, whole
    for k in (0, len(library) // 2, len(library) - 2000):
        assert page.count(library[k:k + 2000]) == 1
    assert page.count("<script") == 2 + len(METRICS)  # plotly's config and its library once, then a script per chart
    assert "<script src=" not in page


@needs_chromium
def test_every_chart_of_the_report_is_drawn_offline(report, browser):
    _, path = report
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    asked = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(path.as_uri())
    # every chart has drawn its plot: an SVG with its bars (one path per bar) and its axes' tick labels
    page.wait_for_function(
        """(n) => { const plots = document.querySelectorAll('.js-plotly-plot');
                    return plots.length === n && [...plots].every(p =>
                        p.querySelector('svg.main-svg .barlayer .point path') && p.querySelector('svg.main-svg .xtick text')); }""",
        arg=len(METRICS), timeout=30_000)
    assert page.evaluate("document.querySelectorAll('figure.chart figcaption').length") == len(METRICS)
    assert [u for u in asked if not u.startswith("file://")] == []  # nothing fetched: self-contained
