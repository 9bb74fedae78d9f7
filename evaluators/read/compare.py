"""Comparing runs row by row: a baseline against one or more other runs.

Runs on the same dataset align exactly; runs on different datasets of the same
length (say, two models' answers to the same queries) align by row position.
"""
from __future__ import annotations

from typing import Any

from evaluators.read.results import RunResults


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
            "metric": name, "higher_is_better": bs.higher_is_better,
            "base_mean": sb[bs.primary], "mean": so[bs.primary],
            "mean_delta": None if sb[bs.primary] is None or so[bs.primary] is None else so[bs.primary] - sb[bs.primary],
            "base_pass_rate": sb["pass_rate"], "pass_rate": so["pass_rate"],
            "pass_rate_delta": None if sb["pass_rate"] is None or so["pass_rate"] is None else so["pass_rate"] - sb["pass_rate"],
            "improved": sum(1 for a, b in changes if a == "fail" and b == "pass"),
            "regressed": sum(1 for a, b in changes if a == "pass" and b == "fail"),
            "changed": sum(1 for a, b in changes if a != b),
        })
    return out


# Headers people read, for the keys of :func:`metric_deltas` (in this order).
DELTA_HEADERS = {"metric": "Metric", "base_mean": "Baseline mean", "mean": "Mean", "mean_delta": "Δ mean",
                 "base_pass_rate": "Baseline pass rate", "pass_rate": "Pass rate", "pass_rate_delta": "Δ pass rate",
                 "improved": "Improved rows", "regressed": "Regressed rows", "changed": "Changed verdicts"}


def _num(v: float | None, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def readable_deltas(deltas: list[dict[str, Any]]) -> list[dict[str, str]]:
    """:func:`metric_deltas` for reading: plain headers, rates as percentages, signed deltas.

    Returns:
        One record per metric keyed by :data:`DELTA_HEADERS`' values, every value a string
        ("–" where there is none), e.g. ``{"Pass rate": "64.5%", "Δ pass rate": "-6.5%", ...}``.
    """
    out = []
    for d in deltas:
        out.append({DELTA_HEADERS["metric"]: d["metric"],
                    DELTA_HEADERS["base_mean"]: _num(d["base_mean"], ".3f"), DELTA_HEADERS["mean"]: _num(d["mean"], ".3f"),
                    DELTA_HEADERS["mean_delta"]: _num(d["mean_delta"], "+.3f"),
                    DELTA_HEADERS["base_pass_rate"]: _num(d["base_pass_rate"], ".1%"),
                    DELTA_HEADERS["pass_rate"]: _num(d["pass_rate"], ".1%"),
                    DELTA_HEADERS["pass_rate_delta"]: _num(d["pass_rate_delta"], "+.1%"),
                    **{DELTA_HEADERS[k]: str(d[k]) for k in ("improved", "regressed", "changed")}})
    return out


def delta_tone(d: dict[str, Any], key: str) -> int:
    """+1 when a delta (``mean_delta`` or ``pass_rate_delta``) is an improvement, -1 a regression, 0 neither.

    A higher pass rate is always better; a higher mean only for a metric whose higher scores are better.
    """
    v = d.get(key)
    if not v:
        return 0
    up = v > 0
    return 1 if (up if key == "pass_rate_delta" or d["higher_is_better"] else not up) else -1


def row_changes(base: RunResults, others: list[RunResults]) -> list[dict[str, Any]]:
    """One record per row (in row order, so record k is row index k): its number as the dataset
    counts it (``Row``, 1-based, the "Row 4" of the detail pane), each run's value and verdict per
    shared metric, and whether any verdict differs (``changed``)."""
    n = min([len(base.dataset)] + [len(o.dataset) for o in others])
    rows = []
    for i in range(n):
        rec: dict[str, Any] = {"Row": base.dataset.row_no(i)}
        changed = False
        for name in base.cells:
            if not any(name in o.cells for o in others):
                continue
            bv = _verdict(base, name, i)
            rec[f"{name} · baseline"] = base.cells[name][i].value if base.cells[name][i] else None
            rec[f"{name} · baseline verdict"] = bv
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
