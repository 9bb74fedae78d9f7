"""Traffic over time on the Monitoring page (issue 32): per window of the traces' own start times, traces, errors,
mean latency, tokens and a rule's decisions, counted in the database; a window with no trace is 0 traces and no
mean, never a mean of 0; a slice (model, service, deployed version) applied to the rates as well; and a change of
service.version read as a deploy, its before and after compared with the Monitoring page's sentence. Every
expected figure is computed here from what the test planted; the two-proportion test is statsmodels'."""
from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.both_stores
HOUR = 3600 * 10**9
T0 = 1_764_000_000 * 10**9  # a whole hour
# (hour, model, version, latency ms, tokens, error, coherence) of each planted trace: v1 in hours 0-1, v2 in 2-3;
# v2's answers are worse (coherence 2 fails at >= 3)
PLANTED = ([(0, "gpt-a", "v1", 100 + 10 * i, 50, False, 4.0) for i in range(40)]
           + [(1, "gpt-b", "v1", 300, 80, i < 3, 4.0 if i < 36 else 2.0) for i in range(40)]
           + [(2, "gpt-a", "v2", 200, 60, False, 4.0 if i < 20 else 2.0) for i in range(40)]
           + [(3, "gpt-a", "v2", 200, 60, False, 4.0 if i < 24 else 2.0) for i in range(40)])


def _plant(store, tmp_path, t0: int = T0) -> None:
    from evaluators import load_dataset
    from evaluators.store.schema import Result

    store.ensure_monitor_project("shop")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(PLANTED))))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": ["coherence"]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric="coherence", turn=0, status="ok", value=p[6],
                                        outputs={"coherence": p[6]}) for i, p in enumerate(PLANTED)])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, None)
    decisions = []
    for i, (hour, model, version, latency, tokens, error, _) in enumerate(PLANTED):
        tid = hashlib.md5(f"t{i}".encode()).hexdigest()
        start = t0 + hour * HOUR + (i * 7919 % 3600) * 10**9
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "",
                                          "name": "chat" if i % 2 else "retrieve",
                                          "start_ns": start, "end_ns": start + 10**9}])
        facts = {"model": model, "service_name": "shop-api", "latency_ms": latency, "tokens": tokens, "error": error,
                 "attributes": {"service.version": version}}
        assert store.save_mapped_trace("shop", tid, 1, fields={"query": "q", "response": "r"}, sources={},
                                       content=True, hint="", conversation_key=None, completeness="complete",
                                       facts=facts)
        decisions.append({"trace_id": tid, "decision": "judged" if i % 4 else "sampled_out", "run_id": run_id,
                          "row_idx": i})
    store.save_decisions("shop", "quality", 1, decisions)


def test_traffic_per_window_counts_latency_tokens_errors_and_decisions_with_gaps_never_zero(store, tmp_path):
    from evaluators.read.monitor_traffic import traffic_series

    _plant(store, tmp_path)
    got = traffic_series(store, "shop", T0, T0 + 5 * HOUR, 3600, rule="quality")
    assert [p["traces"] for p in got] == [40, 40, 40, 40, 0]
    assert got[0]["latency_ms"] == pytest.approx(sum(100 + 10 * i for i in range(40)) / 40)  # 295
    assert [p["tokens"] for p in got[:4]] == [40 * 50, 40 * 80, 40 * 60, 40 * 60]
    assert [p["errors"] for p in got] == [0, 3, 0, 0, 0]
    assert got[0]["decisions"]["judged"] == 30 and got[0]["decisions"]["sampled_out"] == 10  # i % 4 == 0 sampled out
    assert got[4]["latency_ms"] is None and got[4]["tokens_mean"] is None  # an empty hour: a gap
    with pytest.raises(ValueError, match="more than 2,000 windows"):
        traffic_series(store, "shop", T0, T0 + 90 * 24 * HOUR, 300)


def test_a_slice_applies_to_traffic_and_rates_and_the_pickers_offer_what_the_range_carries(store, tmp_path):
    from evaluators.read.monitor_series import rate_series
    from evaluators.read.monitor_traffic import Slice, slice_values, traffic_series

    _plant(store, tmp_path)
    assert slice_values(store, "shop", T0, T0 + 4 * HOUR) == {"model": ["gpt-a", "gpt-b"], "service": ["shop-api"],
                                                            "version": ["v1", "v2"]}
    only_b = Slice(model="gpt-b")
    assert [p["traces"] for p in traffic_series(store, "shop", T0, T0 + 4 * HOUR, 3600, where=only_b)] == [0, 40, 0, 0]
    points = rate_series(store, "shop", "quality", None, "coherence", T0, T0 + 4 * HOUR, 3600, 1, only_b)["points"]
    # hour 1's judged traces (i % 4 != 0: 30 of 40); of those, passing: coherence 4 for i < 36
    judged = [i for i in range(40) if (40 + i) % 4]
    assert (points[1]["n"], points[1]["k"]) == (len(judged), sum(1 for i in judged if i < 36))
    assert points[0]["n"] == points[2]["n"] == 0


def test_a_change_of_service_version_is_a_deploy_and_before_and_after_are_compared(store, tmp_path):
    from statsmodels.stats.proportion import test_proportions_2indep

    from evaluators.read.monitor_series import compare_periods
    from evaluators.read.monitor_traffic import around_deploy, deploys

    _plant(store, tmp_path)
    found = deploys(store, "shop", T0, T0 + 4 * HOUR)
    assert [(d["version"], d["traces"]) for d in found] == [("v1", 80), ("v2", 80)]
    before, after = around_deploy(found, "v2", T0 + 4 * HOUR)
    assert after[0] == found[1]["first_ns"] and before[1] == after[0] and before[1] - before[0] == after[1] - after[0]
    with pytest.raises(ValueError, match="no before"):
        around_deploy(found, "v1", T0 + 4 * HOUR)
    got = compare_periods(store, "shop", "quality", "coherence", before, after, ("before v2", "since v2"))
    a, b = got["before"], got["after"]
    # by hand, over the planted judged traces whose start falls in each period
    starts = {i: T0 + p[0] * HOUR + (i * 7919 % 3600) * 10**9 for i, p in enumerate(PLANTED)}
    for period, point in ((before, a), (after, b)):
        inside = [i for i in range(len(PLANTED)) if i % 4 and period[0] <= starts[i] < period[1]]
        assert (point["n"], point["k"]) == (len(inside), sum(PLANTED[i][6] >= 3 for i in inside))
    ref = test_proportions_2indep(b["k"], b["n"], a["k"], a["n"], method="score", compare="diff",
                                  correction=False)
    assert got["difference"].p_value == pytest.approx(ref.pvalue, rel=1e-6)
    assert got["sentence"].startswith("since v2's pass rate on coherence is")


def test_the_page_shows_traffic_slices_a_clicked_window_s_traces_and_a_deploy_compared(home_store, tmp_path,
                                                                                     fresh_caches):
    import json
    import time

    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    from tests.apptest import app

    t0 = (int(time.time()) // 3600 - 6) * 3600 * 10**9  # six hours ago, on the hour: inside "last 24 hours"
    _plant(home_store, tmp_path, t0)

    def chart(at, word):
        [c] = [c for c in at.get("vega_lite_chart") if word in json.loads(c.proto.spec).get("title", "")]
        return convert_arrow_bytes_to_pandas_df(c.proto.data.data)

    at = app("pages/monitoring.py", project="shop")
    frame = chart(at, "traces per 1 hour")
    shown = {int(r["start_ns"]): (r["traces"], r["judged"]) for r in frame.to_dict("records") if r["traces"]}
    assert shown == {t0 + h * HOUR: (40, 30) for h in range(4)}  # 40 an hour, 3 of 4 judged (i % 4 != 0)
    text = " ".join(c.value for c in at.caption)
    assert "160 traces in the range by their start time, 120 judged, 3 with an error" in text
    at.selectbox(key="slice_model").set_value("gpt-b").run()  # one model: traffic and rates narrowed alike
    assert {int(r["start_ns"]): r["traces"] for r in chart(at, "traces per").to_dict("records") if r["traces"]} == \
        {t0 + HOUR: 40}
    assert "Every figure below is of the traces of model gpt-b." in " ".join(c.value for c in at.caption)
    [listed] = [d.value for d in at.dataframe if "trace" in d.value.columns]
    assert len(listed) == 40  # the trace list keeps to the slice too
    at.text_input(key="span").input("retrieve").run()  # and to a span's name: every other planted trace
    [listed] = [d.value for d in at.dataframe if "trace" in d.value.columns]
    assert len(listed) == 20
    # a bar clicked: its window in the URL, the trace list keeps the traces that started in it, the ones its bar
    # counts (stored now, they arrived in the window of "now", whose bar is empty: a late batch's traces, listed by
    # arrival, once showed under no bar's click)
    at = window(app, t0 + HOUR)
    assert any("The traces that started from" in c.value for c in at.caption)
    [listed] = [d.value for d in at.dataframe if "trace" in d.value.columns]
    assert listed.shape[0] == 40
    assert set(listed["trace"]) == {tid for tid, start in _starts(home_store) if t0 + HOUR <= start < t0 + 2 * HOUR}
    now_ns = int(time.time()) // 3600 * 3600 * 10**9
    at = window(app, now_ns)
    assert any("No trace matches." in i.value for i in at.info)
    at.toggle(key="deploys").set_value(True).run()
    said = [t.value for t in at.text if "since version v2" in t.value]
    assert said and "since v2's pass rate on coherence is" in said[0] and "lower than before v2's" in said[0]


def window(app, start_ns: int):
    """The Monitoring page with a traffic bar's window in its URL (``at`` is also app()'s own argument's name)."""
    at = app("pages/monitoring.py", project="shop")
    at.query_params.update({"at": str(start_ns), "at_w": "3600"})
    at.run()
    assert not at.exception
    return at


def test_a_store_at_0010_gets_the_fact_columns_filled_from_each_trace_s_facts(store_url):
    import json

    import sqlalchemy as sa

    from evaluators.store import migrate
    from evaluators.store.schema import SCHEMA_REVISION
    from evaluators.store.traces import fact_columns

    facts = [{"model": "gpt-a", "service_name": "shop-api", "latency_ms": 812.5, "tokens": 1234, "error": True,
              "attributes": {"service.version": "1.5.0"}},
             {"model": None, "service_name": 7, "latency_ms": "slow", "tokens": None, "error": False, "attributes": {}},
             None]
    engine = sa.create_engine(store_url)
    assert migrate.upgrade(engine, "0010") == (None, "0010")
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO monitor_projects (name, quiet_seconds, created_at, keep_original, "
                          "conversation_quiet_seconds) VALUES ('shop', 30, '2025-11-24 16:00:00', false, 300)"))
        for i, f in enumerate(facts):
            c.execute(sa.text("INSERT INTO monitor_traces (project, trace_id, first_seen, last_seen, receipts, "
                              "root_ended, start_ns, status, facts, kind, late) VALUES ('shop', :t, "
                              "'2025-11-24 16:00:00', '2025-11-24 16:00:00', 1, true, :s, 'mapped', :f, 'trace', "
                              "false)"), {"t": f"t{i}", "s": T0 + i, "f": None if f is None else json.dumps(f)})
    assert migrate.upgrade(engine) == ("0010", SCHEMA_REVISION)
    with engine.connect() as c:
        got = c.execute(sa.text("SELECT model, service, service_version, latency_ms, tokens, error FROM "
                                "monitor_traces ORDER BY trace_id")).all()
    engine.dispose()
    for row, f in zip(got, facts):
        want = fact_columns(f)
        assert tuple(row) == tuple(want[k] for k in ("model", "service", "service_version", "latency_ms", "tokens",
                                                      "error"))
    # by hand: the first trace's facts as columns, the second's ill-typed ones as NULL
    assert tuple(got[0]) == ("gpt-a", "shop-api", "1.5.0", 812.5, 1234, True)
    assert tuple(got[1]) == (None, None, None, None, None, False)


def test_the_trace_list_keeps_to_the_slice_a_span_name_and_a_score_at_most(store, tmp_path):
    from evaluators.read.monitor import TraceFilter, trace_page

    _plant(store, tmp_path)

    def listed(**kw) -> set[str]:
        return {r["trace_id"] for r in trace_page(store, "shop", TraceFilter(**kw), limit=500)["rows"]}

    tid = {i: hashlib.md5(f"t{i}".encode()).hexdigest() for i in range(len(PLANTED))}
    assert listed(model="gpt-b") == {tid[i] for i, p in enumerate(PLANTED) if p[1] == "gpt-b"}
    assert listed(version="v2", span="retrieve") == {tid[i] for i, p in enumerate(PLANTED) if p[2] == "v2" and i % 2 == 0}
    # judged (i % 4 != 0) with coherence at most 2 (the planted failing answers)
    assert listed(metric="coherence", score_at_most=2.0) == {tid[i] for i, p in enumerate(PLANTED)
                                                             if i % 4 and p[6] <= 2}
    assert listed(span="nothing-named-so") == set()


def _starts(store) -> list[tuple[str, int]]:
    import sqlalchemy as sa

    with store.engine.connect() as c:
        return [tuple(r) for r in c.execute(sa.text("SELECT trace_id, start_ns FROM monitor_traces"))]
