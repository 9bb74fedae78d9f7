"""Alerts end to end (issue 32): a monitored project's rule judged through the engine by the loopback judge, a shift
planted in what the judge answers, `monitor rule run` rounds; the alert rule fires exactly once, its webhook reaches a
loopback receiver that checks X-Signature with its own HMAC, and it resolves in a later round. A late batch (traces
that started earlier, judged later) is placed by its event time. Expected alerts come from a CUSUM written out here
(the test's reference, not evaluators.monitor.alerts) over the planted verdicts in event time; hand numbers beside."""
from __future__ import annotations

import hashlib
import hmac
import json
import math

import pytest
from statsmodels.stats.proportion import proportion_confint

from tests.test_monitor_alerts_webhooks import SECRET, Receiver

pytestmark = pytest.mark.both_stores
T0 = 1_764_000_000 * 10**9  # 2025-11-24 16:00 UTC
STEP = 10 * 10**9  # a trace every 10 s of event time


def reference(bad: list[bool], bound: float, h: float = 3.0, min_n: int = 30) -> list[tuple[str, int]]:
    """A restarted Bernoulli CUSUM of p1 = bound + 0.4 min(bound, 1 - bound) against the bound: (kind, index)."""
    p1 = bound + 0.4 * min(bound, 1 - bound)
    s, firing, out = 0.0, False, []
    for i, b in enumerate(bad):
        s = max(0.0, s + (math.log(p1 / bound) if b else math.log((1 - p1) / (1 - bound))))
        if firing and s == 0.0:
            firing = False
            out.append(("resolved", i))
        elif not firing and s >= h and i + 1 >= min_n:
            firing = True
            out.append(("fired", i))
    return out


def _map(store, traces: list[tuple[int, bool]]) -> None:
    """Traces (start_ns, good answer?) received and mapped: the judge scores a "BAD" answer 1, any other 5."""
    for start, good in traces:
        tid = hashlib.md5(str(start).encode()).hexdigest()
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": start, "end_ns": start + 10**9}])
        assert store.save_mapped_trace("shop", tid, 1, fields={"query": f"q {start}", "response": (
            "fine answer" if good else "BAD answer") + f" {start}"}, sources={}, content=True, hint="",
            conversation_key=None, completeness="complete")


def _main(*args, capsys):
    from evaluators.cli.main import main

    code = main(["monitor", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_shift_fires_one_signed_alert_that_resolves_and_a_late_batch_lands_in_event_time(
        store, store_url, judge_server, monkeypatch, capsys):
    judge_server.responder = lambda prompt, req: json.dumps(
        {"reason": "planted", "score": 1 if "BAD answer" in prompt else 5})
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    db = ("--db", store_url)
    store.ensure_monitor_project("shop")
    assert _main("rule", "add", "--project", "shop", "--name", "quality", "--metrics", "coherence",
                 "--judge-base-url", judge_server.url, *db, capsys=capsys)[0] == 0
    with Receiver() as rx:
        code, out, err = _main("alert", "add", "--project", "shop", "--name", "low", "--metric", "coherence",
                               "--below", "80", "--webhook", rx.url, "--secret-env", "HOOK_SECRET", *db, capsys=capsys)
        assert code == 0, err
        planted = [True] * 40 + [False] * 20  # round 1: 40 pass, then 20 fail (coherence 1 < its threshold 3)
        # (mapped in an order other than their event time: the scan reads them by start time)
        _map(store, sorted(((T0 + i * STEP, g) for i, g in enumerate(planted)), key=lambda x: -x[0]))
        code, round1, err = _main("rule", "run", "--project", "shop", *db, capsys=capsys)
        assert code == 0, err
        # pass rate below 80%: a trace is bad when it fails, bound 0.2, p1 0.28; +log(1.4) = 0.336 a failure,
        # log(0.9) = -0.105 a pass: the 9th failure (index 48) takes the sum to 3.03 >= 3 (n = 49 >= 30)
        assert reference([not g for g in planted], 0.2) == [("fired", 48)]
        [alert] = store.alert_events("shop")
        assert (alert["fired_ns"], alert["resolved_ns"], alert["n"]) == (T0 + 48 * STEP, None, 9)
        low, high = proportion_confint(0, 9, alpha=0.05, method="wilson")  # 0 of the excursion's 9 passed
        assert (alert["rate"], alert["low"], alert["high"]) == (0.0, pytest.approx(low, abs=1e-6),
                                                                 pytest.approx(high, abs=1e-6))
        assert alert["text"] == ("coherence pass rate 0.0% [0.0, 29.9] over the last 9 judged traces, below 80% — "
                                 "since 2025-11-24 16:06 UTC")  # the excursion began at the first failure, 400 s in
        assert alert["delivery"] == "delivered"
        assert round1.splitlines()[-1] == f"alert 'low' of 'shop' fired (#{alert['id']}): {alert['text']}; delivery: delivered"
        [(body, sig, verified)] = rx.got
        assert verified and sig == hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        sent = json.loads(body)
        assert (sent["alert"], sent["id"], sent["rate"], sent["n"], sent["text"]) == (
            "low", alert["id"], 0.0, 9, alert["text"])
        assert SECRET not in body.decode() and "HOOK_SECRET" not in body.decode()

        # round 2: 80 passes. The sum, 20 x 0.336 = 6.73 after the failures, is back at 0 on the 64th (index 123)
        _map(store, [(T0 + (60 + i) * STEP, True) for i in range(80)])
        assert _main("rule", "run", "--project", "shop", *db, capsys=capsys)[0] == 0
        assert reference([not g for g in planted + [True] * 80], 0.2) == [("fired", 48), ("resolved", 123)]
        [alert] = store.alert_events("shop")
        assert alert["resolved_ns"] == T0 + 123 * STEP and len(rx.got) == 1  # resolved; delivered once

        # round 3, a late batch: 30 failures that started between the 10th and the 11th pass of round 2 (judged
        # only now). In event time they follow 10 passes (sum 5.68), raise it to 15.8, and the 70 passes after bring
        # it to 8.4 only: the alert was never resolved, and no second one fires (read in arrival order, 30 failures
        # after a resolved alert would have fired a second)
        late = [(T0 + 69 * STEP + (i + 1) * (STEP // 31), False) for i in range(30)]
        _map(store, late)
        code, out, err = _main("rule", "run", "--project", "shop", *db, capsys=capsys)
        assert code == 0, err
    stream = sorted([(T0 + i * STEP, g) for i, g in enumerate(planted + [True] * 80)] + late)
    assert reference([not g for _, g in stream], 0.2) == [("fired", 48)]
    [alert] = store.alert_events("shop")
    assert (alert["fired_ns"], alert["resolved_ns"], alert["delivery"]) == (T0 + 48 * STEP, None, "delivered")
    assert len(rx.got) == 1
    code, out, _ = _main("alerts", "--project", "shop", "--json", *db, capsys=capsys)
    [shown] = json.loads(out)
    assert (shown["fired_at"], shown["resolved_at"], shown["n"], shown["delivery"]) == (
        "2025-11-24T16:08:00Z", None, 9, "delivered")
