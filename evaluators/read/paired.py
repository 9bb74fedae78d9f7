"""Two runs on the same rows, compared honestly: the paired difference of each shared metric with its interval
and p-value (McNemar's exact test on pass/fail, the paired bootstrap on scores), said in a sentence with the
rows a difference of that size needs; and, for two judges of the same rows, how far the judges agree.

Rows pair by index (runs of one dataset, or datasets of the same length in the same order). A conversation
is one row, so resampling rows resamples whole conversations: its turns are never treated as independent.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.core.agreement import agreement_numbers, rounds_for
from evaluators.core.scales import ordinal, reviewable, scale, snap
from evaluators.core.inference import paired_difference
from evaluators.read.results import RunResults



def _spec(res: RunResults, name: str):
    return next(s for s in res.specs if s.name == name)


def _defect(spec) -> bool:
    return spec.kind in ("severity", "label")


def _pairs(base: RunResults, other: RunResults, name: str) -> np.ndarray:
    """Row indices both runs scored on metric ``name``."""
    n = min(len(base), len(other))
    vb, vo = base.verdicts(name)[:n], other.verdicts(name)[:n]
    return np.flatnonzero((vb >= 0) & (vo >= 0))


def paired_differences(base: RunResults, other: RunResults, label: str = "the candidate") -> list[dict[str, Any]]:
    """Per metric both runs have: the change in its pass (or defect) rate and in its mean score, each with a
    95% interval, a p-value, the rows needed to see a change that size (80% power) and a sentence."""
    names = {s.name for s in other.specs}
    out = []
    for spec in base.specs:
        if spec.name not in names:
            continue
        rows = _pairs(base, other, spec.name)
        if not len(rows):
            out.append({"metric": spec.name, "rows": 0, "sentence": f"{spec.name}: no row scored in both runs"})
            continue
        defect = _defect(spec)
        b = (base.verdicts(spec.name)[rows] == (0 if defect else 1)).astype(float)
        o = (other.verdicts(spec.name)[rows] == (0 if defect else 1)).astype(float)
        rate = paired_difference(b, o, binary=True, rounds=rounds_for(len(rows), 2e7, 2000))
        rec: dict[str, Any] = {"metric": spec.name, "rows": len(rows), "measure": "defect rate" if defect else "pass rate",
                               "rate": rate}
        if spec.kind in ("score", "wb_score") or (spec.kind != "label" and not defect):
            rec["mean"] = paired_difference(base.values(spec.name)[rows], other.values(spec.name)[rows], binary=False,
                                            rounds=rounds_for(len(rows), 2e7, 2000))
        rec["sentence"] = sentence(spec.name, rec["measure"], rate, label)
        out.append(rec)
    return out


def sentence(metric: str, measure: str, d, label: str) -> str:
    """"the candidate's pass rate of coherence is 3.2 points lower than the baseline's [-5.3, -1.1] on 200
    rows; unlikely to be chance (p = 0.004)" or "...; could be chance (p = 0.31): a change this size needs
    about 1,240 rows to be seen 4 times in 5"."""
    if d is None:
        return f"{metric}: nothing to compare"
    pts = 100 * d.diff
    where = "higher" if pts > 0 else "lower"
    text = (f"{label}'s {measure} on {metric} is {abs(pts):.1f} points {where} than the baseline's "
            if pts else f"{label}'s {measure} on {metric} is the same as the baseline's ")
    if d.low is not None:
        text += f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}] "
    text += f"on {d.rows:,} paired rows; "
    if d.p_value is not None and d.p_value < 0.05:
        return text + f"unlikely to be chance ({d.test}, p = {d.p_value:.3g})"
    need = f": a change this size needs about {d.rows_needed:,} paired rows to be seen 4 times in 5" if d.rows_needed else ""
    return text + f"could be chance ({d.test}, p = {1.0 if d.p_value is None else d.p_value:.2g}){need}"


def judges_agreement(base: RunResults, other: RunResults, top: int = 10, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per judged metric both runs have (two judges, or two judgings, of the same rows): Cohen's kappa on
    pass/fail and quadratically weighted kappa on the scale, Spearman's rho, each with a 95% bootstrap
    interval, the confusion matrix (the baseline's verdicts by rows), and the rows where they differ most."""
    names = {s.name for s in other.specs}
    out = {}
    for spec in base.specs:
        if spec.name not in names or not reviewable(spec):
            continue
        rows = _pairs(base, other, spec.name)
        if not len(rows):
            continue
        a = np.array([snap(spec, float(v)) for v in base.values(spec.name)[rows]])
        b = np.array([snap(spec, float(v)) for v in other.values(spec.name)[rows]])
        got = agreement_numbers(a, b, base.verdicts(spec.name)[rows], other.verdicts(spec.name)[rows],
                                [c.value for c in scale(spec)] if ordinal(spec) else None, seed=seed)
        gap = np.abs(base.values(spec.name)[rows] - other.values(spec.name)[rows])
        worst = rows[np.argsort(-gap, kind="stable")][:top]
        got.update(rows=len(rows), agree=float((a == b).mean()), disagree_most=[
            {"row": int(i), "baseline": float(base.values(spec.name)[i]), "other": float(other.values(spec.name)[i])}
            for i in worst if base.values(spec.name)[i] != other.values(spec.name)[i]])
        out[spec.name] = got
    return out
