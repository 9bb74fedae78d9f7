"""Compare page (AppTest) and the HTML report's layout (rendered in Chromium)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from evaluators import evaluate
from evaluators.read.charts_overview import number
from evaluators.read.results import open_results
from tests.browser import needs_chromium
from tests.conftest import ROOT, SINGLE
from tests.apptest import app

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches


def test_compare_reads_as_percentages_with_coloured_deltas_and_1_based_rows(home_store):
    app()
    a = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"f1_score": 0.5}).run_id
    b = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"f1_score": 0.7}).run_id
    # expected figures by hand from the stored scores: same scores, stricter threshold
    values = [c.value for c in open_results(home_store, a).cells["f1_score"]]
    rate_a = sum(v >= 0.5 for v in values) / 31
    rate_b = sum(v >= 0.7 for v in values) / 31
    assert rate_b < rate_a
    at = app("pages/compare.py", base=a, runs=b)
    table = at.table[0]
    deltas = table.value
    assert list(deltas.columns) == ["Metric", "Passes at", "Baseline mean", "Mean", "Δ mean", "Baseline pass rate", "Pass rate",
                                    "Δ pass rate", "Improved rows", "Regressed rows", "Changed verdicts"]
    f1 = deltas[deltas["Metric"] == "f1_score"].iloc[0]
    assert (f1["Baseline pass rate"], f1["Pass rate"]) == (f"{rate_a:.1%}", f"{rate_b:.1%}")
    assert f1["Δ pass rate"] == f"{rate_b - rate_a:+.1%}" and f1["Δ pass rate"].endswith("%")
    assert f1["Regressed rows"] == str(sum(0.5 <= v < 0.7 for v in values))
    # the worse pass rate is red; bleu did not move: no colour
    styles = table.proto.arrow_data.styler.styles
    col = list(deltas.columns).index("Δ pass rate")
    row = list(deltas["Metric"]).index("f1_score")
    assert f"row{row}_col{col} {{ color: #b71c1c" in styles
    assert styles.count("{ color:") == 1
    rows = at.dataframe[0].value
    assert list(rows["Row"]) == list(range(1, 32))  # as the dataset numbers them ("Row 4" in the detail)
    # scores as the Results page writes them (4 significant digits, a whole one whole), not the Styler's "0.421348"
    shown = pa.ipc.open_stream(at.dataframe[0].proto.arrow_data.styler.display_values).read_pandas()
    for col in ("f1_score · baseline", "f1_score · run 1"):
        assert list(shown[col]) == [number(v) for v in values] and any(v == int(v) for v in values)
    assert not any("_" in c for c in rows.columns if "·" not in c)  # plain headers beside the metric names
    # selecting the table's 4th row opens "Row 4" of each run
    at = app("pages/compare.py", base=a, runs=b, row="4")
    assert [s.value for s in at.subheader].count("Row 4") == 1  # one heading, the runs side by side under it


def test_compare_says_plainly_when_two_runs_share_no_metric(home_store):
    app()
    a = evaluate(SINGLE, ["f1_score"], store=home_store).run_id
    b = evaluate(SINGLE, ["bleu"], store=home_store).run_id
    at = app("pages/compare.py", base=a, runs=b)
    assert any("share no metric" in i.value and "f1_score" in i.value and "bleu" in i.value for i in at.info)
    assert not at.table and not at.dataframe


# ---------------------------------------------------------------- the HTML report, in Chromium
REPORT_SHOTS = ROOT / "artifacts"

# Every box of every chart (SVG), and what each text in it covers, in page coordinates.
_GEOMETRY = """() => [...document.querySelectorAll('figure.chart svg')].map(plot => {
    const svg = plot.getBoundingClientRect();
    const box = plot.getBoundingClientRect();
    const texts = [...plot.querySelectorAll('svg text')].filter(t => t.textContent.trim()).map(t => {
        const r = t.getBoundingClientRect();
        return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
    });
    const head = plot.closest('figure') ? plot.closest('figure').querySelector('figcaption') : null;
    const h = head ? head.getBoundingClientRect() : null;
    return {box: {left: box.left, right: box.right, top: box.top, bottom: box.bottom},
            svg: {left: svg.left, right: svg.right, top: svg.top, bottom: svg.bottom},
            head: h && {left: h.left, right: h.right, top: h.top, bottom: h.bottom}, texts};
})"""


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5 and a["top"] < b["bottom"] - 0.5 \
        and b["top"] < a["bottom"] - 0.5


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["left"] >= outer["left"] - 0.5 and inner["right"] <= outer["right"] + 0.5
            and inner["top"] >= outer["top"] - 0.5 and inner["bottom"] <= outer["bottom"] + 0.5)


@needs_chromium
def test_html_report_charts_do_not_overlap_and_labels_are_not_clipped(store, judge_server, browser, tmp_path):
    from evaluators import JudgeConfig
    from evaluators.read.report import html_report

    width = 900  # two charts a line: the narrower the cell, the likelier a cut label
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    metrics = ["coherence", "f1_score", "bleu", "rouge", "gleu"]
    out = evaluate(SINGLE, metrics, judge=judge, store=store)
    path = tmp_path / "report.html"
    path.write_text(html_report(out.results, store.get_run(out.run_id)), encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.goto(path.as_uri())
    page.wait_for_function(f"() => document.querySelectorAll('figure.chart svg text.xtick').length >= {len(metrics)}")
    charts = page.evaluate(_GEOMETRY)
    assert len(charts) == len(metrics)
    REPORT_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(REPORT_SHOTS / f"report-{width}.png"), full_page=True)
    boxes = [c["box"] for c in charts] + [c["head"] for c in charts if c["head"]]
    for k, a in enumerate(boxes):  # no chart (or its title) covers another
        for b in boxes[k + 1:]:
            assert not _overlap(a, b), (a, b)
    for c in charts:
        assert c["head"] is not None, "each chart is titled outside its drawing"
        assert c["box"]["right"] <= width + 0.5 and c["box"]["left"] >= -0.5  # inside the page
        for t in c["texts"]:  # every tick label, axis title and annotation wholly drawn
            assert _inside(t, c["svg"]), (t, c["svg"])
            assert t["right"] - t["left"] > 0
    names = {t["text"] for c in charts for t in c["texts"]}
    assert {"rows", "0", "1"} <= names  # axis title and tick labels are there to be checked


def test_a_compared_row_shows_the_differing_metric_first_and_its_inputs_once(home_store):
    app()
    a = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"bleu": 0.1}).run_id
    b = evaluate(SINGLE, ["f1_score", "bleu"], store=home_store, thresholds={"bleu": 0.3}).run_id
    bleu = [c.value for c in open_results(home_store, a).cells["bleu"]]
    f1 = [c.value for c in open_results(home_store, a).cells["f1_score"]]
    i = next(k for k, v in enumerate(bleu) if 0.1 <= v < 0.3)  # passes in the baseline, fails in the run
    at = app("pages/compare.py", base=a, runs=b, row=str(i + 1))
    table = at.dataframe[-1].value  # bleu is the run's second metric, and the one that differs: first
    assert list(table.columns) == ["metric", "differs", "Baseline", "Run 1"]
    assert table.values.tolist() == [["BLEU", "yes", f"{number(bleu[i])} · pass", f"{number(bleu[i])} · fail"],
                                     ["F1 word overlap", "", *[f"{number(f1[i])} · {'pass' if f1[i] >= 0.5 else 'fail'}"] * 2]]
    assert [e.label for e in at.expander].count("The row's inputs (the same in every run)") == 1
    assert [s.value for s in at.subheader].count(f"Row {i + 1}") == 1
