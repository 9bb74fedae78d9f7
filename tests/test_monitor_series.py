"""A rule's metric over time (issue 32's first part): per window of event time, the judged traces' pass rate (the
defect rate for risk and safety) with its 95% Wilson interval, counted in the database; an empty window has no point,
never 0; a window under min n is marked few. Expected counts are what the test planted; intervals are statsmodels'."""
from __future__ import annotations

import hashlib

import pytest
from statsmodels.stats.proportion import proportion_confint

from evaluators.store.schema import Result

pytestmark = pytest.mark.both_stores
HOUR = 3600 * 10**9
T0 = 1_764_000_000 * 10**9  # a whole hour (2025-11-24 16:00 UTC)
# window -> (coherence values of its judged traces): 40 in the first hour (30 pass at >= 3), none in the second,
# 5 in the third (few), and 12 traces of the first hour judged by the older rule version (left out)
PLANTED = {0: [4.0] * 30 + [2.0] * 10, 2: [5.0, 1.0, 3.0, 2.0, 2.0]}


def _plant(store, tmp_path, t0: int = T0, planted: dict = PLANTED, metric: str = "coherence") -> None:
    from evaluators import load_dataset

    store.ensure_monitor_project("shop")
    values = [(w, v) for w, vs in planted.items() for v in vs]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(values) + 12)))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": ["coherence"]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric=metric, turn=0, status="ok", value=v,
                                        outputs={metric: v}) for i, (_, v) in enumerate(values)]
                        + [Result(row_idx=len(values) + j, metric=metric, turn=0, status="ok", value=1.0)
                           for j in range(12)])
    store.add_monitor_rule("shop", "quality", [metric], 1.0, None)
    store.add_monitor_rule("shop", "quality", [metric, "fluency"], 1.0, None)
    now, old = [], []
    for i, (w, _) in enumerate(values + [(0, None)] * 12):
        tid = hashlib.md5(f"t{i}".encode()).hexdigest()
        start = t0 + w * HOUR + (i * 7919 % 3600) * 10**9  # somewhere inside its hour
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": start, "end_ns": start + 10**9}])
        (now if i < len(values) else old).append({"trace_id": tid, "decision": "judged", "run_id": run_id,
                                                   "row_idx": i})
    store.save_decisions("shop", "quality", 2, now)
    store.save_decisions("shop", "quality", 1, old)


def test_each_window_s_rate_and_wilson_interval_are_counted_in_the_database(store, tmp_path):
    from evaluators.read.monitor_series import rate_series

    _plant(store, tmp_path)
    got = rate_series(store, "shop", "quality", 2, "coherence", T0, T0 + 3 * HOUR, 3600, min_n=30)
    assert got["measure"] == "pass rate" and got["threshold"] == 3
    points = got["points"]
    assert [(p["start_ns"], p["n"], p["k"], p["few"]) for p in points] == \
        [(T0, 40, 30, False), (T0 + HOUR, 0, 0, True), (T0 + 2 * HOUR, 5, 2, True)]
    for p in (points[0], points[2]):
        low, high = proportion_confint(p["k"], p["n"], alpha=0.05, method="wilson")
        assert p["rate"] == pytest.approx(p["k"] / p["n"]) and (p["low"], p["high"]) == \
            (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert points[1]["rate"] is None and points[1]["low"] is None  # no judged trace: no point, never 0
    with pytest.raises(ValueError, match="more than 2,000 windows"):
        rate_series(store, "shop", "quality", 2, "coherence", T0, T0 + 90 * 24 * HOUR, 300)


def test_a_risk_and_safety_metric_s_rate_is_its_defect_rate(store, tmp_path):
    from evaluators.read.monitor_series import rate_series

    # violence: a severity 0-7, a defect above 3 (docs/safety.md); 3 of 8 are defects
    _plant(store, tmp_path, planted={0: [0.0, 1.0, 3.0, 4.0, 6.0, 7.0, 2.0, 0.0]}, metric="violence")
    got = rate_series(store, "shop", "quality", 2, "violence", T0, T0 + HOUR, 3600, min_n=5)
    assert got["measure"] == "defect rate"
    [p] = got["points"]
    low, high = proportion_confint(3, 8, alpha=0.05, method="wilson")
    assert (p["n"], p["k"], p["rate"], p["few"]) == (8, 5, 3 / 8, False)
    assert (p["low"], p["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))


def test_the_page_draws_each_window_with_its_interval_n_and_hollow_under_min_n(home_store, tmp_path, fresh_caches):
    import json
    import time

    from tests.apptest import app

    t0 = (int(time.time()) // 3600 - 5) * 3600 * 10**9  # five hours ago, on the hour: inside "last 24 hours"
    _plant(home_store, tmp_path, t0)
    at = app("pages/monitoring.py", project="shop")
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    # the rate chart (beside the traffic per window), its data as Streamlit sends it to the browser (Arrow)
    [chart] = [c for c in at.get("vega_lite_chart") if "now version" in json.loads(c.proto.spec).get("title", "")]
    frame = convert_arrow_bytes_to_pandas_df(chart.proto.data.data)
    values = [{k: (None if v != v else v) for k, v in row.items()} for row in frame.to_dict("records")]
    assert "now version 2" in json.loads(chart.proto.spec)["title"]
    shown = {v["n"]: v for v in values if v["n"]}
    # every version: the first hour's 40 of version 2 and 12 of version 1 (none passing), where version 2 starts
    assert set(shown) == {52, 5} and len(values) == 24  # an hour a window, 24 of them
    low, high = proportion_confint(30, 52, alpha=0.05, method="wilson")
    assert (shown[52]["rate"], shown[52]["few"]) == (pytest.approx(30 / 52), False)
    assert (shown[52]["low"], shown[52]["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert (shown[5]["rate"], shown[5]["few"]) == (0.4, True)  # drawn hollow
    assert all(v["rate"] is None for v in values if not v["n"])  # no point, never 0
    assert [v["change"] for v in values if v["change"]] == ["rule version 1 → 2: metrics coherence → coherence, fluency"]
    assert shown[52]["segment"] != shown[5]["segment"]  # the line breaks there (and at the empty hour)
    assert "57 judged traces in the range" in " ".join(c.value for c in at.caption)
    assert not [t for t in at.text if "This week against last" in t.value]  # on demand only
    at.toggle(key="weeks").set_value(True).run()
    # all 57 judged this week, none the week before
    assert "This week against last: coherence: nothing to compare" in [t.value for t in at.text]
    assert "No alert rule yet: python -m evaluators monitor alert add (docs: Alerts) makes one; the alerts it raises show here." in [c.value for c in at.caption]
