"""The corrected rate (PPI++ with a small-sample guard) against the PPI authors' package, ``ppi-python``: the
same numbers where the guard does not bind, a hand computation where it does, and a seeded simulation of
coverage and width beside their classic PPI (tests/ppi_sim.py; bench/ppi_coverage.py runs every scenario).
Also the reviews a ± 5-point interval needs, against a hand computation and against drawing them."""
from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np
import pytest

from evaluators.core import inference as inf
from tests.ppi_sim import Scenario, ppi_py, simulate

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

with warnings.catch_warnings():  # ppi_py sets simplefilter("ignore") on import: kept from the rest of the run
    pytest.importorskip("ppi_py", reason="ppi-python (requirements-dev.txt) is the reference implementation")
Z95 = NormalDist().inv_cdf(0.975)


def _data(seed: int, rate: float, flags_defect: float, flags_clean: float, rows: int = 3000, reviews: int = 200):
    rng = np.random.default_rng(seed)
    y = (rng.random(rows) < rate).astype(float)
    f = np.where(y == 1, rng.random(rows) < flags_defect, rng.random(rows) < flags_clean).astype(float)
    idx = rng.choice(rows, reviews, replace=False)
    rest = np.ones(rows, dtype=bool)
    rest[idx] = False
    return y, f, idx, rest


@pytest.mark.parametrize("seed, rate, flags_defect, flags_clean, lam", [
    (5, 0.30, 0.80, 0.10, "tuned"),  # a fair judge: lambda between 0 and 1
    (6, 0.10, 0.60, 0.30, "tuned"),  # a weak judge: lambda small
    (7, 0.40, 0.20, 0.70, 0.0),  # a judge that says the opposite: lambda clipped to 0, the reviews' own mean
])
def test_ppi_mean_equals_ppi_python_where_the_guard_does_not_bind(seed, rate, flags_defect, flags_clean, lam):
    y, f, idx, rest = _data(seed, rate, flags_defect, flags_clean)
    for v in (0, 1):  # the guard binds below 2 disagreements among a verdict's reviews: here there are more
        assert (y[idx][f[idx] == v] != v).sum() > 2
    pkg = ppi_py()
    c = inf.ppi_mean(f, f[idx], y[idx])
    lo, hi = pkg.ppi_mean_ci(y[idx], f[idx], f[rest], alpha=0.05)
    assert (c.corrected, c.low, c.high) == pytest.approx(
        (float(pkg.ppi_mean_pointestimate(y[idx], f[idx], f[rest])[0]), float(lo[0]), float(hi[0])), abs=1e-12)
    assert c.judged == pytest.approx(f.mean())
    if lam == "tuned":
        assert 0.05 < c.weight < 0.95
    else:
        assert c.weight == 0.0 and c.corrected == pytest.approx(y[idx].mean())


def test_guard_where_no_review_disagrees_equals_a_hand_computation():
    """1,000 rows, the judge fails 200; 40 reviewed (10 it failed, 30 it passed), every review agreeing."""
    f = np.r_[np.ones(200), np.zeros(800)]
    rev = np.r_[np.arange(10), np.arange(200, 230)]
    c = inf.ppi_mean(f, f[rev], f[rev])
    # lambda = cov(y, f) / ((1 + n/N_u) var(f over all rows)) = 0.1875 / ((1 + 40/960) 0.16016) > 1: clipped to 1
    assert c.weight == 1.0
    # no residual at lambda 1; the guard: 2 disagreements' spread among each verdict's reviews, by its share
    guard = 10 / 40 * (0.2 * 0.8) + 30 / 40 * (2 / 30 * 28 / 30)
    unreviewed = 190 / 960  # the judge's rate over the 960 rows no one reviewed
    var = unreviewed * (1 - unreviewed) / 960 + guard / 40
    half = Z95 * math.sqrt(var)
    assert (c.corrected, c.low, c.high) == pytest.approx((unreviewed, unreviewed - half, unreviewed + half), abs=1e-12)
    assert half == pytest.approx(0.0946, abs=1e-4)  # classic PPI says +/- 0.025 here: the judge's spread alone
    assert c.var_reviewed == pytest.approx(guard / 40)


# Each scenario: whether ppi-python's classic PPI covers there (bench/RESULTS.md, 4,000 runs each), and whether
# the judge is weak enough that tuning lambda must make ours clearly narrower than classic PPI.
SCENARIOS = [
    (Scenario(0.03, "good", 60), False, False),  # the case: classic PPI 0.82 (37% of runs no disagreement)
    (Scenario(0.10, "good", 150), True, False),
    (Scenario(0.30, "poor", 150), True, True),
    (Scenario(0.50, "fair", 300), True, True),
]
REPS = 1500


@pytest.mark.parametrize("sc, classic_covers, weak", SCENARIOS, ids=[str(s[0]) for s in SCENARIOS])
def test_coverage_and_width_against_classic_ppi(sc, classic_covers, weak):
    """Ours covers the true rate >= 93% (not detectably less: within 2 binomial SEs of 1,500 runs); where
    classic PPI covers, ours is at most 5% wider on average, and with a weak judge at least 10% narrower."""
    got = simulate(sc, REPS, seed=1, methods=("ours", "ppi"))
    ours, ppi = got["ours"], got["ppi"]
    tol = 2 * ours.se(0.93)  # 0.013 at 1,500 runs
    assert ours.coverage >= 0.93 - tol, f"{sc}: ours covers {ours.coverage:.3f}"
    if classic_covers:
        assert ppi.coverage >= 0.93 - tol
        assert ours.mean_width <= 1.05 * ppi.mean_width, f"{sc}: {ours.mean_width / ppi.mean_width:.3f}x classic"
    else:  # the package under-covers here, detectably: what the guard is for
        assert ppi.coverage < 0.93 - tol
    if weak:
        assert ours.mean_width <= 0.90 * ppi.mean_width, f"{sc}: {ours.mean_width / ppi.mean_width:.3f}x classic"


def _var(c: inf.Corrected, m: int) -> float:
    """The corrected rate's variance with m reviews in all, written out from the docstring's model."""
    n, big_n = c.reviewed_rows, c.all_rows
    return c.var_judged * (big_n - n) / (big_n - m) + c.var_reviewed * n / m


def test_more_reviews_for_five_points_equals_a_hand_computation():
    # judge's part 1e-4 over 2,940 unreviewed rows, reviews' part 0.0025 from 60: the target variance is
    # (0.05 / 1.959964)^2 = 6.5077e-4. With 277 reviews: 1e-4 * 2940 / 2723 + 0.0025 * 60 / 277 = 6.4949e-4 (under);
    # with 276: 1.0793e-4 + 5.4348e-4 = 6.5141e-4 (over). So 277 - 60 = 217 more.
    c = inf.Corrected(0.5, 0.5, 0.4, 0.6, 3000, 60, var_judged=1e-4, var_reviewed=0.0025)
    assert inf.more_reviews_for(c) == 217
    assert _var(c, 277) <= (0.05 / Z95) ** 2 < _var(c, 276)
    # no judge part: n' = ceil(0.0025 * 60 / 6.5077e-4) = ceil(230.49) = 231
    assert inf.more_reviews_for(inf.Corrected(0.5, 0.5, 0.4, 0.6, 3000, 60, 0.0, 0.0025)) == 231 - 60
    # narrow already: none
    assert inf.more_reviews_for(inf.Corrected(0.5, 0.5, 0.45, 0.55, 3000, 400, 1e-5, 5e-4)) == 0
    # 100 rows whose judge part alone is past the target until nearly every row is reviewed: out of reach
    assert inf.more_reviews_for(inf.Corrected(0.5, 0.5, 0.1, 0.9, 100, 20, 0.004, 0.004)) is None
    # every row reviewed already: nothing more to review
    assert inf.more_reviews_for(inf.Corrected(0.5, 0.5, 0.3, 0.7, 50, 50, 0.0, 0.005)) is None
    assert inf.more_reviews_for(inf.Corrected(0.5, 0.5, 0.47, 0.53, 50, 50, 0.0, 0.0002)) == 0


def test_more_reviews_drawn_bring_the_interval_to_five_points():
    """What 40 reviews of a 30% rate judged fairly say is needed (the mean over 20 such first samples, each
    noisy); then that many reviews drawn afresh (200 seeded runs of the same process): their intervals'
    half-width is 5 points on average."""
    rows, rate, fd, fc = 5000, 0.30, 0.75, 0.10
    said = []
    for seed in range(20):
        y, f, idx, _ = _data(seed, rate, fd, fc, rows=rows, reviews=40)
        c = inf.ppi_mean(f, f[idx], y[idx])
        assert (c.high - c.low) / 2 > 0.05
        said.append(inf.more_reviews_for(c))
    more = round(np.mean(said))
    assert 150 < more < 600
    halves = []
    for seed in range(200):
        y, f, idx, _ = _data(1000 + seed, rate, fd, fc, rows=rows, reviews=40 + more)
        c = inf.ppi_mean(f, f[idx], y[idx])
        halves.append((c.high - c.low) / 2)
    assert np.mean(halves) == pytest.approx(0.05, abs=0.0025)
