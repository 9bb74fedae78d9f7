"""Results as users read them, built from stored per-turn results at read time.

Thresholds are applied here, so changing one never needs a re-run. Row keys
follow the Azure AI Evaluation SDK's ``evaluate()`` output: ``inputs.<column>``
and ``outputs.<metric>.<key>``.
"""
from __future__ import annotations

import copy
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .data import Dataset
from .registry import MetricSpec
from .store import Result

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


@dataclass
class MetricCell:
    """One row's outcome for one metric, turns aggregated."""

    status: str  # ok | error | skipped
    outputs: dict[str, float | None]
    reason: str | None
    error: str | None
    turns: list[Result]

    @property
    def value(self) -> float | None:
        return next(iter(self.outputs.values()), None) if self.outputs else None


def combine(spec: MetricSpec, results: list[Result]) -> MetricCell:
    """Aggregate a row's results for one metric (mean over turns; any errored turn errs the row)."""
    results = sorted(results, key=lambda r: r.turn)
    errors = [r for r in results if r.status == "error"]
    if errors:
        msg = errors[0].error if len(results) == 1 else "; ".join(f"turn {r.turn + 1}: {r.error}" for r in errors)
        return MetricCell("error", {k: None for k in spec.outputs}, None, msg, results)
    ok = [r for r in results if r.status == "ok"]
    if not ok:
        why = "; ".join(r.error or "" for r in results) or "not computed"
        return MetricCell("skipped", {k: None for k in spec.outputs}, None, why, results)
    outputs = {k: math.fsum(r.outputs[k] for r in ok) / len(ok) for k in spec.outputs}
    if len(results) == 1:
        reason = ok[0].reason
    else:
        reason = " | ".join(f"Turn {r.turn + 1}: {r.reason}" for r in ok if r.reason) or None
    return MetricCell("ok", outputs, reason, None, results)


class RunResults:
    """A run's results with thresholds applied.

    Args:
        dataset: the run's dataset.
        results: stored results.
        specs: the run's metrics.
        thresholds: metric -> threshold (missing ones use the metric's default).
    """

    def __init__(self, dataset: Dataset, results: list[Result], specs: list[MetricSpec],
                 thresholds: dict[str, float] | None = None):
        self.dataset, self.specs = dataset, specs
        self.thresholds = {s.name: float((thresholds or {}).get(s.name, s.default_threshold)) for s in specs}
        grouped: dict[tuple[int, str], list[Result]] = defaultdict(list)
        for r in results:
            grouped[(r.row_idx, r.metric)].append(r)
        self.cells: dict[str, list[MetricCell | None]] = {}
        for s in specs:
            self.cells[s.name] = [combine(s, grouped[(i, s.name)]) if (i, s.name) in grouped else None
                                  for i in range(len(dataset))]

    def with_thresholds(self, overrides: dict[str, float]) -> "RunResults":
        """The same results with some thresholds changed: no re-load, no re-aggregation of turns."""
        out = copy.copy(self)
        out.thresholds = {name: float(overrides.get(name, value)) for name, value in self.thresholds.items()}
        return out

    def passed(self, spec: MetricSpec, cell: MetricCell | None) -> bool | None:
        if cell is None or cell.status != "ok" or cell.value is None:
            return None
        return spec.passes(cell.value, self.thresholds[spec.name])

    # ------------------------------------------------------------------ rows
    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` with the SDK's keys."""
        rec = self.dataset.records[i]
        out: dict[str, Any] = {f"inputs.{c}": rec.get(c) for c in self.dataset.columns}
        for s in self.specs:
            cell = self.cells[s.name][i]
            ns = f"outputs.{s.name}."
            for k in s.outputs:
                out[ns + k] = cell.outputs.get(k) if cell else None
            if s.is_judge:
                out[ns + s.reason_key] = cell.reason if cell else None
            p = self.passed(s, cell)
            out[ns + s.result_key] = None if p is None else ("pass" if p else "fail")
            out[ns + s.threshold_key] = self.thresholds[s.name]
            if cell is None:
                out[ns + s.error_key] = "not computed (run incomplete)"
            elif cell.status != "ok":
                out[ns + s.error_key] = cell.error
            if cell and self.dataset.shape == "conversation" and cell.turns:
                per = {k: [t.outputs.get(k) if t.outputs else None for t in cell.turns] for k in s.outputs}
                if s.is_judge:
                    per[s.reason_key] = [t.reason for t in cell.turns]
                per[s.result_key] = [None if t.value is None else ("pass" if s.passes(t.value, self.thresholds[s.name]) else "fail")
                                     for t in cell.turns]
                out[ns + "evaluation_per_turn"] = per
        return out

    def rows(self) -> list[dict[str, Any]]:
        return [self.row(i) for i in range(len(self.dataset))]

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows())

    # ------------------------------------------------------------------ aggregates
    def summary(self, spec: MetricSpec) -> dict[str, Any]:
        """Counts, means with 95% intervals and the pass rate (with its interval) of one metric."""
        cells = self.cells[spec.name]
        ok = [c for c in cells if c and c.status == "ok"]
        out: dict[str, Any] = {
            "scored_rows": len(ok),
            "errored_rows": sum(1 for c in cells if c and c.status == "error"),
            "skipped_rows": sum(1 for c in cells if c and c.status == "skipped"),
            "pending_rows": sum(1 for c in cells if c is None),
            "threshold": self.thresholds[spec.name],
        }
        low, high = spec.score_range
        for k in spec.outputs:
            m, lo, hi = mean_ci([c.outputs[k] for c in ok])
            out[k] = m
            # A t-interval can reach past the scale on few rows; the scale bounds what is possible.
            out[f"{k}_ci95"] = [None if lo is None else max(low, lo), None if hi is None else min(high, hi)]
        passes = sum(1 for c in ok if self.passed(spec, c))
        rate, lo, hi = wilson(passes, len(ok))
        out["pass_rate"], out["pass_rate_ci95"] = rate, [lo, hi]
        return out

    def metrics(self) -> dict[str, Any]:
        """``metrics.json``: ``<metric>.<key>`` -> aggregate (errored rows are not in the denominators)."""
        flat: dict[str, Any] = {}
        for s in self.specs:
            sm = self.summary(s)
            for k in s.outputs:
                flat[f"{s.name}.{k}"] = sm[k]
                flat[f"{s.name}.{k}_ci95_low"], flat[f"{s.name}.{k}_ci95_high"] = sm[f"{k}_ci95"]
            flat[f"{s.name}.{s.prefix}_pass_rate"] = sm["pass_rate"]
            flat[f"{s.name}.{s.prefix}_pass_rate_ci95_low"], flat[f"{s.name}.{s.prefix}_pass_rate_ci95_high"] = sm["pass_rate_ci95"]
            flat[f"{s.name}.{s.prefix}_threshold"] = sm["threshold"]
            for k in ("scored_rows", "errored_rows", "skipped_rows"):
                flat[f"{s.name}.{k}"] = sm[k]
        return flat

    # ------------------------------------------------------------------ the per-row table
    def table(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
              high: float | None = None, search: str = "", sort: str = "row", descending: bool = False):
        """Rows as a DataFrame for reading: text columns, each metric's value and verdict.

        Args:
            metric: the metric ``verdict``, ``low`` and ``high`` filter on (default: the first).
            verdict: "all", "pass", "fail" or "error" (error includes skipped and pending).
            low, high: keep rows whose value of ``metric`` lies within.
            search: case-insensitive text that the query or response must contain.
            sort: "row" or a metric name.
        Returns:
            DataFrame indexed by row index, with columns ``#``, ``query``, ``response`` and per metric
            ``<metric>`` and ``<metric> verdict``.
        """
        import pandas as pd

        ds = self.dataset
        recs = []
        for i in range(len(ds)):
            if ds.shape == "conversation":
                turns = ds.turns(i)
                q, r = (turns[-1].query, turns[-1].response) if turns else ("", "")
                q = f"[{len(turns)} turns] {q}"
            else:
                c = ds.canonical(i)
                q, r = c.get("query") or "", c.get("response") or ""
            rec = {"#": ds.row_no(i), "query": q, "response": r}
            for s in self.specs:
                cell = self.cells[s.name][i]
                p = self.passed(s, cell)
                rec[s.name] = cell.value if cell else None
                rec[f"{s.name} verdict"] = ("pass" if p else "fail") if p is not None else (cell.status if cell else "pending")
            recs.append(rec)
        df = pd.DataFrame(recs)
        if df.empty:
            return df
        name = metric if metric in self.cells else self.specs[0].name
        if verdict in ("pass", "fail"):
            df = df[df[f"{name} verdict"] == verdict]
        elif verdict == "error":
            df = df[~df[f"{name} verdict"].isin(["pass", "fail"])]
        if low is not None:
            df = df[df[name] >= low]
        if high is not None:
            df = df[df[name] <= high]
        if search:
            needle = search.lower()
            df = df[df["query"].str.lower().str.contains(needle, regex=False)
                    | df["response"].str.lower().str.contains(needle, regex=False)]
        if sort in self.cells:
            df = df.sort_values(sort, ascending=not descending, na_position="last", kind="stable")
        elif descending:
            df = df.iloc[::-1]
        return df
