"""Two runs of the same rows compared honestly (read.paired, the CLI's ``agreement A B``, the Compare page),
against SciPy's binomial test, scikit-learn's kappas and hand computations."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evaluators import load_dataset
from evaluators.read.paired import judges_agreement, paired_differences
from evaluators.read.view import open_view
from evaluators.store.schema import Result
from tests.apptest import app, shown_text
from tests.test_cli import cli

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn gives the reference kappas")
scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy gives the reference binomial test and rho")
N = 120
pytestmark = pytest.mark.usefixtures("fresh_caches")


def base_value(i: int) -> float:
    return float(i % 5 + 1)


def other_value(i: int) -> float:
    # the candidate: one point better on every fourth row, one worse on every tenth
    v = base_value(i) + (1 if i % 4 == 0 else 0) - (1 if i % 10 == 3 else 0)
    return float(min(5, max(1, v)))


def _run(store, did: str, values, name: str) -> str:
    rid = store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 3}}, "h", name)
    store.write_results(rid, [Result(i, "coherence", 0, "ok", values(i), {"coherence": values(i)}) for i in range(N)])
    store.update_run(rid, status="completed", tasks_total=N, tasks_done=N)
    return rid


@pytest.fixture
def two_runs(home_store):
    ds = load_dataset([{"query": f"Question {i} about the warranty", "response": f"Answer {i}"} for i in range(N)])
    did = home_store.save_dataset(ds)
    return home_store, _run(home_store, did, base_value, "baseline"), _run(home_store, did, other_value, "candidate")


def test_paired_difference_equals_mcnemar_and_the_hand_count(two_runs):
    store, a, b = two_runs
    base, other = open_view(store, a), open_view(store, b)
    rec = paired_differences(base, other, label="the candidate")[0]
    pa = np.array([base_value(i) >= 3 for i in range(N)])
    pb = np.array([other_value(i) >= 3 for i in range(N)])
    only_a, only_b = int((pa & ~pb).sum()), int((~pa & pb).sum())
    r = rec["rate"]
    assert rec["rows"] == N and r.diff == pytest.approx((pb.sum() - pa.sum()) / N)
    assert r.p_value == pytest.approx(scipy_stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue)
    assert r.low < r.diff < r.high
    # Connor (1987) by hand on the discordant shares
    p1, p2 = only_a / N, only_b / N
    need = (1.959964 * math.sqrt(p1 + p2) + 0.841621 * math.sqrt(p1 + p2 - (p1 - p2) ** 2)) ** 2 / (p1 - p2) ** 2
    assert r.rows_needed == math.ceil(need)
    d = np.array([other_value(i) - base_value(i) for i in range(N)])
    assert rec["mean"].diff == pytest.approx(d.mean()) and rec["mean"].low < d.mean() < rec["mean"].high
    verdict = "unlikely to be chance" if r.p_value < 0.05 else "could be chance"
    assert verdict in rec["sentence"] and f"{abs(100 * r.diff):.1f} points" in rec["sentence"]


def test_two_judges_agreement_equals_scikit_learn(two_runs):
    store, a, b = two_runs
    g = judges_agreement(open_view(store, a), open_view(store, b))["coherence"]
    x, y = [base_value(i) for i in range(N)], [other_value(i) for i in range(N)]
    assert g["kappa"][0] == pytest.approx(sklearn_metrics.cohen_kappa_score([v >= 3 for v in x], [v >= 3 for v in y]))
    assert g["weighted_kappa"][0] == pytest.approx(
        sklearn_metrics.cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert g["spearman"][0] == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert g["agree"] == pytest.approx(np.mean(np.array(x) == np.array(y)))
    assert g["rows"] == N and all(abs(d["baseline"] - d["other"]) == 1 for d in g["disagree_most"])


def test_cli_and_compare_page(two_runs):
    store, a, b = two_runs
    p = cli("agreement", a, b, "--json")
    assert p.returncode == 0, p.stderr
    keys = json.loads(p.stdout)
    base, other = open_view(store, a), open_view(store, b)
    rec = paired_differences(base, other)[0]
    assert keys["coherence.pass_rate_diff"] == pytest.approx(rec["rate"].diff)
    assert keys["coherence.pass_rate_diff_p_value"] == pytest.approx(rec["rate"].p_value)
    assert keys["coherence.judges_kappa"] == pytest.approx(judges_agreement(base, other)["coherence"]["kappa"][0])
    text = cli("agreement", a, b).stdout
    assert "paired rows" in text and "judges agree on" in text
    at = app("pages/compare.py", base=a, runs=b)
    shown = shown_text(at)
    assert "Run 1's pass rate (≥ 3) on coherence" in shown and "McNemar" in shown


def test_trend_marks_the_run_whose_change_is_unlikely_to_be_chance(two_runs):
    from evaluators.read.trend import trend

    store, a, b = two_runs
    did = store.get_run(a)["dataset_id"]
    c = _run(store, did, other_value, "candidate again")  # the same verdicts as b: no change
    runs = [(store.get_run(r), open_view(store, r)) for r in (c, a, b)]  # any order: sorted by time
    points = trend(runs, "coherence")
    assert [p["name"] for p in points] == ["baseline", "candidate", "candidate again"]
    pa = sum(base_value(i) >= 3 for i in range(N)) / N
    assert points[0]["rate"] == pytest.approx(pa) and points[0]["change"] is None
    rec = paired_differences(runs[1][1], runs[2][1])[0]["rate"]
    assert points[1]["change"] == pytest.approx(rec.diff) and points[1]["marked"] == (rec.p_value < 0.05)
    assert points[2]["change"] == 0 and not points[2]["marked"]
    at = app("pages/compare.py", base=a, trend="true")
    text = shown_text(at)
    assert "Trend over runs of this dataset" in text and ("Unlikely to be chance: candidate" in text) == points[1]["marked"]
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["title"] == {"text": "coherence: pass rate over runs", "subtitle": "a row passes at coherence ≥ 3"}


def test_judge_changes_name_what_differs_and_nothing_for_the_same_judge():
    from evaluators.read.paired import judge_changes

    judge = {"model": "gpt-4o-mini", "provider": "openai"}
    run = {"metrics": ["coherence", "f1_score"], "thresholds": {"coherence": 3}, "judge": judge}
    stricter = {**run, "thresholds": {"coherence": 4}}  # only the threshold: the same judge, its answers cached
    assert judge_changes(run, stricter, "coherence") == [] and judge_changes(run, run, "f1_score") == []
    other_model = {**run, "judge": {**judge, "model": "gpt-4o"}}
    assert judge_changes(run, other_model, "coherence") == ["model"]
    other_template = {**run, "templates": {"coherence": "mine.txt"},
                      "template_texts": {"coherence": "Rate the coherence of {{response}} from 1 to 5."}}
    assert judge_changes(run, other_template, "coherence") == ["template"]
    assert judge_changes(run, {**run, "judge": {**judge, "temperature": 0.7}}, "coherence") == ["judge settings"]
    assert judge_changes(run, other_model, "f1_score") == []  # no judge answers it


def test_p_values_read_p_below_0001_never_p_0_and_a_threshold_change_is_said():
    from evaluators.core.inference import PairedDifference
    from evaluators.read.paired import p_text, sentence

    assert [p_text(p) for p in (0.0, 1e-12, 0.000999, 0.001, 0.0156, 0.5, None)] == [
        "p < 0.001", "p < 0.001", "p < 0.001", "p = 0.001", "p = 0.0156", "p = 0.5", "p = 1"]
    d = PairedDifference(-0.226, -0.35, -0.1, 0.0156, 31, 40, "McNemar exact")
    same = sentence("coherence", "pass rate", d, "Run 1", ("≥ 3", "≥ 3"))
    assert same.startswith("Run 1's pass rate (≥ 3) on coherence is 22.6 points lower than the baseline's [")
    assert same.endswith("unlikely to be chance (McNemar exact, p = 0.0156)")
    moved = sentence("coherence", "pass rate", d, "Run 1", ("≥ 3", "≥ 4"))
    assert "Run 1's pass rate (≥ 4) on coherence is 22.6 points lower than the baseline's (≥ 3)" in moved
    assert "chance" not in moved and moved.endswith("the thresholds differ, so this compares the thresholds as much as the runs")


def test_trend_chart_is_0_to_100_by_date_with_the_target_and_names_in_tooltips(two_runs):
    from evaluators.read.trend import trend, trend_chart

    store, a, b = two_runs
    runs = [(store.get_run(r), open_view(store, r, thresholds)) for r, thresholds in ((a, {}), (b, {"coherence": 4}))]
    points = trend(runs, "coherence")
    assert [p["passes_at"] for p in points] == ["≥ 3", "≥ 4"]
    assert points[1]["threshold_changed"] and not points[1]["marked"]  # a threshold's change is not the answers'
    spec = trend_chart(points, "coherence")
    assert spec["height"] >= 250 and spec["autosize"]["type"] == "fit-x"  # the plot's height, axes around it
    line = spec["layer"][1]["encoding"]
    assert line["x"]["type"] == "temporal" and line["x"]["axis"]["labelAngle"] == 0
    assert line["y"]["scale"]["domain"] == [0, 1] and line["y"]["axis"]["values"] == [0, 0.25, 0.5, 0.75, 1]
    assert [r["target"] for r in spec["layer"][2]["data"]["values"]] == [0.8]
    assert spec["layer"][3]["data"]["values"][0]["label"] == "target 80%"
    assert {t["field"] for t in spec["layer"][4]["encoding"]["tooltip"]} >= {"run", "date", "passes at", "change"}
    assert [d["run"] for d in spec["layer"][4]["data"]["values"]] == ["baseline", "candidate"]
    assert spec["title"]["subtitle"] == "thresholds differ between runs: ≥ 3, ≥ 4"
