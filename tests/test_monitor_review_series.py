"""People checking the judge on live traffic (issue 32): per window, judge-human kappa and the window's rate
corrected by prediction-powered inference from the reviews of its judged production traces. The corrected rate
and its interval are checked against the PPI authors' package (ppi-python), kappa against the hand formula."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from evaluators.store.schema import Result

pytestmark = pytest.mark.both_stores
HOUR = 3600 * 10**9
T0 = 1_764_000_000 * 10**9
N0, R0 = 60, 30  # window 0: judged traces, of which reviewed in a random queue


def _data():
    """Window 0's judge verdicts f and the people's y (1 pass), and the rows reviewed (idx) and not (rest)."""
    rng = np.random.default_rng(5)
    f = (rng.random(N0) < 0.6).astype(float)
    y = np.where(rng.random(N0) < 0.25, 1 - f, f)  # the people overrule a quarter of the judge's verdicts
    idx = np.sort(rng.choice(N0, R0, replace=False))
    rest = np.setdiff1d(np.arange(N0), idx)
    return f, y, idx, rest


def _plant(store, tmp_path):
    from evaluators import load_dataset

    f, y, idx, _ = _data()
    # window 0: N0 traces; window 1: 5 judged, none reviewed; window 2: 4 judged, 3 reviewed in a threshold queue
    windows = [0] * N0 + [1] * 5 + [2] * 4
    judge = [4.0 if v else 2.0 for v in f] + [4.0] * 5 + [4.0, 4.0, 2.0, 2.0]
    store.ensure_monitor_project("shop")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(judge))))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": ["coherence"]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric="coherence", turn=0, status="ok", value=v,
                                        outputs={"coherence": v}) for i, v in enumerate(judge)])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, None)
    decisions = []
    for i, w in enumerate(windows):
        tid = hashlib.md5(f"t{i}".encode()).hexdigest()
        start = T0 + w * HOUR + i * 10**9
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": start, "end_ns": start + 10**9}])
        decisions.append({"trace_id": tid, "decision": "judged", "run_id": run_id, "row_idx": i})
    store.save_decisions("shop", "quality", 1, decisions)
    sampled = [int(i) for i in idx]
    q = store.create_queue(run_id, "production", "random", ["coherence"], sampled, {"": sampled})
    for i in sampled:
        store.save_review(run_id, i, "coherence", "ann", 4.0 if y[i] else 2.0, queue_id=q)
    on_purpose = [N0 + 5, N0 + 6, N0 + 7]
    q2 = store.create_queue(run_id, "near the threshold", "threshold", ["coherence"], on_purpose, {"": on_purpose})
    for i, v in zip(on_purpose, (4.0, 2.0, 2.0)):
        store.save_review(run_id, i, "coherence", "bob", v, queue_id=q2)


def _kappa(a, b) -> float:
    po = np.mean(a == b)
    pe = np.mean(a) * np.mean(b) + np.mean(1 - a) * np.mean(1 - b)
    return float((po - pe) / (1 - pe))


def test_each_reviewed_window_s_kappa_and_ppi_corrected_rate(store, tmp_path):
    ppi_py = pytest.importorskip("ppi_py")
    from evaluators.read.monitor_reviewed import reviewed_series

    _plant(store, tmp_path)
    f, y, idx, rest = _data()
    for v in (0, 1):  # the guard binds below 2 disagreements in a verdict's reviews: here there are more
        assert (y[idx][f[idx] == v] != v).sum() > 2
    got = reviewed_series(store, "shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600)
    assert sorted(got) == [T0, T0 + 2 * HOUR]  # window 1 has no review: no point
    w0 = got[T0]
    assert w0["reviews"] == R0
    lo, hi = ppi_py.ppi_mean_ci(y[idx], f[idx], f[rest], alpha=0.05)
    est = float(ppi_py.ppi_mean_pointestimate(y[idx], f[idx], f[rest])[0])
    assert (w0["corrected"], w0["low"], w0["high"]) == pytest.approx((est, float(lo[0]), float(hi[0])), abs=1e-12)
    assert w0["kappa"] == pytest.approx(_kappa(f[idx], y[idx]), abs=1e-12)
    assert w0["kappa_low"] < w0["kappa"] < w0["kappa_high"]
    # window 2: rows chosen on purpose count towards kappa, never towards the correction
    w2 = got[T0 + 2 * HOUR]
    assert w2["reviews"] == 3 and w2["corrected"] is None and w2["low"] is None
    assert w2["kappa"] == pytest.approx(_kappa(np.array([1.0, 1, 0]), np.array([1.0, 0, 0])), abs=1e-12)
    assert reviewed_series(store, "shop", "nope", "coherence", T0, T0 + HOUR, 3600) == {}


def test_a_window_where_the_judge_gave_one_verdict_has_kappa_without_an_interval(store, tmp_path):
    """The judge passed every reviewed trace of window 1 and a reviewer failed two: κ is 0 by its formula (as
    scikit-learn's), and every bootstrap resample is 0 too, so "[0.00, 0.00]" would read as certainty: no interval."""
    from sklearn.metrics import cohen_kappa_score

    from evaluators.read.monitor_reviewed import reviewed_series

    _plant(store, tmp_path)
    run_id = store.list_runs()[0]["id"]
    rows = [N0, N0 + 1, N0 + 2]  # window 1: the judge said 4.0 (pass) to all five
    q = store.create_queue(run_id, "window 1", "random", ["coherence"], rows, {"": rows})
    for i, v in zip(rows, (4.0, 2.0, 2.0)):
        store.save_review(run_id, i, "coherence", "cy", v, queue_id=q)
    w1 = reviewed_series(store, "shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600)[T0 + HOUR]
    assert w1["kappa"] == pytest.approx(cohen_kappa_score([1, 1, 1], [1, 0, 0])) == 0.0
    assert (w1["kappa_low"], w1["kappa_high"], w1["one_verdict"]) == (None, None, True)
