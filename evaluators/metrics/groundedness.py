"""Groundedness: is every claim of the response supported by the given context? (1-5)

The judge reads the context, the response and, when the row has one, the query, as
azure-ai-evaluation 1.18's GroundednessEvaluator does (its prompt with or without the query).
"""
from ..registry import JudgeTemplates
from ._judge import quality_metric

SPEC = quality_metric(
    "groundedness", "Whether the response's claims follow from the supplied context or retrieved documents.",
    fields=("response", "context"), conversation_fields=("context",),
    templates=JudgeTemplates(single="groundedness.md", turn="groundedness.md"),
)
