"""What a reviewer can answer for a metric, in the metric's own terms, and the key that gives each answer.

A 1-5 score is answered 1-5, a 0-7 severity 0-7, a WildBench score 1-10 (0 for 10), a label yes/no (1/0),
a pairwise verdict A++ ... B++ (1-5). Only judged metrics are reviewed: a classic metric (F1, BLEU...) is a
formula over the text, with nothing for a person to overrule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluators.core.kinds.severity import level_name
from evaluators.core.registry import MetricSpec
from evaluators.core.wb_rules import LABEL_REWARD


@dataclass(frozen=True)
class Choice:
    value: float  # stored, on the metric's scale (a label: 1 = found, 0 = not found)
    name: str  # what the reviewer reads
    key: str  # the keyboard key that gives it


def reports_defects(spec: MetricSpec) -> bool:
    """Whether a metric's headline rate is a defect rate (its kind reports one: severities and labels, the risk and
    safety metrics and a user's yes/no metrics alike), else a pass rate. One rule for every page, the CLI and the
    monitor's series."""
    return spec.kind in ("severity", "label")


def reviewable(spec: MetricSpec) -> bool:
    return spec.is_judge


def scale(spec: MetricSpec) -> list[Choice]:
    """The answers a reviewer can give for ``spec``, in the scale's order (lowest value first)."""
    if spec.kind == "label":
        return [Choice(0.0, f"no {spec.name.replace('_', ' ')}", "0"), Choice(1.0, f"{spec.name.replace('_', ' ')}", "1")]
    if spec.kind == "pairwise":
        return [Choice(float(v), name, str(5 - i)) for i, (name, v) in enumerate(
            sorted(LABEL_REWARD.items(), key=lambda kv: kv[1]))]
    low, high = int(spec.score_range[0]), int(spec.score_range[1])
    out = []
    for v in range(low, high + 1):
        name = f"{v} {level_name(spec, v)}" if spec.kind == "severity" else str(v)
        out.append(Choice(float(v), name, str(v % 10)))
    return out


def ordinal(spec: MetricSpec) -> bool:
    """Whether the answers are ordered (weighted kappa and Spearman's rho apply): all but labels."""
    return spec.kind != "label"


def snap(spec: MetricSpec, value: float) -> float:
    """The scale's value nearest ``value`` (a conversation's averaged score, 3.5, is compared as 3 or 4:
    ties go to the lower value)."""
    return min((c.value for c in scale(spec)), key=lambda v: (abs(v - value), v))


def choice_name(spec: MetricSpec, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for c in scale(spec):
        if c.value == value:
            return c.name
    return f"{value:g}"


def consensus(spec: MetricSpec, values: list[float]) -> float:
    """Several reviewers' answers on one row as one: their median, snapped to the scale."""
    return snap(spec, float(np.median(values)))


def human_pass(spec: MetricSpec, value: float, threshold: float) -> bool:
    """Whether a reviewer's answer passes, by the same rule as the judge's value."""
    return bool(spec.kind_impl.turn_passed(spec, value, threshold))


def parse_value(spec: MetricSpec, raw: Any) -> float:
    """A verdict as a file gives it (``4``, ``"4"``, ``true`` for a label, ``"A+"``; ``"High"`` is refused: give
    the number, as is ``true`` for a score) -> its value on the scale.

    Raises:
        ValueError: naming the values the scale has.
    """
    values = [c.value for c in scale(spec)]
    if spec.kind == "label":
        text = str(raw).strip().lower()
        if isinstance(raw, bool) or text in ("true", "false", "1", "0", "yes", "no", "1.0", "0.0"):
            return 1.0 if (raw is True or text in ("true", "1", "yes", "1.0")) else 0.0
        raise ValueError(f"{raw!r} is not true or false")
    if isinstance(raw, bool):  # JSON's true is not the number 1 of a score's scale
        raise ValueError(f"true/false is not a value of {spec.name}'s scale "
                         f"({', '.join(c.name for c in scale(spec))}); give the number")
    if spec.kind == "pairwise" and isinstance(raw, str) and raw.strip().upper() in LABEL_REWARD:
        return float(LABEL_REWARD[raw.strip().upper()])
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not one of {', '.join(c.name for c in scale(spec))}") from None
    if v not in values:
        raise ValueError(f"{raw!r} is not on {spec.name}'s scale ({', '.join(f'{x:g}' for x in values)})")
    return v
