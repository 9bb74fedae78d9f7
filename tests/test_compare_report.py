"""Compare page (AppTest) and the HTML report's layout (rendered in Chromium)."""
from __future__ import annotations

import pytest

from evaluators import Store, evaluate
from evaluators.api import open_results
from tests.conftest import ROOT, SINGLE

st_testing = pytest.importorskip("streamlit.testing.v1")


@pytest.fixture(autouse=True)
def _fresh_caches():
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    yield


@pytest.fixture
def home_store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'evalhome' / 'evals.db'}")


def app(page: str | None = None, **params):
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    if page:
        at.switch_page(page)
        at.query_params.update(params)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


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
    assert list(deltas.columns) == ["Metric", "Baseline mean", "Mean", "Δ mean", "Baseline pass rate", "Pass rate",
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
    assert not any("_" in c for c in rows.columns if "·" not in c)  # plain headers beside the metric names
    # selecting the table's 4th row opens "Row 4" of each run
    at = app("pages/compare.py", base=a, runs=b, row="3")
    assert [s.value for s in at.subheader].count("Row 4") == 2


def test_compare_says_plainly_when_two_runs_share_no_metric(home_store):
    app()
    a = evaluate(SINGLE, ["f1_score"], store=home_store).run_id
    b = evaluate(SINGLE, ["bleu"], store=home_store).run_id
    at = app("pages/compare.py", base=a, runs=b)
    assert any("share no metric" in i.value and "f1_score" in i.value and "bleu" in i.value for i in at.info)
    assert not at.table and not at.dataframe
