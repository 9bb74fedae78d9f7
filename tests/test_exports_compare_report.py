"""Exports, the HTML report, run comparison and the pre-run estimate."""
from __future__ import annotations

import csv
import io
import json

import pytest

from evaluators import evaluate
from evaluators.api import estimate_run
from evaluators.read.results import open_results
from evaluators.read.compare import metric_deltas, row_changes
from evaluators.data.loading import load_dataset
from evaluators.read.exports import csv_text, jsonl_text, neutralise
from evaluators.read.report import html_report
from evaluators.run.spec import RunSpec
from tests.conftest import SINGLE


@pytest.mark.parametrize("cell,expected", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("fine", "fine"), (3.5, 3.5), (None, None),
])
def test_formula_cells_are_neutralised(cell, expected):
    assert neutralise(cell) == expected


def test_csv_and_jsonl_exports(store):
    data = [{"query": "=1+1", "response": "-5 degrees", "ground_truth": "-5 degrees"}]
    res = evaluate(data, ["f1_score"], store=store)
    rows = list(csv.DictReader(io.StringIO(csv_text(res.results.rows()))))
    assert rows[0]["inputs.query"] == "'=1+1" and rows[0]["inputs.response"] == "'-5 degrees"
    assert rows[0]["outputs.f1_score.f1_score"] == "1.0"
    line = json.loads(jsonl_text(res.results.rows()))
    assert line["inputs.query"] == "=1+1" and line["outputs.f1_score.f1_score_result"] == "pass"  # JSONL keeps values as they are


@pytest.mark.both_stores
def test_a_row_export_carries_reviewers_verdicts_and_agreement_at_the_views_threshold(store, tmp_path):
    """Issue 35: exports left reviews out. Each reviewed row's JSONL line carries its verdicts, their consensus's
    pass or fail at the view's threshold, and whether that agrees with the judge's; only the rows asked for."""
    from evaluators.read.exports import write_export
    from evaluators.review.io import review_keys
    from tests.test_results_page import known_results, stored_run

    rid = stored_run(store, known_results())  # coherence judged 5, 4, 3, 2, 1, ...
    store.save_review(rid, 1, "coherence", "alice", 2.0)
    store.save_review(rid, 1, "coherence", "bob", 3.0)  # consensus: the median, 2.5, snapped to the scale
    store.save_review(rid, 3, "coherence", "alice", 2.0)
    for threshold, row1 in ((3, ("fail", False)), (2, ("pass", True))):
        res = open_results(store, rid, {"coherence": threshold})
        path = write_export(res, "jsonl", tmp_path / f"t{threshold}.jsonl", rows=[3, 1, 0],
                            extra=lambda idx: review_keys(store, rid, res, idx))
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [x["inputs.query"] for x in lines] == ["question 3", "question 1", "question 0"]
        got = [(x.get("reviews.coherence.result"), x.get("reviews.coherence.agrees_with_judge")) for x in lines]
        assert got == [("pass" if threshold == 2 else "fail", True), row1, (None, None)]
        assert [v["reviewer"] for v in lines[1]["reviews.coherence.verdicts"]] == ["alice", "bob"]


def test_html_report_is_self_contained(store):
    res = evaluate(SINGLE, ["bleu", "rouge"], store=store)
    page = html_report(res.results, store.get_run(res.run_id))
    assert "<script" not in page and page.count("<svg") == 2  # a chart a metric, drawn in the file
    assert page.count("<tr>") >= 31 + 2  # every row and the summary
    assert "How long does the Aurora X2 e-bike battery last on one charge?" in page


def test_compare_counts_verdict_changes(store):
    a = evaluate(SINGLE, ["f1_score"], store=store, thresholds={"f1_score": 0.5})
    b = evaluate(SINGLE, ["f1_score"], store=store, thresholds={"f1_score": 0.7})
    base, other = open_results(store, a.run_id), open_results(store, b.run_id)
    values = [c.value for c in base.cells["f1_score"]]
    regressed = sum(1 for v in values if 0.5 <= v < 0.7)
    d = metric_deltas(base, other)[0]
    assert (d["regressed"], d["improved"], d["changed"]) == (regressed, 0, regressed)
    assert d["pass_rate_delta"] == pytest.approx(-regressed / 31)
    changes = row_changes(base, [other])
    assert sum(r["changed"] for r in changes) == regressed
    assert changes[0]["f1_score · baseline"] == values[0]


def test_estimate_counts_calls_tokens_and_cache(store, judge_server, judge_config):
    ds = load_dataset(SINGLE)
    spec = RunSpec(["coherence", "bleu"], judge=judge_config)
    est = estimate_run(store, ds, spec)
    assert (est["judge_calls"], est["cached"], est["classic_values"]) == (31, 0, 31)
    assert est["completion_tokens"] == 31 * 120 and est["prompt_tokens"] > 31 * 100
    assert est["latency_s"] is None
    evaluate(SINGLE, ["coherence"], judge=judge_config, store=store)
    est = estimate_run(store, ds, spec)
    assert (est["judge_calls"], est["cached"]) == (0, 31)
    assert est["latency_s"] is not None and est["latency_s"] < 2
