"""The HTML report stays self-contained and small: its charts are SVG drawn by us, with no charting library in
the file (plotly.js inlined once made a 31-row report 4.9 MB; issue 35 asks under 1 MB), every chart drawn.
"""
from __future__ import annotations

import json
import re

import pytest

from evaluators import JudgeConfig, evaluate
from evaluators.read.report import html_report
from tests.browser import needs_chromium
from tests.conftest import SINGLE

METRICS = ["coherence", "f1_score", "bleu", "rouge", "gleu"]  # five charts, one of them a judge's 1-5 scale


@pytest.fixture
def report(store, judge_server, tmp_path):
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    out = evaluate(SINGLE, METRICS, judge=judge, store=store)
    page = html_report(out.results, store.get_run(out.run_id))
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    return page, path, out.results


def test_a_31_row_report_weighs_under_1_mb_with_no_script_and_every_chart_counts_every_scored_row(report):
    page, path, res = report
    assert len(res.dataset) == 31
    assert path.stat().st_size < 1_000_000  # 4,875,142 bytes with plotly.js (31 rows, these five metrics)
    assert "<script" not in page and "plotly" not in page.lower()
    charts = re.findall(r"<figure class='chart'><figcaption>([^<]*)</figcaption>(.*?)</figure>", page)
    assert [name for name, _ in charts] == METRICS
    metrics = res.metrics()
    for name, svg in charts:  # each bar's tooltip counts its rows: together, the metric's scored rows, so split
        counts = {"pass": 0, "fail": 0}
        for n, word in re.findall(r": (\d+) rows \((pass|fail)\)</title>", svg):
            counts[word] += int(n)
        assert counts["pass"] + counts["fail"] == metrics[f"{name}.scored_rows"] == 31, name
        assert counts["pass"] == round(metrics[f"{name}.binary_aggregate"] * 31), name


@needs_chromium
def test_every_chart_of_the_report_is_drawn_offline(report, browser):
    _, path, _ = report
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    asked = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(path.as_uri())
    # every chart is drawn: bars with a size, and its axes' tick labels
    drawn = page.evaluate("""() => [...document.querySelectorAll('figure.chart svg')].map(svg => ({
        bars: [...svg.querySelectorAll('rect.bar')].filter(r => r.getBoundingClientRect().height > 0).length,
        ticks: svg.querySelectorAll('text.xtick').length}))""")
    assert len(drawn) == len(METRICS) and all(c["bars"] >= 1 and c["ticks"] >= 5 for c in drawn), drawn
    assert page.evaluate("document.querySelectorAll('figure.chart figcaption').length") == len(METRICS)
    assert [u for u in asked if not u.startswith("file://")] == []  # nothing fetched: self-contained
