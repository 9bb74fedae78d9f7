"""A seeded simulation of the corrected rate's 95% interval beside the PPI authors' package (``ppi-python``).

A scenario is a run of ``rows`` judged rows whose true defect rate is ``rate`` (each row a defect with that
probability: the rate is the one of the process the rows come from, as PPI's intervals mean it), a judge that
flags a defect with probability ``JUDGES[judge][0]`` and a clean row with ``JUDGES[judge][1]``, and
``reviews`` rows drawn at random without replacement for a person to say the truth. Each repetition draws one
such run and computes, on the same rows, our ``ppi_mean`` (judge over every row, as ``review.stats`` calls
it) and ``ppi_py.ppi_mean_ci`` classic (lambda = 1) and PPI++ (lambda tuned), each given the reviewed rows and
the judge's values on the rows no one reviewed, as its authors mean it. Their intervals are cut to [0, 1], as
ours (a rate lies there), before widths are compared. Used by tests/test_inference_ppi.py and
bench/ppi_coverage.py.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from evaluators.core.inference import ppi_mean

# (share of defects the judge flags, share of clean rows it flags)
JUDGES = {"good": (0.90, 0.03), "fair": (0.75, 0.10), "poor": (0.60, 0.25)}
METHODS = ("ours", "ppi", "ppi++")


@dataclass(frozen=True)
class Scenario:
    rate: float
    judge: str
    reviews: int
    rows: int = 3000

    def seed(self, seed: int) -> list[int]:
        return [seed, round(self.rate * 1000), list(JUDGES).index(self.judge), self.reviews, self.rows]

    def __str__(self) -> str:
        return f"{100 * self.rate:g}% defects, {self.judge} judge, {self.reviews} of {self.rows:,} rows reviewed"


@dataclass(frozen=True)
class Outcome:
    covered: int
    reps: int
    mean_width: float

    @property
    def coverage(self) -> float:
        return self.covered / self.reps if self.reps else math.nan

    def se(self, p: float) -> float:
        """The binomial standard error of a coverage of ``p`` measured over these repetitions."""
        return math.sqrt(p * (1 - p) / self.reps)


def ppi_by_hand(f, idx, y) -> tuple[float, float, float]:
    """PPI++'s mean and 95% interval written out from the paper (Angelopoulos, Duchi and Zrnic 2023), with
    the unreviewed rows as its unlabelled data, and the guard: each verdict's reviews spread at least as two
    disagreements among them would.

    Args:
        f: the judge's 1/0 on every row; idx: the reviewed rows' positions in it; y: the people's values there.
    """
    f, y = np.asarray(f, dtype=float), np.asarray(y, dtype=float)
    fr, fu = f[idx], np.delete(f, idx)
    n, nu = len(idx), len(fu)
    lam = min(1.0, max(0.0, np.cov(y, fr, bias=True)[0, 1] / ((1 + n / nu) * np.var(f, ddof=1))))
    est = lam * fu.mean() + (y - lam * fr).mean()
    guard = 0.0
    for v in (0, 1):
        if (fr == v).any():
            a = min(2 / (fr == v).sum(), 0.5)
            guard += (fr == v).mean() * max(0.0, a * (1 - a) - np.var(y[fr == v]))
    half = NormalDist().inv_cdf(0.975) * math.sqrt(lam ** 2 * np.var(fu) / nu + (np.var(y - lam * fr) + guard) / n)
    return est, max(0.0, est - half), min(1.0, est + half)


def ppi_py():
    """The ``ppi_py`` package, imported without the warnings filter it sets on import (``simplefilter
    ("ignore")`` would silence every later warning of the process)."""
    with warnings.catch_warnings():
        import ppi_py as mod
    return mod


def simulate(sc: Scenario, reps: int, seed: int = 0, methods: tuple[str, ...] = METHODS) -> dict[str, Outcome]:
    """Coverage of the true rate and mean width of each method's 95% interval over ``reps`` seeded runs.

    Also, under ``"<method> | none disagree"``, the same over the runs whose reviews all agree with the judge
    (what a method does when its reviews show no error)."""
    rng = np.random.default_rng(sc.seed(seed))
    flags_defect, flags_clean = JUDGES[sc.judge]
    pkg = ppi_py() if set(methods) - {"ours"} else None
    keys = [*methods, *(f"{m} | none disagree" for m in methods)]
    covered, width, runs = dict.fromkeys(keys, 0), dict.fromkeys(keys, 0.0), dict.fromkeys(keys, 0)
    for _ in range(reps):
        y = rng.random(sc.rows) < sc.rate
        u = rng.random(sc.rows)
        f = np.where(y, u < flags_defect, u < flags_clean).astype(float)
        y = y.astype(float)
        idx = rng.choice(sc.rows, sc.reviews, replace=False)
        rest = np.ones(sc.rows, dtype=bool)
        rest[idx] = False
        agree = bool((f[idx] == y[idx]).all())
        for m in methods:
            if m == "ours":
                c = ppi_mean(f, f[idx], y[idx])
                lo, hi = c.low, c.high
            else:
                got = pkg.ppi_mean_ci(y[idx], f[idx], f[rest], alpha=0.05, lam=1 if m == "ppi" else None)
                lo, hi = max(0.0, float(got[0][0])), min(1.0, float(got[1][0]))
            for k in (m, f"{m} | none disagree") if agree else (m,):
                covered[k] += lo <= sc.rate <= hi
                width[k] += hi - lo
                runs[k] += 1
    return {k: Outcome(covered[k], runs[k], width[k] / runs[k] if runs[k] else math.nan) for k in keys}
