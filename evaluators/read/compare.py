"""Comparing runs row by row: a baseline against one or more other runs.

Runs on the same dataset align exactly; runs on different datasets of the same
length (say, two models' answers to the same queries) align by row position.
"""
from __future__ import annotations

from typing import Any

from evaluators.read.charts_overview import number
from evaluators.read.results import RunResults


def passes_at(spec, threshold: float) -> str:
    """The rule a row's verdict follows, said the way the page says a rate's threshold: "≥ 3", "≤ 0.5",
    or "not labelled" for a label (whose verdict is the label itself, whatever the threshold)."""
    if spec.kind == "label":
        return "not labelled"
    return f"{'≥' if spec.higher_is_better else '≤'} {number(threshold)}"


def run_rules(run: dict[str, Any]) -> dict[str, str]:
    """Metric -> the rule its verdicts follow in a stored run, at the run's own thresholds (:func:`passes_at`)."""
    from evaluators.run.spec import RunSpec

    rs = RunSpec.from_dict(run["spec"])
    return {s.name: passes_at(s, rs.threshold(s)) for s in rs.specs()}


def threshold_differences(base_run: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, list[tuple[dict, str]]]:
    """Metric -> [(run, its rule)] for each of ``runs`` whose own threshold for a metric it shares with the
    baseline is not the baseline's: on those metrics, their pass rates differ by the threshold as well as by
    the answers (labels never differ: their verdict ignores the threshold)."""
    base = run_rules(base_run)
    out: dict[str, list[tuple[dict, str]]] = {}
    for run in runs:
        for name, rule in run_rules(run).items():
            if name in base and rule != base[name] and run["id"] != base_run["id"]:
                out.setdefault(name, []).append((run, rule))
    return out


def verdict(res: RunResults, metric: str, i: int) -> str:
    """Row ``i``'s verdict on ``metric``: "pass", "fail", "pending", or the cell's status ("error", "skipped")."""
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
        changes = [(verdict(base, name, i), verdict(other, name, i)) for i in range(min(len(base.dataset), len(other.dataset)))]
        out.append({
            "metric": name, "higher_is_better": bs.higher_is_better,
            "base_passes_at": passes_at(bs, base.thresholds[name]), "passes_at": passes_at(bs, other.thresholds[name]),
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
DELTA_HEADERS = {"metric": "Metric", "passes_at": "Passes at", "base_mean": "Baseline mean", "mean": "Mean", "mean_delta": "Δ mean",
                 "base_pass_rate": "Baseline pass rate", "pass_rate": "Pass rate", "pass_rate_delta": "Δ pass rate",
                 "improved": "Improved rows", "regressed": "Regressed rows", "changed": "Changed verdicts"}


def _num(v: float | None, fmt: str) -> str:
    if v is None:
        return "–"
    if float(v).is_integer() and not fmt.endswith("%"):  # a mean of 4 or a change of 0: no "4.000"
        return f"{int(v):+d}" if fmt.startswith("+") and v else str(int(v))
    return format(v, fmt)


def readable_deltas(deltas: list[dict[str, Any]]) -> list[dict[str, str]]:
    """:func:`metric_deltas` for reading: plain headers, rates as percentages, signed deltas, and the rule
    the rates count ("Passes at": "≥ 3", or "≥ 3 → ≥ 4" when the run's threshold is not the baseline's).

    Returns:
        One record per metric keyed by :data:`DELTA_HEADERS`' values, every value a string
        ("–" where there is none), e.g. ``{"Pass rate": "64.5%", "Δ pass rate": "-6.5%", ...}``.
    """
    out = []
    for d in deltas:
        rule = d["passes_at"] if d["passes_at"] == d["base_passes_at"] else f"{d['base_passes_at']} → {d['passes_at']}"
        out.append({DELTA_HEADERS["metric"]: d["metric"], DELTA_HEADERS["passes_at"]: rule,
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
            bv = verdict(base, name, i)
            rec[f"{name} · baseline"] = base.cells[name][i].value if base.cells[name][i] else None
            rec[f"{name} · baseline verdict"] = bv
            for k, o in enumerate(others, 1):
                if name not in o.cells:
                    continue
                ov = verdict(o, name, i)
                rec[f"{name} · run {k}"] = o.cells[name][i].value if o.cells[name][i] else None
                rec[f"{name} · run {k} verdict"] = ov
                changed |= ov != bv
        rec["changed"] = changed
        rows.append(rec)
    return rows
