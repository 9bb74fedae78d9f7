"""The shared declaration of a reference metric: response vs ground truth, 0-1, pass at 0.5."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from evaluators.core.registry import MetricSpec, register


def reference_metric(name: str, prefix: str, outputs: tuple[str, ...], description: str,
                     compute: Callable[[Mapping[str, Any]], dict[str, float]],
                     params: tuple[tuple[str, Any], ...]) -> MetricSpec:
    """Register an in-process metric comparing the response with the ground truth (single-turn rows)."""
    return register(MetricSpec(
        name=name, family="classic", kind="score", fields=("response", "ground_truth"), conversation_fields=None,
        prefix=prefix, outputs=outputs, score_range=(0.0, 1.0), higher_is_better=True, default_threshold=0.5,
        description=description, compute=compute, params=params,
    ))
