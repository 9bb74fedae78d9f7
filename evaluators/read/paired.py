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
from evaluators.core.registry import spec_fingerprint
from evaluators.core.scales import ordinal, reports_defects, reviewable, scale, snap
from evaluators.core.inference import mcnemar_exact, paired_difference
from evaluators.read.compare import passes_at
from evaluators.read.results import RunResults
from evaluators.run.spec import RunSpec, resolve_templates


def p_text(p: float | None) -> str:
    """A p-value as people read it: "p = 0.0156", "p < 0.001" (never "p = 0": a p-value is never zero)."""
    if p is None:
        return "p = 1"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def _spec(res: RunResults, name: str):
    return next(s for s in res.specs if s.name == name)


def _defect(spec) -> bool:
    return reports_defects(spec)


def _passing(base: RunResults, other: RunResults, spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows both runs scored, 1.0 where the baseline's row counts in the measure, the same for the other run):
    a pass for a score, a defect for a severity or a label (the rate each kind reports)."""
    rows = _pairs(base, other, spec.name)
    counted = 0 if _defect(spec) else 1
    return (rows, (base.verdicts(spec.name)[rows] == counted).astype(float),
            (other.verdicts(spec.name)[rows] == counted).astype(float))


def rate_change(base: RunResults, other: RunResults, name: str) -> tuple[float, float] | None:
    """How ``other``'s rate of metric ``name`` differs from ``base``'s on the rows both scored, and McNemar's
    exact p-value: (difference, p), None when no row is scored in both. No bootstrap: the trend over runs
    needs only these, for every pair of runs at once."""
    rows, b, o = _passing(base, other, _spec(base, name))
    if not len(rows):
        return None
    return float((o - b).mean()), mcnemar_exact(int(((b == 1) & (o == 0)).sum()), int(((b == 0) & (o == 1)).sum()))


def _pairs(base: RunResults, other: RunResults, name: str) -> np.ndarray:
    """Row indices both runs scored on metric ``name``."""
    n = min(len(base), len(other))
    vb, vo = base.verdicts(name)[:n], other.verdicts(name)[:n]
    return np.flatnonzero((vb >= 0) & (vo >= 0))


def paired_differences(base: RunResults, other: RunResults, label: str = "the candidate",
                       base_label: str = "the baseline") -> list[dict[str, Any]]:
    """Per metric both runs have: the change in its pass (or defect) rate and in its mean score, each with a
    95% interval, a p-value, the rows needed to see a change that size (80% power) and a sentence (naming the
    two runs ``label`` and ``base_label``)."""
    names = {s.name for s in other.specs}
    out = []
    for spec in base.specs:
        if spec.name not in names:
            continue
        rows, b, o = _passing(base, other, spec)
        if not len(rows):
            out.append({"metric": spec.name, "rows": 0, "sentence": f"{spec.name}: no row scored in both runs"})
            continue
        defect = _defect(spec)
        rate = paired_difference(b, o, binary=True, rounds=rounds_for(len(rows), 2e7, 2000))
        rules = (passes_at(spec, base.thresholds[spec.name]), passes_at(spec, other.thresholds[spec.name]))
        rec: dict[str, Any] = {"metric": spec.name, "rows": len(rows), "measure": "defect rate" if defect else "pass rate",
                               "rate": rate, "passes_at": rules}
        if spec.kind in ("score", "wb_score") or (spec.kind != "label" and not defect):
            rec["mean"] = paired_difference(base.values(spec.name)[rows], other.values(spec.name)[rows], binary=False,
                                            rounds=rounds_for(len(rows), 2e7, 2000))
        rec["sentence"] = sentence(spec.name, rec["measure"], rate, label, rules, base=base_label)
        out.append(rec)
    return out


def sentence(metric: str, measure: str, d, label: str, rules: tuple[str, str] = ("", ""), base: str = "the baseline",
             unit: str = "paired rows") -> str:
    """"the candidate's pass rate (≥ 3) on coherence is 3.2 points lower than the baseline's [-5.3, -1.1] on
    200 rows; unlikely to be chance (p = 0.004)" or "...; could be chance (p = 0.31): a change this size needs
    about 1,240 rows to be seen 4 times in 5". ``rules``: the baseline's and the run's threshold
    (:func:`~evaluators.read.compare.passes_at`); when they differ, the sentence says the change is theirs too.
    ``base`` and ``unit``: what the baseline and the rows are called (the Monitoring page's periods: "last week",
    "judged traces")."""
    if d is None:
        return f"{metric}: nothing to compare"
    pts = 100 * d.diff
    where = "higher" if pts > 0 else "lower"
    base_rule, rule = rules
    mine, theirs = (f" ({rule})" if rule else ""), (f" ({base_rule})" if base_rule != rule else "")
    text = (f"{label}'s {measure}{mine} on {metric} is {abs(pts):.1f} points {where} than {base}'s{theirs} "
            if pts else f"{label}'s {measure}{mine} on {metric} is the same as {base}'s{theirs} ")
    if d.low is not None:
        text += f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}] "
    text += f"on {d.rows:,} {unit}; "
    if base_rule != rule:  # not a change in the answers: the same answers can pass one threshold and fail another
        return text + "the thresholds differ, so this compares the thresholds as much as the runs"
    if d.p_value is not None and d.p_value < 0.05:
        return text + f"unlikely to be chance ({d.test}, {p_text(d.p_value)})"
    need = f": a change this size needs about {d.rows_needed:,} {unit} to be seen 4 times in 5" if d.rows_needed else ""
    return text + f"could be chance ({d.test}, {p_text(d.p_value)}){need}"


def _judge(run_spec: dict[str, Any], name: str) -> dict[str, Any] | None:
    """What decides metric ``name``'s judge answers in a run (its stored spec): the judge's model and settings,
    the template (its hash), a jury's judges, repeats, the metric's options and recorded definition; None for a
    metric no judge answers. The run fingerprint's parts (``RunSpec.fingerprint``), for one metric."""
    rs = RunSpec.from_dict(run_spec)
    spec = rs.metric(name).with_params(rs.options.get(name))
    if not spec.is_judge:
        return None
    judge = rs.judge.identity() if rs.judge else {}
    return {"model": judge.get("model"), "judge settings": {k: v for k, v in judge.items() if k != "model"},
            "template": sorted(t.sha for t in resolve_templates(spec, rs.templates, rs.template_texts).values()),
            "jury": [j.identity() for j in rs.jury], "repeats": rs.repeat, "options": rs.options.get(name),
            "definition": spec_fingerprint(rs.definitions[name]) if name in rs.definitions else None}


def judge_changes(base_spec: dict[str, Any], other_spec: dict[str, Any], name: str) -> list[str]:
    """What differs between two runs' judging of metric ``name`` (their stored specs): some of "model",
    "judge settings", "template", "jury", "repeats", "options", "definition"; empty when the same judge answered
    both (its answers may even come from the cache) or the metric is not judged, so that two runs' judge
    agreement is only shown where there are two judges to agree."""
    a, b = _judge(base_spec, name), _judge(other_spec, name)
    if a is None or b is None:
        return []
    return [k for k in a if a[k] != b[k]]


def judges_agreement(base: RunResults, other: RunResults, top: int = 10, seed: int = 0,
                     only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per judged metric both runs have (``only`` these: those whose judges differ, :func:`judge_changes`):
    Cohen's kappa on pass/fail and quadratically weighted kappa on the scale, Spearman's rho, each with a 95%
    bootstrap interval, the confusion matrix (the baseline's verdicts by rows), and the rows where they
    differ most."""
    names = {s.name for s in other.specs} & (set(only) if only is not None else {s.name for s in base.specs})
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
