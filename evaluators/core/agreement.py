"""How far two sets of verdicts agree: Cohen's κ (plain and quadratically weighted), Spearman's ρ, the
confusion matrix, Krippendorff's α, Fleiss' κ, and bootstrap intervals for any of them.

Pure functions over numbers (no I/O). Every statistic returns ``None`` where it is undefined (too few
rows, or no variation to agree on) rather than a NaN a reader would have to interpret.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def _codes(a: Sequence, b: Sequence, labels: Sequence | None) -> tuple[np.ndarray, np.ndarray, list]:
    """Both verdict lists as indices into ``labels`` (default: every value either list holds, sorted)."""
    if len(a) != len(b):
        raise ValueError(f"two lists of verdicts of different lengths ({len(a)} and {len(b)})")
    labels = sorted(set(a) | set(b)) if labels is None else list(labels)
    index = {v: i for i, v in enumerate(labels)}
    try:
        return (np.array([index[v] for v in a], dtype=np.int64), np.array([index[v] for v in b], dtype=np.int64),
                labels)
    except KeyError as e:
        raise ValueError(f"verdict {e.args[0]!r} is not one of the scale's values {labels}") from None


def confusion(a: Sequence, b: Sequence, labels: Sequence | None = None) -> tuple[list, np.ndarray]:
    """``(labels, matrix)``: ``matrix[i, j]`` counts rows where ``a`` said ``labels[i]`` and ``b`` said ``labels[j]``."""
    ca, cb, labels = _codes(a, b, labels)
    k = len(labels)
    return labels, np.bincount(ca * k + cb, minlength=k * k).reshape(k, k)


def _kappa_of(matrix: np.ndarray, weights: str | None) -> float | None:
    n = matrix.sum()
    k = matrix.shape[0]
    if n == 0 or k < 2:
        return None
    expected = np.outer(matrix.sum(axis=1), matrix.sum(axis=0)) / n
    idx = np.arange(k)
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "quadratic":  # distances between positions on the scale, as scikit-learn weighs them
        w = (idx[:, None] - idx[None, :]).astype(float) ** 2
    elif weights == "linear":
        w = np.abs(idx[:, None] - idx[None, :]).astype(float)
    else:
        raise ValueError(f"unknown weights {weights!r}")
    chance = float((w * expected).sum())
    if chance == 0:  # both said one and the same value throughout: nothing to agree beyond chance
        return None
    return 1.0 - float((w * matrix).sum()) / chance


def cohen_kappa(a: Sequence, b: Sequence, labels: Sequence | None = None, weights: str | None = None) -> float | None:
    """Cohen's κ between two raters' verdicts on the same rows.

    Args:
        labels: the scale's values in order (needed for weights: a 1-5 score is ``[1, 2, 3, 4, 5]``).
        weights: None (every disagreement counts the same), "quadratic" or "linear" (by distance on the scale).
    """
    labels, matrix = confusion(a, b, labels)
    return _kappa_of(matrix, weights)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x), dtype=float)
    starts = np.r_[0, np.flatnonzero(np.diff(xs)) + 1]
    ends = np.r_[starts[1:], len(x)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's ρ: Pearson's correlation of the ranks (ties averaged); None when either side is constant."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"two lists of values of different lengths ({len(x)} and {len(y)})")
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    return None if den == 0 else float((rx * ry).sum()) / den


def krippendorff_alpha(data: Sequence[Sequence[float]], level: str = "nominal",
                       domain: Sequence[float] | None = None) -> float | None:
    """Krippendorff's α of a reliability matrix: one list per rater, one column per row, NaN where a rater
    gave no verdict. Rows with fewer than two verdicts add nothing.

    Args:
        level: "nominal", "ordinal" or "interval".
        domain: the scale's values (default: those present); ordinal distances count values by frequency.
    """
    m = np.asarray(data, dtype=float)
    if m.ndim != 2:
        raise ValueError("reliability data must be one list of verdicts per rater")
    present = m[~np.isnan(m)]
    values = np.unique(present) if domain is None else np.asarray(sorted(domain), dtype=float)
    if len(values) < 2:
        return None
    index = {float(v): i for i, v in enumerate(values)}
    counts = np.zeros((m.shape[1], len(values)))
    for unit in range(m.shape[1]):
        for v in m[:, unit]:
            if not np.isnan(v):
                counts[unit, index[float(v)]] += 1
    counts = counts[counts.sum(axis=1) >= 2]
    if not len(counts):
        return None
    pairable = counts.sum(axis=1)
    o = sum((np.outer(c, c) - np.diag(c)) / (p - 1) for c, p in zip(counts, pairable))
    n_v = o.sum(axis=0)
    n = n_v.sum()
    e = (np.outer(n_v, n_v) - np.diag(n_v)) / (n - 1)
    d = _distances(values, n_v, level)
    expected = float((e * d).sum())
    return None if expected == 0 else 1.0 - float((o * d).sum()) / expected


def _distances(values: np.ndarray, n_v: np.ndarray, level: str) -> np.ndarray:
    k = len(values)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":  # the values between two, counted by how often each was used
        d = np.zeros((k, k))
        for i in range(k):
            for j in range(k):
                lo, hi = min(i, j), max(i, j)
                d[i, j] = (n_v[lo:hi + 1].sum() - (n_v[lo] + n_v[hi]) / 2.0) ** 2
        return d
    raise ValueError(f"unknown level of measurement {level!r}")


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' κ of ``counts[row][category]`` (how many of the row's raters, the same number on every row,
    chose each category): agreement among several raters, or among a judge's repeated verdicts."""
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or not len(c):
        return None
    m = c.sum(axis=1)
    if not np.all(m == m[0]) or m[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (two or more) of verdicts on every row")
    m = m[0]
    p_row = ((c * c).sum(axis=1) - m) / (m * (m - 1))
    p_cat = c.sum(axis=0) / (len(c) * m)
    pe = float((p_cat * p_cat).sum())
    return None if pe == 1 else (float(p_row.mean()) - pe) / (1 - pe)


def bootstrap_ci(stat: Callable[[np.ndarray], float | None], n: int, rounds: int = 1000, seed: int = 0,
                 clusters: Sequence | None = None) -> tuple[float | None, float | None]:
    """95% percentile interval of ``stat(indices)`` over rows resampled with replacement.

    Args:
        stat: the statistic, given an array of row indices (with repeats) to compute it on.
        n: how many rows.
        clusters: per row, the group it belongs to (a conversation): whole groups are resampled, so turns
            of one conversation are not treated as independent (Miller, "Adding Error Bars to Evals", 2024).
    Returns:
        (low, high); (None, None) when fewer than two rows or the statistic is mostly undefined.
    """
    if n < 2:
        return None, None
    rng = np.random.default_rng(seed)
    if clusters is None:
        groups = [np.array([i]) for i in range(n)]
    else:
        keys: dict = {}
        for i, g in enumerate(clusters):
            keys.setdefault(g, []).append(i)
        groups = [np.array(v) for v in keys.values()]
    if len(groups) < 2:
        return None, None
    out = []
    for _ in range(rounds):
        pick = rng.integers(0, len(groups), len(groups))
        idx = np.concatenate([groups[g] for g in pick]) if clusters is not None else pick
        v = stat(idx)
        if v is not None and not math.isnan(v):
            out.append(v)
    if len(out) < rounds / 2:
        return None, None
    lo, hi = np.percentile(out, [2.5, 97.5])
    return float(lo), float(hi)


def rounds_for(n: int, work: float = 5e6, most: int = 1000, least: int = 200) -> int:
    """Bootstrap rounds for ``n`` rows: ``most`` on small samples, fewer on big ones (where the percentile
    interval of a statistic is all but normal and each round costs ``n``), never under ``least``."""
    return int(max(least, min(most, work // max(n, 1))))


def _codes_on(values: np.ndarray, scale_values: Sequence[float]) -> np.ndarray:
    """Values on a scale -> their positions in it (each value must be on the scale)."""
    grid = np.asarray(scale_values, dtype=float)
    pos = np.searchsorted(grid, np.asarray(values, dtype=float))
    if len(pos) and (pos.max() >= len(grid) or not np.array_equal(grid[np.minimum(pos, len(grid) - 1)], values)):
        raise ValueError("a value is not on the scale")
    return pos


def _kappa_codes(ca: np.ndarray, cb: np.ndarray, k: int, weights: str | None) -> float | None:
    return _kappa_of(np.bincount(ca * k + cb, minlength=k * k).reshape(k, k), weights)


def agreement_numbers(first: np.ndarray, second: np.ndarray, first_pass: np.ndarray, second_pass: np.ndarray,
                      scale_values: Sequence[float] | None, rounds: int | None = None, seed: int = 0) -> dict:
    """Two raters on the same rows (a judge and people, or two judges): Cohen's kappa on pass/fail and, on an
    ordered scale (``scale_values``, ascending), quadratically weighted kappa and Spearman's rho, each as
    (value, 95% bootstrap low, high); and the pass/fail confusion matrix (first rater's rows, second's columns).

    Args:
        first, second: each row's value on the scale (snapped to it); first_pass, second_pass: 1 pass, 0 fail.
        rounds: bootstrap rounds (default :func:`rounds_for` the rows).
    """
    n = len(first)
    rounds = rounds or rounds_for(n)
    fp, sp = np.asarray(first_pass).astype(np.int64), np.asarray(second_pass).astype(np.int64)
    out: dict = {"kappa": (_kappa_codes(fp, sp, 2, None),
                           *bootstrap_ci(lambda ix: _kappa_codes(fp[ix], sp[ix], 2, None), n, rounds, seed)),
                 "weighted_kappa": (None, None, None), "spearman": (None, None, None)}
    out["confusion"] = np.bincount(fp * 2 + sp, minlength=4).reshape(2, 2).tolist()
    if scale_values is not None:
        k = len(scale_values)
        ca, cb = _codes_on(first, sorted(scale_values)), _codes_on(second, sorted(scale_values))
        out["weighted_kappa"] = (_kappa_codes(ca, cb, k, "quadratic"),
                                 *bootstrap_ci(lambda ix: _kappa_codes(ca[ix], cb[ix], k, "quadratic"), n, rounds, seed))
        a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
        out["spearman"] = (spearman(a, b), *bootstrap_ci(lambda ix: spearman(a[ix], b[ix]), n, rounds, seed))
    return out
