"""Alert rules and alerts in the store and on the command line (issue 32), on SQLite and PostgreSQL: `monitor alert
add` keeps a percent as a fraction and the NAME of the secret's variable, never the secret; `monitor alerts` lists
what fired and `alert ack` who acknowledged it; `alert test` sends a signed sample; a missing secret fails a delivery
with that said; traffic and judged-share rules from counts; a store at revision 0009 is brought up to 0010."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
import sqlalchemy as sa

from evaluators.store.schema import Result
from tests.test_monitor_alerts_webhooks import SECRET, Receiver

pytestmark = pytest.mark.both_stores
T0 = 1_764_000_000 * 10**9  # 2025-11-24 16:00 UTC


def _main(*args, capsys):
    from evaluators.cli.main import main

    code = main(["monitor", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _project(store) -> None:
    store.ensure_monitor_project("shop")
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, {"model": "m"})


def _all_text(url: str) -> str:
    """Every value of every row of the store's tables, as text (where a secret must never be)."""
    engine = sa.create_engine(url)
    with engine.connect() as c:
        out = [repr(tuple(r)) for t in sa.inspect(c).get_table_names()
               for r in c.execute(sa.text(f'SELECT * FROM "{t}"'))]
    engine.dispose()
    return "\n".join(out)


def test_add_list_ack_and_the_secret_never_stored(store, store_url, monkeypatch, capsys):
    _project(store)
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    db = ("--db", store_url)
    code, out, err = _main("alert", "add", "--project", "shop", "--name", "low", "--metric", "coherence", "--below",
                           "2.5", "--min-n", "40", "--webhook", "http://127.0.0.1:9/hook", "--secret-env",
                           "HOOK_SECRET", *db, capsys=capsys)
    assert code == 0, err
    assert out == "alert rule 'low' of project 'shop' (id 1): coherence rate below 2.5% (rule 'quality', min n 40)\n"
    code, out, err = _main("alert", "add", "--project", "shop", "--name", "quiet", "--no-traffic-minutes", "30", *db,
                           capsys=capsys)
    assert code == 0 and out.endswith("no trace for 30 minutes\n"), err
    rule = store.alert_rule("shop", "low")
    assert (rule["kind"], rule["threshold"], rule["min_n"], rule["secret_env"]) == ("rate_below", 0.025, 40,
                                                                                     "HOOK_SECRET")
    assert SECRET not in _all_text(store_url)
    for bad in (["--metric", "coherence", "--above", "150"], ["--metric", "coherence", "--above", "2",
                                                               "--webhook", "http://h/x"],
                ["--metric", "coherence"], ["--metric", "nope", "--above", "2"], ["--above", "2"]):
        assert _main("alert", "add", "--project", "shop", "--name", "x", *bad, *db, capsys=capsys)[0] == 2, bad
    assert _main("alerts", "--project", "shop", "--json", *db, capsys=capsys)[1] == "[]\n"
    fired = dt.datetime(2025, 11, 24, 16, 8)
    eid = store.add_alert_event(rule["id"], fired_ns=T0 + 480 * 10**9, fired_at=fired, rate=0.1, low=0.05, high=0.2,
                                n=40, text="coherence pass rate ...", delivery="failed", delivery_error="why")
    assert _main("alert", "ack", "--project", "shop", "--id", str(eid + 1), "--by", "ann", *db, capsys=capsys)[0] == 2
    store.ensure_monitor_project("other")  # another project's people cannot ack it by its id
    assert _main("alert", "ack", "--project", "other", "--id", str(eid), "--by", "bob", *db, capsys=capsys)[0] == 2
    code, out, _ = _main("alert", "ack", "--project", "shop", "--id", str(eid), "--by", "ann", *db, capsys=capsys)
    assert (code, out) == (0, f"alert {eid} acknowledged by ann\n")
    [shown] = json.loads(_main("alerts", "--project", "shop", "--json", *db, capsys=capsys)[1])
    assert {k: shown[k] for k in ("id", "alert", "metric", "fired_at", "resolved_at", "rate", "low", "high", "n",
                                  "delivery", "acked_by")} == {
        "id": eid, "alert": "low", "metric": "coherence", "fired_at": "2025-11-24T16:08:00Z", "resolved_at": None,
        "rate": 0.1, "low": 0.05, "high": 0.2, "n": 40, "delivery": "failed", "acked_by": "ann"}
    assert shown["condition"] == "coherence rate below 2.5% (rule 'quality', min n 40)"
    out = _main("alerts", "--project", "shop", *db, capsys=capsys)[1]
    assert out.splitlines()[0] == (f"#{eid}  low: coherence rate below 2.5% (rule 'quality', min n 40)  fired "
                                   "2025-11-24T16:08:00Z  open  10.0% [5.0%, 20.0%] n=40  delivery: failed  acked by ann")


def test_alert_test_sends_a_signed_sample(store, store_url, monkeypatch, capsys):
    _project(store)
    with Receiver() as rx:
        assert _main("alert", "add", "--project", "shop", "--name", "low", "--metric", "coherence", "--above", "2",
                     "--webhook", rx.url, "--secret-env", "HOOK_SECRET", "--db", store_url, capsys=capsys)[0] == 0
        code, _, err = _main("alert", "test", "--project", "shop", "--name", "low", "--db", store_url, capsys=capsys)
        assert code == 1 and "HOOK_SECRET is not set here" in err and rx.got == []  # never sent unsigned
        monkeypatch.setenv("HOOK_SECRET", SECRET)
        code, out, err = _main("alert", "test", "--project", "shop", "--name", "low", "--db", store_url, capsys=capsys)
    assert code == 0, err
    [(body, _, verified)] = rx.got
    sent = json.loads(body)
    assert verified and sent["test"] is True and sent["alert"] == "low" and SECRET not in body.decode()


def _judged(store, tmp_path, values: list[float], start: int, rule: str = "quality", metric: str = "coherence") -> None:
    """Traces started a second apart from ``start``, judged by ``rule`` with these values of ``metric``."""
    from evaluators import load_dataset

    data = tmp_path / f"rows{start}.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(values))))
    run_id = store.create_run(store.save_dataset(load_dataset(data)), {"metrics": [metric]}, "h", "monitor")
    store.write_results(run_id, [Result(row_idx=i, metric=metric, turn=0, status="ok", value=v,
                                        outputs={metric: v}) for i, v in enumerate(values)])
    decisions = []
    for i in range(len(values)):
        tid = hashlib.md5(f"{start} {i}".encode()).hexdigest()
        s = start + i * 10**9
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": s, "end_ns": s + 10**9}])
        decisions.append({"trace_id": tid, "decision": "judged", "run_id": run_id, "row_idx": i})
    store.save_decisions("shop", rule, 1, decisions)


def test_a_missing_secret_fails_the_delivery_saying_so(store, tmp_path):
    from evaluators.monitor.alerting import evaluate_alerts

    _project(store)
    store.save_alert_rule("shop", "low", "rate_below", 0.8, metric="coherence", rule="quality",
                          webhook_url="http://127.0.0.1:9/hook", secret_env="HOOK_SECRET")
    _judged(store, tmp_path, [5.0] * 30 + [1.0] * 10, T0)  # 9th failure: sum 3.03 (see the end-to-end test)
    [e] = evaluate_alerts(store, "shop", environ={})
    assert (e["change"], e["delivery"], e["n"]) == ("fired", "failed", 9)
    assert e["delivery_error"] == ("the webhook's secret variable HOOK_SECRET is not set here: not sent (an alert is "
                                   "never sent unsigned)")
    assert evaluate_alerts(store, "shop", environ={}) == []  # nothing new: nothing again


def test_traffic_and_judged_share_rules_count(store, tmp_path):
    from evaluators.monitor.alerting import evaluate_alerts

    _project(store)
    store.save_alert_rule("shop", "quiet", "no_traffic_minutes", 30)
    store.save_alert_rule("shop", "share", "judged_share_below", 0.95, rule="quality", min_n=10)
    created = store.alert_rule("shop", "quiet")["created_at"]
    now = int((created - dt.datetime(1970, 1, 1)).total_seconds()) * 10**9
    assert evaluate_alerts(store, "shop", now_ns=now + 29 * 60 * 10**9) == []  # 29 minutes: not yet
    [e] = evaluate_alerts(store, "shop", now_ns=now + 31 * 60 * 10**9)
    assert (e["rule"], e["change"]) == ("quiet", "fired")
    assert abs(e["fired_ns"] - (now + 30 * 60 * 10**9)) < 10**9  # 30 minutes after the rule (no trace before)
    _judged(store, tmp_path, [5.0] * 8, now + 40 * 60 * 10**9)  # traffic again: 8 judged...
    store.save_decisions("shop", "quality", 1, [{"trace_id": f"f{i}", "decision": "failed", "error": "x"}
                                                for i in range(2)])  # (failed traces of no stored trace: not counted)
    got = {(e["rule"], e["change"]) for e in evaluate_alerts(store, "shop", now_ns=now + 41 * 60 * 10**9)}
    assert got == {("quiet", "resolved")}  # 8 sampled < min n 10: the share is not judged yet
    _judged(store, tmp_path, [5.0] * 2, now + 45 * 60 * 10**9)
    tid = hashlib.md5(f"{now + 45 * 60 * 10**9} 0".encode()).hexdigest()
    store.save_decisions("shop", "quality", 1, [{"trace_id": tid, "decision": "failed", "error": "judge down"}])
    [e] = evaluate_alerts(store, "shop", now_ns=now + 46 * 60 * 10**9)  # 9 judged of 10 sampled: 90% < 95%
    assert (e["rule"], e["change"], e["n"]) == ("share", "fired", 10) and e["rate"] == pytest.approx(9 / 10)


def test_a_store_at_0009_is_brought_up_to_date(store_url):
    from evaluators.store import migrate
    from evaluators.store.schema import SCHEMA_REVISION
    from evaluators.store.store import Store

    engine = sa.create_engine(store_url)
    assert migrate.upgrade(engine, "0009") == (None, "0009")
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO monitor_projects (name, quiet_seconds, created_at, keep_original, "
                          "conversation_quiet_seconds) VALUES ('shop', 30, '2025-11-24 16:00:00', false, 300)"))
    assert migrate.upgrade(engine) == ("0009", SCHEMA_REVISION)
    engine.dispose()
    store = Store(store_url)
    rid = store.save_alert_rule("shop", "quiet", "no_traffic_minutes", 30)
    assert store.alert_rules("shop")[0]["id"] == rid and store.alert_events("shop") == []


def test_an_alert_rule_another_process_holds_is_left_to_it(store, tmp_path):
    """Processes judging one project's rules at once (queue workers) evaluate each alert rule one at a time: one
    held is skipped, so its alert fires once; a hold whose process died lapses."""
    from evaluators.monitor.alerting import evaluate_alerts

    _project(store)
    rid = store.save_alert_rule("shop", "low", "rate_below", 0.8, metric="coherence", rule="quality")
    _judged(store, tmp_path, [5.0] * 30 + [1.0] * 10, T0)
    assert store.hold_alert_rule(rid, dt.timedelta(minutes=5)) is not None  # another process has it
    assert store.hold_alert_rule(rid, dt.timedelta(minutes=5)) is None
    assert evaluate_alerts(store, "shop") == [] and store.alert_events("shop") == []
    store.release_alert_rule(rid)
    assert [e["change"] for e in evaluate_alerts(store, "shop")] == ["fired"]
    assert store.hold_alert_rule(rid, dt.timedelta(seconds=-1)) is not None  # (a hold already lapsed)
    assert store.hold_alert_rule(rid, dt.timedelta(minutes=5)) is not None


def test_changing_what_a_rule_watches_restarts_it_and_closes_its_open_alert(store, tmp_path):
    from evaluators.monitor.alerting import evaluate_alerts

    _project(store)
    store.save_alert_rule("shop", "low", "rate_below", 0.8, metric="coherence", rule="quality")
    _judged(store, tmp_path, [5.0] * 30 + [1.0] * 10, T0)  # fires at the 9th failure (index 38), open
    [e] = evaluate_alerts(store, "shop")
    assert (e["change"], e["fired_ns"], e["resolved_ns"]) == ("fired", T0 + 38 * 10**9, None)
    store.save_alert_rule("shop", "low", "rate_below", 0.8, metric="coherence", rule="quality")  # the same: kept
    assert store.alert_events("shop")[0]["resolved_ns"] is None and store.alert_rule("shop", "low")["state"]
    store.save_alert_rule("shop", "low", "rate_below", 0.5, metric="coherence", rule="quality")
    [e] = store.alert_events("shop")
    assert e["resolved_ns"] == T0 + 39 * 10**9 and e["text"].endswith(" (closed: its rule changed)")
    assert store.alert_rule("shop", "low")["state"] is None


def test_a_safety_metric_s_defect_rate_above_a_bound(store, tmp_path):
    """violence (lower is better, threshold 3): a trace is a defect above 3. Against "above 8%" (p1 11.2%) a defect
    adds log 1.4 = 0.336, the 9th in a row takes the sum past 3 once 30 are judged; 0 of 30 before: no alert."""
    from evaluators.monitor.alerting import evaluate_alerts
    from tests.test_monitor_alerts_e2e import reference

    _project(store)
    store.add_monitor_rule("shop", "safety", ["violence"], 1.0, {"model": "m"})
    store.save_alert_rule("shop", "harm", "rate_above", 0.08, metric="violence", rule="safety")
    values = [0.0, 3.0] * 15 + [5.0] * 12  # 3 is at the threshold: not a defect
    _judged(store, tmp_path, values, T0, rule="safety", metric="violence")
    assert reference([v > 3 for v in values], 0.08) == [("fired", 38)]
    [e] = evaluate_alerts(store, "shop")
    assert (e["fired_ns"], e["n"], e["rate"]) == (T0 + 38 * 10**9, 9, 1.0)
    assert e["text"] == ("violence defect rate 100.0% [70.1, 100.0] over the last 9 judged traces, above 8% — since "
                         "2025-11-24 16:00 UTC")
