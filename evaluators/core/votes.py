"""Several judgments of one task (a judge asked K times, or several judges) made into one verdict.

A score's judgments are averaged; a severity's or a pairwise verdict's take the median (the lower of the two
middle ones on an even count, so the value stays on the scale); a label's take the majority, a tie counting
as found (the cautious reading of a split on a defect). The verdict kept with the row (reason, other outputs)
is the first judgment nearest the combined value; every judgment's primary value is kept as ``votes``.
"""
from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec

VOTES = "votes"  # outputs key: each judgment's primary value, in order
JURORS = "jurors"  # outputs key: which judge gave each of them (a jury)


def combined_value(spec: "MetricSpec", values: list[float], jury: bool = False) -> float:
    """The row's value from its judgments' values, by the metric's kind (a jury takes the median of scores)."""
    if not values:
        raise ValueError("no judgment to combine")
    if spec.kind == "label":
        found = sum(1 for v in values if v)
        return 1.0 if 2 * found >= len(values) else 0.0
    if spec.kind in ("severity", "pairwise") or jury:
        return float(statistics.median_low(values))
    return float(statistics.fmean(values))


def combine(spec: "MetricSpec", outputs: list[dict[str, Any]], reasons: list[str | None],
            jurors: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """(outputs, reason) of the combined verdict of several judgments' ``outputs`` and ``reasons``."""
    values = [float(o[spec.primary]) for o in outputs]
    value = combined_value(spec, values, jury=jurors is not None)
    near = min(range(len(values)), key=lambda k: (abs(values[k] - value), k))
    out = dict(outputs[near])
    if spec.kind == "label":  # each category by its own majority, as the primary
        for key in spec.outputs:
            out[key] = bool(combined_value(spec, [float(bool(o.get(key))) for o in outputs]))
    out[spec.primary] = out[spec.primary] if spec.kind == "label" else value
    out[VOTES] = values
    if jurors is not None:
        out[JURORS] = list(jurors)
    who = f" (judge {jurors[near]})" if jurors else ""
    shown = ", ".join(f"{v:g}" for v in values)
    reason = f"{len(values)} judgments ({shown}); judgment {near + 1}{who}: {reasons[near] or ''}".rstrip(": ")
    return out, reason
