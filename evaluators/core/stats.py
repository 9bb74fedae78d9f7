"""Interval estimates shared by every kind of metric (pure functions, no I/O)."""
from __future__ import annotations

import math

# Two-sided 95% Student t critical values by degrees of freedom; past 30 we
# interpolate in 1/df towards the normal 1.96 (error < 0.001).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042}


def t95(df: int) -> float:
    if df in _T95:
        return _T95[df]
    return 1.960 + (2.042 - 1.960) * 30 / df


def mean_ci(values: list[float]) -> tuple[float | None, float | None, float | None]:
    """Mean with a 95% t-interval; (mean, None, None) for a single value, all None for none."""
    n = len(values)
    if n == 0:
        return None, None, None
    m = math.fsum(values) / n
    if n == 1:
        return m, None, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return m, m - half, m + half


def wilson(k: int, n: int) -> tuple[float | None, float | None, float | None]:
    """Proportion k/n with its 95% Wilson score interval (sound at 0% and 100%)."""
    if n == 0:
        return None, None, None
    z = 1.959964
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)
