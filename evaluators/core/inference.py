"""Numbers corrected and compared honestly: a rate corrected by reviewed rows (prediction-powered inference),
McNemar's exact test, a paired difference with its interval, and the rows a difference needs to be seen.

Pure functions over numbers (no I/O).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from evaluators.core.agreement import bootstrap_ci

Z95, Z80 = 1.959963984540054, 0.8416212335729143  # two-sided 95% and one-sided 80% normal quantiles


# The small-sample guard: within each of the judge's verdicts (pass, fail), the reviewers' values are taken
# to spread at least as much as GUARD_DISAGREEMENTS disagreements among that verdict's reviewed rows would
# make them. n agreements bound how often the judge errs there; they do not make it nil. Without it (PPI and
# PPI++ as published) the 95% interval collapses to the judge's own spread whenever no review disagrees, and
# covered 54-93% of the time where the judge is seldom wrong or a verdict is rare (bench/RESULTS.md,
# bench/ppi_coverage.py). With more disagreements than that it changes nothing. One was too few there
# (3% defects, 150-300 reviews: 0.926-0.928); two kept every scenario at 93% or more.
GUARD_DISAGREEMENTS = 2.0


@dataclass(frozen=True)
class Corrected:
    """A rate as judged over every row, corrected by the reviewed rows, with its 95% interval.

    ``var_judged`` and ``var_reviewed`` are the two parts of the estimate's variance: the judge's spread over
    the rows no one reviewed, and the reviews' (guard included); the half-width is Z95 times the root of
    their sum. More reviews shrink the second (``more_reviews_for``).
    """

    judged: float  # the judge's rate over all rows
    corrected: float
    low: float
    high: float
    all_rows: int
    reviewed_rows: int
    var_judged: float = 0.0
    var_reviewed: float = 0.0
    weight: float | None = None  # PPI++'s lambda: how far the judge's verdicts are trusted (one stratum)


def ppi_mean(judge_all: Sequence[float], judge_reviewed: Sequence[float], human_reviewed: Sequence[float],
             bounds: tuple[float, float] = (0.0, 1.0), strata_all: Sequence | None = None,
             strata_reviewed: Sequence | None = None) -> Corrected | None:
    """Prediction-powered estimate of a mean, power-tuned (PPI++: Angelopoulos, Duchi and Zrnic 2023).

    The judge's mean over the rows no one reviewed, weighted by lambda, plus the mean of (human - lambda x
    judge) over the reviewed rows. lambda = 1 is classic PPI (Angelopoulos et al., Science 2023); PPI++
    picks the lambda in [0, 1] that makes the variance least (cov(human, judge) / ((1 + n/N) var(judge)),
    exactly as the authors' ``ppi_py.ppi_mean_ci``), so a weak judge counts for less (lambda 0: the reviews'
    own mean) and the interval narrows with it. Its variance adds the two parts' (the judge's spread over
    the unreviewed rows, the reviews' residual spread) and the interval is normal, as theirs. Then one
    guard, which binds only when a judge verdict's reviewed rows hold fewer than ``GUARD_DISAGREEMENTS``
    disagreements (see there; with judge values other than two, all reviews count as one verdict): without
    it the interval is overconfident exactly when a reviewer has seen the judge err rarely or never.

    With strata (a sample drawn separately from the rows the judge passed and failed), each stratum is
    corrected by its own reviews and weighted by its share of all rows; the spread of those shares (they
    too are a sample) is added to the variance.

    Args:
        judge_all: the judge's value (1/0 for pass/fail) on every scored row, the reviewed ones included.
        judge_reviewed, human_reviewed: the judge's and the person's value on each reviewed row, in pairs.
        bounds: what the mean can be (a rate lies in [0, 1]); the interval is cut to them.
        strata_all, strata_reviewed: each row's stratum, for all rows and the reviewed ones.
    Returns:
        None when no row is reviewed, none is scored, or a stratum holding rows has no review.
    Raises:
        ValueError: unpaired values, or more reviewed rows than rows in a stratum.
    """
    f = np.asarray(judge_all, dtype=float)
    jr, hr = np.asarray(judge_reviewed, dtype=float), np.asarray(human_reviewed, dtype=float)
    if len(jr) != len(hr):
        raise ValueError("the judge's and the reviewers' values must come in pairs")
    n, big_n = len(hr), len(f)
    if n == 0 or big_n == 0:
        return None
    verdicts = bool(((f == f.min()) | (f == f.max())).all())  # pass/fail: the guard looks at each verdict
    if strata_all is None:
        groups = [(f, jr, hr)]
    else:
        sa, sr = np.asarray(strata_all), np.asarray(strata_reviewed)
        groups = [(f[sa == h], jr[sr == h], hr[sr == h]) for h in np.unique(sa)]
    est = var_j = var_r = 0.0
    parts = []  # (share of all rows, corrected stratum mean)
    lam = None
    for fh, jh, yh in groups:
        if not len(yh):
            return None
        w = len(fh) / big_n
        m, vj, vr, lam = _ppi_stratum(fh, jh, yh, bounds, verdicts)
        parts.append((w, m))
        est += w * m
        var_j += w * w * vj
        var_r += w * w * vr
    # the strata's shares are themselves a sample of what the judge would say on new rows
    var_j += sum(w * (m - est) ** 2 for w, m in parts) / big_n
    half = Z95 * math.sqrt(var_j + var_r)
    lo, hi = bounds
    return Corrected(float(f.mean()), min(hi, max(lo, est)), max(lo, est - half), min(hi, est + half), big_n, n,
                     var_j, var_r, lam if len(parts) == 1 else None)


def _ppi_stratum(f_all: np.ndarray, f: np.ndarray, y: np.ndarray, bounds: tuple[float, float],
                 verdicts: bool) -> tuple[float, float, float, float]:
    """One stratum's PPI++ mean, the variance of its judged and reviewed parts, and its lambda."""
    n, big_n = len(y), len(f_all)
    n_u = big_n - n  # rows no one reviewed (the reviewed ones are among all rows)
    if n_u < 0:
        raise ValueError(f"{n} reviewed rows but only {big_n} rows in all")
    # the unreviewed rows' judge mean and spread, from sums (which rows were reviewed is not passed in)
    s_all, q_all = float(f_all.sum()), float(np.dot(f_all, f_all))
    s_u, q_u = s_all - float(f.sum()), q_all - float(np.dot(f, f))
    mean_u = s_u / n_u if n_u else 0.0
    var_u = max(0.0, q_u / n_u - mean_u ** 2) if n_u else 0.0
    var_all = max(0.0, (q_all - s_all * s_all / big_n) / (big_n - 1)) if big_n > 1 else 0.0
    lam = 0.0
    if n_u and var_all > 0:
        cov = float(np.dot(y - y.mean(), f - f.mean())) / n
        lam = min(1.0, max(0.0, cov / ((1 + n / n_u) * var_all)))
    r = y - lam * f
    est = lam * mean_u + float(r.mean())
    var_r = float(r.var()) + _guard(f, y, bounds, verdicts)
    return est, lam * lam * var_u / n_u if n_u else 0.0, var_r / n, lam


def _guard(f: np.ndarray, y: np.ndarray, bounds: tuple[float, float], verdicts: bool) -> float:
    """Variance added to the reviews' residual spread where a judge verdict's reviews hold fewer than
    GUARD_DISAGREEMENTS disagreements: the spread of that many among its rows, less what they show."""
    lo, hi = bounds
    n, add = len(y), 0.0
    for yv in ((y[f == f.max()], y[f != f.max()]) if verdicts else (y,)):
        if not len(yv):
            continue
        a = min(GUARD_DISAGREEMENTS / len(yv), 0.5)
        add += len(yv) / n * max(0.0, a * (1 - a) * (hi - lo) ** 2 - float(yv.var()))
    return add


def more_reviews_for(c: Corrected, half_width: float = 0.05) -> int | None:
    """How many more reviews, drawn as the ones so far, would bring the corrected rate's interval to
    +/- ``half_width``, by PPI's own variance estimate: with n' reviews of N rows the reviews' part becomes
    ``var_reviewed * n / n'`` and the judge's, over the rows left unreviewed, ``var_judged * (N - n) / (N - n')``.

    Args:
        c: a corrected rate (its ``var_judged`` and ``var_reviewed``).
        half_width: the wanted half-width, as a share (0.05: +/- 5 points).
    Returns:
        0 when the interval is that narrow already; None when no number of reviews short of every row gets
        there by that estimate.
    """
    n, big_n = c.reviewed_rows, c.all_rows
    target = (half_width / Z95) ** 2

    def var(m: int) -> float:  # the estimate's variance with m reviews
        return c.var_judged * (big_n - n) / (big_n - m) + c.var_reviewed * n / m

    if c.var_judged + c.var_reviewed <= target:
        return 0
    if big_n - n < 2:
        return None
    # var(m) is convex in m: it falls to its least near m_best, then rises (the judge's part grows as fewer
    # rows are left unreviewed); the answer is the first m at or under the target on the way down
    ratio = math.sqrt(c.var_reviewed * n / (c.var_judged * (big_n - n))) if c.var_judged > 0 else math.inf
    m_best = big_n * ratio / (1 + ratio) if ratio < math.inf else big_n - 1
    best = min((min(big_n - 1, max(n, m)) for m in (math.floor(m_best), math.ceil(m_best))), key=var)
    if var(best) > target:
        return None
    lo, hi = n, best  # var(lo) > target >= var(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if var(mid) <= target else (mid, hi)
    return hi - n


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), summed in log space (exact enough for any n)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2) for i in range(k + 1)]
    top = max(logs)
    return math.exp(top) * math.fsum(math.exp(v - top) for v in logs)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided p-value of McNemar's exact test.

    Args:
        only_a: rows that pass in A and fail in B; only_b: the reverse (rows where both agree carry no
            information about which is better).
    """
    n = only_a + only_b
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * _binom_cdf_half(min(only_a, only_b), n))


def rows_for_power_paired(diff: float, sd: float) -> int | None:
    """Paired rows needed to detect a mean difference ``diff`` with 80% power at the 5% level, when the
    per-row differences spread by ``sd``."""
    if not diff or sd is None or math.isnan(sd) or sd == 0:
        return None
    return math.ceil(((Z95 + Z80) * sd / abs(diff)) ** 2)


def rows_for_power_mcnemar(p_only_a: float, p_only_b: float) -> int | None:
    """Rows needed for McNemar's test to detect the difference between the two discordant shares with 80%
    power at the 5% level (Connor, Biometrics 1987)."""
    disc, d = p_only_a + p_only_b, p_only_a - p_only_b
    if d == 0 or disc <= d * d:
        return None
    return math.ceil((Z95 * math.sqrt(disc) + Z80 * math.sqrt(disc - d * d)) ** 2 / (d * d))


@dataclass(frozen=True)
class PairedDifference:
    """Mean of (B - A) over paired rows, with its 95% interval, a p-value and the rows a difference of that
    size needs (80% power)."""

    diff: float
    low: float | None
    high: float | None
    p_value: float | None
    rows: int
    rows_needed: int | None
    test: str  # "McNemar exact" or "paired bootstrap"


def paired_difference(a: Sequence[float], b: Sequence[float], binary: bool, rounds: int = 2000, seed: int = 0,
                      clusters: Sequence | None = None) -> PairedDifference | None:
    """How B differs from A on the same rows.

    Args:
        a, b: each row's value under A and under B (1/0 for pass/fail when ``binary``).
        binary: McNemar's exact test for the p-value; otherwise the paired bootstrap's.
        clusters: per row, its conversation: resampled whole.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) != len(y):
        raise ValueError("the two runs' values must come in pairs")
    n = len(x)
    if n == 0:
        return None
    d = y - x
    diff = float(d.mean())
    lo, hi = bootstrap_ci(lambda idx: float(d[idx].mean()), n, rounds, seed, clusters)
    if binary:
        only_a, only_b = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
        p = mcnemar_exact(only_a, only_b)
        needed = rows_for_power_mcnemar(only_a / n, only_b / n)
        test = "McNemar exact"
    else:
        # the bootstrap's p-value: how often the resampled mean falls on the other side of zero (doubled)
        rng = np.random.default_rng(seed + 1)
        means = np.array([d[rng.integers(0, n, n)].mean() for _ in range(rounds)]) if n > 1 else np.array([diff])
        centred = means - diff
        p = min(1.0, float((np.abs(centred) >= abs(diff)).mean())) if n > 1 else None
        needed = rows_for_power_paired(diff, float(d.std(ddof=1)) if n > 1 else float("nan"))
        test = "paired bootstrap"
    return PairedDifference(diff, lo, hi, p, n, needed, test)
