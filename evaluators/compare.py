"""Comparing runs row by row: a baseline against one or more other runs.

Runs on the same dataset align exactly; runs on different datasets of the same
length (say, two models' answers to the same queries) align by row position.
"""
from __future__ import annotations

from typing import Any

from .results import RunResults


def _verdict(res: RunResults, metric: str, i: int) -> str:
    spec = next(s for s in res.specs if s.name == metric)
    cell = res.cells[metric][i]
    if cell is None:
        return "pending"
    if cell.status != "ok":
        return cell.status
    return "pass" if res.passed(spec, cell) else "fail"


def shared_metrics(base: RunResults, other: RunResults) -> list[str]:
    names = {s.name for s in other.specs}
    return [s.name for s in base.specs if s.name in names]


def metric_deltas(base: RunResults, other: RunResults) -> list[dict[str, Any]]:
    """Per shared metric: means, pass rates and their differences, and verdict changes."""
    out = []
    for name in shared_metrics(base, other):
        bs = next(s for s in base.specs if s.name == name)
        sb, so = base.summary(bs), other.summary(next(s for s in other.specs if s.name == name))
        changes = [(_verdict(base, name, i), _verdict(other, name, i)) for i in range(min(len(base.dataset), len(other.dataset)))]
        out.append({
            "metric": name,
            "base_mean": sb[bs.primary], "mean": so[bs.primary],
            "mean_delta": None if sb[bs.primary] is None or so[bs.primary] is None else so[bs.primary] - sb[bs.primary],
            "base_pass_rate": sb["pass_rate"], "pass_rate": so["pass_rate"],
            "pass_rate_delta": None if sb["pass_rate"] is None or so["pass_rate"] is None else so["pass_rate"] - sb["pass_rate"],
            "improved": sum(1 for a, b in changes if a == "fail" and b == "pass"),
            "regressed": sum(1 for a, b in changes if a == "pass" and b == "fail"),
            "changed": sum(1 for a, b in changes if a != b),
        })
    return out


def row_changes(base: RunResults, others: list[RunResults]) -> list[dict[str, Any]]:
    """One record per row: each run's value and verdict per shared metric, and whether any verdict differs."""
    n = min([len(base.dataset)] + [len(o.dataset) for o in others])
    rows = []
    for i in range(n):
        rec: dict[str, Any] = {"row": i}
        changed = False
        for name in base.cells:
            bv = _verdict(base, name, i)
            rec[f"{name} · base"] = base.cells[name][i].value if base.cells[name][i] else None
            rec[f"{name} · base verdict"] = bv
            for k, o in enumerate(others, 1):
                if name not in o.cells:
                    continue
                ov = _verdict(o, name, i)
                rec[f"{name} · run {k}"] = o.cells[name][i].value if o.cells[name][i] else None
                rec[f"{name} · run {k} verdict"] = ov
                changed |= ov != bv
        rec["changed"] = changed
        rows.append(rec)
    return rows
