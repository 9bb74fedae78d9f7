"""The rate alert's statistic (evaluators.monitor.alerts): seeded, numpy-vectorised simulations of judged streams
for the false-alarm and detection guarantees, and hand-worked values for its steps and its text."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.monitor.alerts import State, describe, first_alarms, increments, scan

STREAMS, LENGTH = 200, 5000


def test_constant_rate_under_the_bound_rarely_ever_alerts():
    # 200 streams of 5,000 judged traces at a constant 5%, alert "defect rate above 8%": at most 5% EVER alert.
    rng = np.random.default_rng(20261128)
    bad = rng.random((STREAMS, LENGTH)) < 0.05
    first = first_alarms(bad, 0.08)
    assert (first >= 0).mean() <= 0.05


def test_shift_above_the_bound_is_caught_within_600_traces():
    # 5% for 2,000 judged traces, then 12%: fires within 600 traces of the shift (and not before) in >= 90%.
    rng = np.random.default_rng(20261129)
    shift = 2000
    rate = np.where(np.arange(shift + 600) < shift, 0.05, 0.12)
    bad = rng.random((STREAMS, shift + 600)) < rate
    first = first_alarms(bad, 0.08)
    caught = (first >= shift) & (first < shift + 600)
    assert caught.mean() >= 0.90


def test_steps_are_the_log_likelihood_ratio_of_the_bound_against_a_raised_rate():
    up, down = increments(0.08)  # p1 = 0.08 + 0.4 * 0.08 = 0.112
    assert up == pytest.approx(math.log(0.112 / 0.08))
    assert down == pytest.approx(math.log(0.888 / 0.92))
    up, down = increments(0.9)  # p1 = 0.94: the gap is 0.4 of 1 - p0
    assert up == pytest.approx(math.log(0.94 / 0.9))
    with pytest.raises(ValueError, match="between 0 and 1"):
        increments(0.0)


def test_min_n_holds_back_a_fire_and_the_alert_resolves_when_the_evidence_is_gone():
    # Every trace bad at bound 0.08: +log(1.4) = 0.336 a trace, so the sum passes 3.0 at the 9th trace;
    # min_n=30 holds the fire to the 30th (index 29), with all 30 traces in the excursion.
    st, events = scan(np.ones(40, dtype=bool), 0.08, min_n=30)
    assert [(e.kind, e.index, e.run_k, e.run_n) for e in events] == [("fired", 29, 30, 30)]
    # Carried state: good traces step log(0.888/0.92) = -0.03540; 40 bad left the sum at 40*log(1.4) = 13.459, so
    # it takes ceil(13.459/0.03540) = 381 good traces to reach 0 and resolve.
    s0 = st.s[0]
    need = math.ceil(s0 / -increments(0.08)[1])
    st2, events = scan(np.zeros(400, dtype=bool), 0.08, min_n=30, state=st)
    assert [(e.kind, e.index) for e in events] == [("resolved", need - 1)]
    assert need == 381
    # After the reset every good trace keeps the sum at 0, so the excursion stays empty.
    assert not st2.firing[0] and st2.run_n[0] == 0 and st2.s[0] == 0.0


def test_fresh_state_is_one_stream_of_zeros():
    st = State.fresh()
    assert st.s.tolist() == [0.0] and st.n.tolist() == [0] and st.firing.tolist() == [False]


def test_alert_text_names_rate_interval_window_bound_and_start():
    # 17 of 420 = 4.0%; Wilson 95% interval [2.5, 6.4] (k=17, n=420, z=1.96 worked by hand).
    text = describe("violence", "defect rate", "above", 0.02, 17, 420, "14:20")
    assert text == "violence defect rate 4.0% [2.5, 6.4] over the last 420 judged traces, above 2% — since 14:20"
