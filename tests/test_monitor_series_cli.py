"""``monitor series`` (issue 32): a rule's metric per window from the command line, every version of the rule, a
window where a new version starts judging saying what it changed. Expected counts are what the test planted (as in
test_monitor_series), intervals statsmodels'."""
from __future__ import annotations

import hashlib
import json

import pytest
from statsmodels.stats.proportion import proportion_confint

from evaluators.store.schema import Result

pytestmark = pytest.mark.both_stores
HOUR = 3600 * 10**9
T0 = 1_764_000_000 * 10**9  # 2025-11-24 16:00 UTC, a whole hour


PLANTED = [(0, 1, v) for v in [4.0] * 30 + [2.0] * 10] + [(2, 2, v) for v in [5.0, 1.0, 2.0, 2.0]]


def _plant(store, tmp_path, values=PLANTED, filter=None) -> None:
    """(hour, version, coherence) judged; by default hour 0: 40 judged by version 1 (judge model-a, all traces), 30
    passing; hour 1: none; hour 2: 4 by version 2 (judge model-b, half the traces), 1 passing."""
    from evaluators import load_dataset

    store.ensure_monitor_project("shop")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(values))))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": ["coherence"]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric="coherence", turn=0, status="ok", value=v,
                                        outputs={"coherence": v})
                                 for i, (_, _, v) in enumerate(values)])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, {"model": "model-a"})
    store.add_monitor_rule("shop", "quality", ["coherence"], 0.5, {"model": "model-b"}, filter=filter)
    by_version: dict[int, list] = {1: [], 2: []}
    for i, (w, version, _) in enumerate(values):
        tid = hashlib.md5(f"t{i}".encode()).hexdigest()
        start = T0 + w * HOUR + (i * 7919 % 3600) * 10**9
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": start, "end_ns": start + 10**9}])
        by_version[version].append({"trace_id": tid, "decision": "judged", "run_id": run_id, "row_idx": i})
    for version, decisions in by_version.items():
        store.save_decisions("shop", "quality", version, decisions)


def _series(store_url, *args, capsys):
    from evaluators.cli.main import main

    code = main(["monitor", "series", "--db", store_url, "--project", "shop", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_lists_each_window_with_its_interval_n_and_the_rule_s_changes(store, store_url, tmp_path, capsys):
    _plant(store, tmp_path)
    code, out, err = _series(store_url, "--metric", "coherence", "--window", "1h", "--since", "2025-11-24T16:00:00Z",
                             "--until", "2025-11-24T19:00:00Z", "--json", capsys=capsys)
    assert code == 0, err
    got = json.loads(out)
    assert [(w["start"], w["n"], w["few"], w["corrected"]) for w in got] == [
        ("2025-11-24T16:00:00Z", 40, False, None), ("2025-11-24T17:00:00Z", 0, True, None),
        ("2025-11-24T18:00:00Z", 4, True, None)]
    for w, k in ((got[0], 30), (got[2], 1)):
        low, high = proportion_confint(k, w["n"], alpha=0.05, method="wilson")
        assert (w["rate"], w["low"], w["high"]) == (pytest.approx(k / w["n"]), pytest.approx(low, abs=1e-6),
                                                    pytest.approx(high, abs=1e-6))
    assert got[1]["rate"] is None and got[1]["low"] is None  # no judged trace: no rate, never 0
    assert [w["changes"] for w in got] == [
        [], [], ["rule version 1 → 2: judge model-a → model-b; sample rate 1 → 0.5"]]


def test_the_text_table_and_refusals(store, store_url, tmp_path, capsys):
    _plant(store, tmp_path)
    code, out, _ = _series(store_url, "--metric", "coherence", "--rule", "quality", "--window", "1h",
                           "--since", "2025-11-24T16:00:00Z", "--until", "2025-11-24T19:00:00Z", capsys=capsys)
    assert code == 0
    # 30 of 40 and 1 of 4 pass (planted); the intervals statsmodels' Wilson, to the decimal shown
    assert out.splitlines() == [
        "coherence: pass rate per 1h (rule 'quality', threshold 3; 95% Wilson interval; * fewer than 30 judged)",
        "  2025-11-24T16:00:00Z  n=    40   75.0%  [59.8%, 85.8%]",
        "  2025-11-24T17:00:00Z  n=     0  —",
        "  2025-11-24T18:00:00Z  n=     4   25.0%  [4.6%, 69.9%] *",
        "      change: rule version 1 → 2: judge model-a → model-b; sample rate 1 → 0.5"]
    assert proportion_confint(1, 4, method="wilson") == (pytest.approx(0.046, abs=5e-4), pytest.approx(0.699, abs=5e-4))
    for args, said in ((["--metric", "fluency"], "no rule of project 'shop' judges 'fluency'"),
                       (["--metric", "coherence", "--rule", "other"], "project 'shop' has no rule 'other'"),
                       (["--metric", "coherence", "--window", "1w"], "--window '1w' is not a length"),
                       (["--metric", "coherence", "--window", "5m", "--since", "2025-01-01"],
                        "more than 2,000 windows")):
        code, _, err = _series(store_url, *args, capsys=capsys)
        assert code == 2 and said in err, (args, err)



def test_the_chart_breaks_its_line_where_the_rule_changed_and_says_what_changed():
    from evaluators.read.monitor_series import series_chart

    def point(h, n, changes=()):
        return {"start_ns": T0 + h * HOUR, "n": n, "k": n // 2, "rate": 0.5, "low": 0.3, "high": 0.7, "few": False,
                "changes": list(changes)}

    chart = series_chart({"measure": "pass rate", "points": [point(0, 40), point(1, 40), point(2, 40, ["v1 → 2"]),
                                                             point(3, 40)]}, "t")
    values = chart["data"]["values"]
    assert [v["segment"] for v in values] == [0, 0, 1, 1]  # adjacent windows, one line each side of the change
    assert [v["change"] for v in values] == [None, None, "v1 → 2", None]
    marks = [layer for layer in chart["layer"] if layer.get("transform") == [{"filter": "datum.change != null"}]]
    assert [m["mark"]["type"] for m in marks] == ["rule", "text"]  # a dashed line and its words


def test_two_periods_compared_with_newcombe_s_interval_and_the_z_test_in_the_compare_page_s_sentence(store, tmp_path):
    from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest

    from evaluators.read.monitor_series import compare_periods

    _plant(store, tmp_path)  # hour 0: 30 of 40 pass; hour 2: 1 of 4
    got = compare_periods(store, "shop", "quality", "coherence", (T0, T0 + HOUR), (T0 + 2 * HOUR, T0 + 3 * HOUR),
                          ("the first hour", "the third hour"))
    d = got["difference"]
    low, high = confint_proportions_2indep(1, 4, 30, 40, method="newcomb", compare="diff")
    _, p = proportions_ztest([1, 30], [4, 40])
    assert (got["before"]["n"], got["after"]["n"], d.diff, d.rows) == (40, 4, pytest.approx(-0.5), 44)
    assert (d.low, d.high, d.p_value) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6),
                                          pytest.approx(p, rel=1e-9))
    assert got["sentence"] == (f"the third hour's pass rate on coherence is 50.0 points lower than the first hour's "
                               f"[{100 * low:+.1f}, {100 * high:+.1f}] on 44 judged traces; unlikely to be chance "
                               f"(two-proportion z-test, p = {p:.3g})")
    adjacent = compare_periods(store, "shop", "quality", "coherence", (T0 - HOUR, T0 + HOUR),  # read at once
                               (T0 + HOUR, T0 + 3 * HOUR), ("the first hour", "the third hour"))
    assert (adjacent["before"]["n"], adjacent["after"]["n"], adjacent["sentence"]) == (40, 4, got["sentence"])
    empty = compare_periods(store, "shop", "quality", "coherence", (T0 + HOUR, T0 + 2 * HOUR), (T0, T0 + HOUR))
    assert (empty["difference"], empty["sentence"]) == (None, "coherence: nothing to compare")


def test_a_window_sampled_at_two_rates_is_weighted_by_each_trace_s_chance_and_says_so(store, store_url, tmp_path,
                                                                                      capsys):
    # hour 0: version 1 (sample rate 1) judged 20, 10 passing; version 2 (rate 0.5, filtered) judged 10, all passing.
    # Weights 1 and 2: (10 + 2 * 10) / (20 + 2 * 10) = 0.75 (unweighted 20 / 30); effective n 40^2 / (20 + 4 * 10)
    _plant(store, tmp_path, [(0, 1, 4.0)] * 10 + [(0, 1, 1.0)] * 10 + [(0, 2, 5.0)] * 10, filter="feedback < 0.5")
    code, out, err = _series(store_url, "--metric", "coherence", "--window", "1h", "--since", "2025-11-24T16:00:00Z",
                             "--until", "2025-11-24T17:00:00Z", "--json", capsys=capsys)
    assert code == 0, err
    [w] = json.loads(out)
    n_eff = 40**2 / 60
    low, high = proportion_confint(0.75 * n_eff, n_eff, alpha=0.05, method="wilson")
    assert (w["n"], w["weighted"], w["rate"]) == (30, True, pytest.approx(0.75))
    assert (w["low"], w["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    _, out, _ = _series(store_url, "--metric", "coherence", "--window", "1h", "--since", "2025-11-24T16:00:00Z",
                        "--until", "2025-11-24T17:00:00Z", capsys=capsys)
    assert out.splitlines()[1:3] == [
        "  (rates of the traces matching the rule's filter (feedback < 0.5), not of all traffic; windows judged at "
        "different sample rates are weighted by 1 / each trace's chance of being judged (interval at the effective n))",
        "  2025-11-24T16:00:00Z  n=    30   75.0%  [56.2%, 87.5%] weighted"]  # (the interval as above)
