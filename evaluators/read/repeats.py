"""How far a judge agrees with itself, and a jury with itself: for a run judged K times per task
(``--repeat K``), the share of rows whose pass/fail verdict flips between judgments, Fleiss' kappa across
the judgments on the metric's scale, and which rows flip (a review queue of them is where a person helps
most); for a jury (several ``--judge``), the same across its judges, with Krippendorff's alpha and each
pair's Cohen's kappa."""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.core.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha
from evaluators.core.scales import scale, snap
from evaluators.core.stats import wilson
from evaluators.core.votes import JURORS, VOTES
from evaluators.read.results import RunResults


def repeat_agreement(res: RunResults, name: str) -> dict[str, Any] | None:
    """Self-agreement of one metric's repeated judgments; None when its rows were judged once.

    Returns:
        ``repeat`` (judgments per task), ``rows`` (rows with repeated judgments), ``flip_rows`` (row indices
        whose verdict differs between judgments, on any turn), ``flip_share`` with ``flip_share_ci95``
        (Wilson), and ``fleiss_kappa`` over every judged unit (a row, or a conversation's turn).
    """
    spec = next(s for s in res.specs if s.name == name)
    threshold = res.thresholds[name]
    units, rows, flips = _units(res, name, jury=False)
    return _self_agreement(spec, threshold, units, rows, flips)


def _units(res: RunResults, name: str, jury: bool) -> tuple[list[list[float]], int, list[int]]:
    """Every judged unit's judgments (a row's, or a conversation turn's), the rows having any, and the rows
    whose pass/fail verdict differs between judgments; ``jury``: a jury's judges, else one judge's repeats."""
    spec = next(s for s in res.specs if s.name == name)
    threshold = res.thresholds[name]
    units: list[list[float]] = []
    rows, flips = 0, []
    for i, cell in enumerate(res.cells_of(name)):
        if cell is None or cell.status != "ok":
            continue
        votes_of_row = [list(t.outputs[VOTES]) for t in cell.turns if t.outputs and len(t.outputs.get(VOTES) or []) > 1
                        and (JURORS in t.outputs) == jury]
        if not votes_of_row:
            continue
        rows += 1
        units += votes_of_row
        if any(len({spec.kind_impl.turn_passed(spec, float(v), threshold) for v in votes}) > 1 for votes in votes_of_row):
            flips.append(i)
    return units, rows, flips


def _self_agreement(spec, threshold: float, units: list[list[float]], rows: int, flips: list[int]) -> dict | None:
    if not units:
        return None
    k = min(len(u) for u in units)
    values = [c.value for c in scale(spec)]
    counts = np.zeros((len(units), len(values)), dtype=int)
    for row, votes in enumerate(units):
        for v in votes[:k]:
            counts[row, values.index(snap(spec, float(v)))] += 1
    share, lo, hi = wilson(len(flips), rows)
    try:
        kappa = fleiss_kappa(counts)
    except ValueError:
        kappa = None
    return {"repeat": k, "rows": rows, "flip_rows": flips, "flip_share": share, "flip_share_ci95": [lo, hi],
            "fleiss_kappa": kappa}


def jury_agreement(res: RunResults, name: str) -> dict[str, Any] | None:
    """Agreement among a jury's judges on one metric; None without a jury. As :func:`repeat_agreement` (the
    rows where the judges split on pass/fail, Fleiss' kappa), plus Krippendorff's alpha on the scale and
    Cohen's kappa on pass/fail for each pair of judges (``pairs``: (judge, judge, kappa))."""
    spec = next(s for s in res.specs if s.name == name)
    threshold = res.thresholds[name]
    units, rows, splits = _units(res, name, jury=True)
    got = _self_agreement(spec, threshold, units, rows, splits)
    if got is None:
        return None
    names = next(t.outputs[JURORS] for c in res.cells_of(name) if c is not None and c.status == "ok"
                 for t in c.turns if t.outputs and JURORS in t.outputs)
    k = len(names)
    data = np.array([u[:k] for u in units], dtype=float).T
    got["alpha"] = krippendorff_alpha(data, "ordinal" if spec.kind != "label" else "nominal",
                                      [c.value for c in scale(spec)])
    passed = [[int(spec.kind_impl.turn_passed(spec, float(v), threshold)) for v in row] for row in data]
    got["pairs"] = [(names[a], names[b], cohen_kappa(passed[a], passed[b], labels=[0, 1]))
                    for a in range(k) for b in range(a + 1, k)]
    got["jurors"] = list(names)
    return got


def repeat_keys(res: RunResults) -> dict[str, Any]:
    """``metrics.json`` keys of the metrics judged several times: ``<metric>.repeat``,
    ``<metric>.repeat_flip_share`` (with ``_ci95_low`` / ``_ci95_high``) and ``<metric>.repeat_fleiss_kappa``."""
    out: dict[str, Any] = {}
    for spec in res.specs:
        if not spec.is_judge:
            continue
        n = spec.name
        jury = jury_agreement(res, n)
        if jury is not None:
            out[f"{n}.jury_judges"] = len(jury["jurors"])
            out[f"{n}.jury_split_share"] = jury["flip_share"]
            out[f"{n}.jury_split_share_ci95_low"], out[f"{n}.jury_split_share_ci95_high"] = jury["flip_share_ci95"]
            out[f"{n}.jury_fleiss_kappa"], out[f"{n}.jury_alpha"] = jury["fleiss_kappa"], jury["alpha"]
        got = repeat_agreement(res, spec.name)
        if got is None:
            continue
        out[f"{n}.repeat"] = got["repeat"]
        out[f"{n}.repeat_flip_share"] = got["flip_share"]
        out[f"{n}.repeat_flip_share_ci95_low"], out[f"{n}.repeat_flip_share_ci95_high"] = got["flip_share_ci95"]
        out[f"{n}.repeat_fleiss_kappa"] = got["fleiss_kappa"]
    return out
