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
    assert "Run 1's pass rate on coherence" in shown and "McNemar" in shown


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
    assert spec["title"] == "coherence: pass rate over runs" and len(spec["layer"]) == 3
