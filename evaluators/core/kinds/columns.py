"""One metric's cells as columns, and the aggregates over them: the one implementation of each aggregate.

A kind whose aggregates need only each row's status, numeric outputs and whether a note was left (score,
severity, label: ``Kind.columnar``) computes its summary here. The per-row path (``Kind.summary`` on a list
of cells, what ``RunResults`` and the CLI use) turns its cells into columns with :func:`columns_of` and
calls the same functions that the dashboard's columnar view calls on columns read straight from the store.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluators.core.stats import mean_ci, t95, wilson

if TYPE_CHECKING:
    from evaluators.core.kinds.base import MetricCell
    from evaluators.core.registry import MetricSpec

PENDING, OK, ERROR, SKIPPED = -1, 0, 1, 2
STATUS_NAMES = {OK: "ok", ERROR: "error", SKIPPED: "skipped"}
_CODE = {"ok": OK, "error": ERROR, "skipped": SKIPPED}


@dataclass
class MetricColumns:
    """One metric over every row: status code, each numeric output (NaN where none), a note flag;
    ``cells`` holds the combined cells for kinds aggregated from their cells (not ``columnar``)."""

    status: np.ndarray
    outputs: dict[str, np.ndarray]
    note: np.ndarray
    cells: list[MetricCell | None] | None = None


def number(v: Any) -> float:
    """An output as a float: NaN for None, blank text or anything that is not a number (True is 1.0)."""
    if v is None or isinstance(v, str) and not v.strip():
        return np.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def columns_of(spec: MetricSpec, cells: list[MetricCell | None], keep: bool = False) -> MetricColumns:
    """Cells (None for a pending row) -> columns of every output; ``keep`` keeps the cells beside them."""
    n = len(cells)
    status = np.full(n, PENDING, dtype=np.int8)
    note = np.zeros(n, dtype=bool)
    outputs = {k: np.full(n, np.nan) for k in spec.outputs}
    for i, c in enumerate(cells):
        if c is None:
            continue
        status[i] = _CODE[c.status]
        note[i] = bool(c.note)
        if c.status == "ok":
            for k, col in outputs.items():
                col[i] = number(c.outputs.get(k))
    return MetricColumns(status, outputs, note, cells if keep else None)


def mean_ci_of(values: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """:func:`evaluators.core.stats.mean_ci` over an array, the same operations in the same order (exact
    sums with ``math.fsum``; the squared deviations elementwise, each rounded as Python rounds it)."""
    n = len(values)
    if n < 2:
        return mean_ci(values.tolist())
    m = math.fsum(values.tolist()) / n
    sd = math.sqrt(math.fsum(((values - m) ** 2).tolist()) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return m, m - half, m + half


def counts(cols: MetricColumns, threshold: float) -> dict[str, Any]:
    """Rows scored, errored, skipped and pending (each row counted once), and the threshold in force."""
    s = cols.status
    return {"scored_rows": int((s == OK).sum()), "errored_rows": int((s == ERROR).sum()),
            "skipped_rows": int((s == SKIPPED).sum()), "pending_rows": int((s == PENDING).sum()),
            "threshold": threshold}


def threshold_verdicts(spec: MetricSpec, cols: MetricColumns, threshold: float) -> np.ndarray:
    """Per row 1 (passes), 0 (fails) or -1 (no verdict: pending, errored, skipped, no value), by direction."""
    v = cols.outputs[spec.primary]
    scored = (cols.status == OK) & ~np.isnan(v)
    with np.errstate(invalid="ignore"):
        good = v >= threshold if spec.higher_is_better else v <= threshold
    return np.where(scored, good.astype(np.int8), np.int8(-1)).astype(np.int8)


def label_verdicts(spec: MetricSpec, cols: MetricColumns) -> np.ndarray:
    """A label passes when false (nothing wrong was found)."""
    v = cols.outputs[spec.primary]
    scored = (cols.status == OK) & ~np.isnan(v)
    return np.where(scored, (v == 0).astype(np.int8), np.int8(-1)).astype(np.int8)


def means(spec: MetricSpec, cols: MetricColumns) -> dict[str, Any]:
    """Each output's mean over scored rows with its 95% t-interval, bounded by the scale (threshold-free)."""
    ok = cols.status == OK
    low, high = spec.score_range
    out: dict[str, Any] = {}
    for k in spec.outputs:
        m, lo, hi = mean_ci_of(cols.outputs[k][ok])
        out[k] = m
        # A t-interval can reach past the scale on few rows; the scale bounds what is possible.
        out[f"{k}_ci95"] = [None if lo is None else max(low, lo), None if hi is None else min(high, hi)]
    return out


def score_summary(spec: MetricSpec, cols: MetricColumns, threshold: float, verdicts: np.ndarray,
                  mean_part: dict[str, Any] | None = None) -> dict[str, Any]:
    """Counts, means with 95% intervals and the pass rate (Wilson interval) of one metric.

    Errored, skipped and pending rows are counted apart and left out of every denominator, except
    ``binary_aggregate``, which (as in the SDK) counts passes over all rows.
    """
    n = len(cols.status)
    out = counts(cols, threshold)
    out["noted_rows"] = int(((cols.status == OK) & cols.note).sum())
    for k, v in (mean_part if mean_part is not None else means(spec, cols)).items():
        out[k] = list(v) if isinstance(v, list) else v
    passes = int((verdicts == 1).sum())
    rate, lo, hi = wilson(passes, out["scored_rows"])
    out["pass_rate"], out["pass_rate_ci95"] = rate, [lo, hi]
    out["binary_aggregate"] = round(passes / n, 2) if n else None
    return out


def severity_part(spec: MetricSpec, cols: MetricColumns, verdicts: np.ndarray, uppers: list[float],
                  names: list[str]) -> dict[str, Any]:
    """The defect rate (scored rows past the threshold, Wilson interval), the rows per level (``uppers``:
    each level's upper bound) and the SDK's binary aggregate (passing rows over all rows)."""
    n, ok = len(cols.status), cols.status == OK
    n_ok = int(ok.sum())
    defects = int((verdicts == 0).sum())
    rate, lo, hi = wilson(defects, n_ok)
    at = np.minimum(np.searchsorted(np.array(uppers, dtype=float), cols.outputs[spec.primary][ok], side="left"),
                    len(uppers) - 1)
    levels = {name: 0 for name in names}
    for j, c in zip(*np.unique(at, return_counts=True)):
        levels[names[int(j)]] += int(c)
    return {"defect_rows": defects, "defect_rate": rate, "defect_rate_ci95": [lo, hi], "levels": levels,
            "binary_aggregate": round((n_ok - defects) / n, 2) if n else None}


def label_summary(spec: MetricSpec, cols: MetricColumns, threshold: float) -> dict[str, Any]:
    """Counts; per output the defect rate (share of scored rows true) with its Wilson interval; the pass
    rate (share labelled false) and the SDK's binary aggregate."""
    n, ok = len(cols.status), cols.status == OK
    n_ok = int(ok.sum())
    out: dict[str, Any] = {**counts(cols, threshold), "rates": {}}
    for k in spec.outputs:
        v = cols.outputs[k]
        trues = int((ok & (v != 0) & ~np.isnan(v)).sum())
        rate, lo, hi = wilson(trues, n_ok)
        out["rates"][k] = {"defect_rows": trues, "defect_rate": rate, "ci95": [lo, hi]}
        out[k], out[f"{k}_ci95"] = rate, [lo, hi]  # the mean of a true/false column is its defect rate
    main = out["rates"][spec.primary]
    out["defect_rows"] = main["defect_rows"]
    out["defect_rate"], out["defect_rate_ci95"] = main["defect_rate"], main["ci95"]
    passes = n_ok - main["defect_rows"]
    rate, lo, hi = wilson(passes, n_ok)
    out["pass_rate"], out["pass_rate_ci95"] = rate, [lo, hi]
    out["binary_aggregate"] = round(passes / n, 2) if n else None
    return out
