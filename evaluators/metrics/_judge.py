"""The shared declaration of a 1-5 LLM-judge quality metric (one call per row or turn)."""
from __future__ import annotations

from evaluators.core.registry import JudgeTemplates, MetricSpec, register

VERSION = "1"


def quality_metric(name: str, description: str, fields: tuple[str, ...],
                   conversation_fields: tuple[str, ...] | None, templates: JudgeTemplates) -> MetricSpec:
    """Register a 1-5 judge metric: integer scores, higher is better, pass at 3 by default."""
    return register(MetricSpec(
        name=name, family="quality", kind="score", fields=fields,
        conversation_fields=conversation_fields, prefix=name, outputs=(name,),
        score_range=(1.0, 5.0), higher_is_better=True, default_threshold=3.0,
        integer=True, description=description, templates=templates, version=VERSION,
    ))
