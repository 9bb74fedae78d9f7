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
from evaluators.core.stats import t95

Z95, Z80 = 1.959964, 0.841621  # two-sided 95% and one-sided 80% normal quantiles


@dataclass(frozen=True)
class Corrected:
    """A rate as judged over every row, corrected by the reviewed rows, with its 95% interval."""

    judged: float  # the judge's rate over all rows
    corrected: float
    low: float
    high: float
    all_rows: int
    reviewed_rows: int


def ppi_mean(judge_all: Sequence[float], judge_reviewed: Sequence[float], human_reviewed: Sequence[float],
             bounds: tuple[float, float] = (0.0, 1.0), strata_all: Sequence | None = None,
             strata_reviewed: Sequence | None = None) -> Corrected | None:
    """Prediction-powered estimate of a mean (Angelopoulos et al., Science 2023).

    The judge's mean over every row plus the mean of (human - judge) over the reviewed rows: the judge's
    systematic error, measured where a person looked, is taken off. Its variance adds the two parts'
    (the judge's spread over all rows, the error's spread over the reviewed ones); the interval uses
    Student's t on the reviewed rows, so that a handful of reviews gives a wide interval. Where every
    review agreed with the judge, the error's spread is taken as that of a share of 3/n (the "rule of
    three"), not as zero: n agreements bound the judge's error rate, they do not make it nil.

    With strata (a sample drawn separately from the rows the judge passed and failed), each stratum is
    corrected by its own reviews and weighted by its share of all rows; the spread of those shares (they
    too are a sample) is added to the variance.

    Args:
        judge_all: the judge's value (1/0 for pass/fail) on every scored row.
        judge_reviewed, human_reviewed: the judge's and the person's value on each reviewed row, in pairs.
        bounds: what the mean can be (a rate lies in [0, 1]); the interval is cut to them.
        strata_all, strata_reviewed: each row's stratum, for all rows and the reviewed ones.
    Returns:
        None when no row is reviewed, none is scored, or a stratum holding rows has no review.
    """
    f = np.asarray(judge_all, dtype=float)
    jr, hr = np.asarray(judge_reviewed, dtype=float), np.asarray(human_reviewed, dtype=float)
    if len(jr) != len(hr):
        raise ValueError("the judge's and the reviewers' values must come in pairs")
    n, big_n = len(hr), len(f)
    if n == 0 or big_n == 0:
        return None
    sa = np.zeros(big_n, dtype=int) if strata_all is None else np.asarray(strata_all)
    sr = np.zeros(n, dtype=int) if strata_reviewed is None else np.asarray(strata_reviewed)
    est = var = 0.0
    groups = np.unique(sa)
    parts = []  # (share of all rows, corrected stratum mean)
    for h in groups:
        fh, inh = f[sa == h], sr == h
        dh = hr[inh] - jr[inh]
        if not len(dh):
            return None
        w = len(fh) / big_n
        parts.append((w, float(fh.mean()) + float(dh.mean())))
        est += w * parts[-1][1]
        var_f = float(fh.var(ddof=1)) if len(fh) > 1 else 0.0
        # two pseudo-reviews, one each way (as Agresti and Coull add to a proportion): a few disagreements
        # among many agreements say little about how often the judge errs, and a Wald spread would trust them
        var_d = float(np.r_[dh, 1.0, -1.0].var(ddof=1))
        var += w * w * (var_f / len(fh) + var_d / len(dh))
    # the strata's shares are themselves a sample of what the judge would say on new rows
    var += sum(w * (m - est) ** 2 for w, m in parts) / big_n
    half = t95(max(1, n - len(groups))) * math.sqrt(var)
    lo, hi = bounds
    return Corrected(float(f.mean()), min(hi, max(lo, est)), max(lo, est - half), min(hi, est + half), big_n, n)


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
