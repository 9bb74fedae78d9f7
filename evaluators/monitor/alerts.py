"""The statistic behind a rate alert: a restarted Bernoulli CUSUM, valid under continuous monitoring.

A rate alert watches one stream of judged traces, each either *bad* or not. For "defect rate above X" a trace is
bad when it is a defect; for "pass rate below X" a trace is bad when it did not pass, and the bound is ``1 - X``
(so one statistic serves both kinds). Looking at a plain rate after every trace would fire by chance sooner or
later; the CUSUM instead adds up, trace by trace, the log-likelihood ratio between the rate at the bound
(``p0``) and a nearby higher rate (``p1 = p0 + 0.4 min(p0, 1 - p0)``: 8% against 11.2%), restarting
from 0 whenever the sum falls below 0. It fires when the sum reaches ``h`` (and at least ``min_n`` traces have been judged), and the alert
resolves when the sum is back at 0 (the evidence for a raised rate is gone).

Under the bound's own rate the sum of one excursion reaches ``h`` with probability at most ``exp(-h)`` (Wald's
inequality), so the average run to a false alarm at exactly the bound is at least ``exp(h)`` traces, and far
longer below it. :data:`H` (the default) was set by simulation (``tests/test_monitor_alerts_stat.py``): 200
streams of 5,000 traces at 5% against "above 8%" alert in under 5% of streams, and a shift 5% -> 12% is caught
within 600 traces in at least 90% of them, both with margin (over seeds 0-5: at most 1% of streams ever
alert, mean 0.4%; at least 96% caught, mean 96.4%; sweeps of p1 = p0 + {0.4, 0.5, 0.75} min(p0, 1-p0) and
h in {3, 3.25, 3.5} chose this pair). The price: at a rate exactly at the bound a false alarm comes within about
``exp(3)`` ~ 20 excursions, so an alert set right at today's rate fires now and then.

:func:`scan` is the one implementation: vectorised over streams for the simulations, and called with one stream
and its carried :class:`State` when scores arrive. The rate an alert reports is over the traces of the current
excursion (since the sum last stood at 0), with its Wilson interval (:func:`evaluators.core.stats.wilson`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evaluators.core.stats import wilson

H = 3.0
MIN_N = 30


def alternative(bound: float) -> float:
    """The raised rate the CUSUM weighs the bound against."""
    if not 0.0 < bound < 1.0:
        raise ValueError(f"alert bound must be strictly between 0 and 1, got {bound!r}")
    return bound + 0.4 * min(bound, 1.0 - bound)


def increments(bound: float) -> tuple[float, float]:
    """The sum's step on a bad trace and on a good one: log p1/p0 and log (1-p1)/(1-p0)."""
    p1 = alternative(bound)
    return math.log(p1 / bound), math.log((1.0 - p1) / (1.0 - bound))


@dataclass
class State:
    """The statistic of each stream (arrays of one length): carried from one batch of scores to the next."""

    s: np.ndarray  # the CUSUM sum
    n: np.ndarray  # traces judged since the rule started
    run_n: np.ndarray  # traces in the current excursion (since the sum last stood at 0)
    run_k: np.ndarray  # bad traces among them
    firing: np.ndarray  # an alert is open

    @classmethod
    def fresh(cls, streams: int = 1) -> State:
        z = np.zeros(streams)
        zi = np.zeros(streams, dtype=np.int64)
        return cls(s=z.copy(), n=zi.copy(), run_n=zi.copy(), run_k=zi.copy(), firing=np.zeros(streams, dtype=bool))


@dataclass(frozen=True)
class Event:
    stream: int
    index: int  # position in the scanned batch of the trace that fired or resolved the alert
    kind: str  # "fired" | "resolved"
    run_k: int
    run_n: int


def scan(bad: np.ndarray, bound: float, *, h: float = H, min_n: int = MIN_N,
         state: State | None = None) -> tuple[State, list[Event]]:
    """Feed ``bad`` (streams x traces, booleans, in event-time order) through the CUSUM; the events it raised."""
    bad = np.atleast_2d(np.asarray(bad, dtype=bool))
    streams, length = bad.shape
    if h <= 0 or min_n < 1:
        raise ValueError(f"need h > 0 and min_n >= 1, got h={h!r}, min_n={min_n!r}")
    st = state if state is not None else State.fresh(streams)
    up, down = increments(bound)
    step = np.where(bad, up, down)
    s, n, run_n, run_k, firing = st.s.copy(), st.n.copy(), st.run_n.copy(), st.run_k.copy(), st.firing.copy()
    events: list[Event] = []
    for t in range(length):
        s += step[:, t]
        n += 1
        run_n += 1
        run_k += bad[:, t]
        reset = s <= 0.0
        s[reset] = 0.0
        resolved = firing & reset
        fired = ~firing & (s >= h) & (n >= min_n)
        for i in np.flatnonzero(fired | resolved):
            events.append(Event(int(i), t, "fired" if fired[i] else "resolved", int(run_k[i]), int(run_n[i])))
        firing = (firing & ~reset) | fired
        run_n[reset] = 0
        run_k[reset] = 0
    return State(s, n, run_n, run_k, firing), events


def first_alarms(bad: np.ndarray, bound: float, *, h: float = H, min_n: int = MIN_N) -> np.ndarray:
    """Per stream, the index of the trace that first fired an alert, or -1 (for simulations)."""
    bad = np.atleast_2d(np.asarray(bad, dtype=bool))
    first = np.full(bad.shape[0], -1, dtype=np.int64)
    _, events = scan(bad, bound, h=h, min_n=min_n)
    for e in events:
        if e.kind == "fired" and first[e.stream] < 0:
            first[e.stream] = e.index
    return first


def describe(metric: str, rate_name: str, direction: str, threshold: float, run_k: int, run_n: int,
             since: str) -> str:
    """The alert's text, e.g. ``violence defect rate 6.1% [3.9, 9.4] over the last 420 judged traces, above 2% —
    since 14:20``. ``run_k`` counts traces counted in the rate (defects, or passes for a pass rate)."""
    p, lo, hi = wilson(run_k, run_n)
    if p is None:
        raise ValueError("an alert needs at least one judged trace")
    return (f"{metric} {rate_name} {100 * p:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] over the last {run_n} "
            f"judged traces, {direction} {_pct(threshold)} — since {since}")


def _pct(x: float) -> str:
    return f"{100 * x:g}%"
