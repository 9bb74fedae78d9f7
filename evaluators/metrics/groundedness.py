"""Groundedness: is every claim of the response supported by the given context? (1-5)"""
from ..registry import JudgeTemplates
from ._judge import quality_metric

SPEC = quality_metric(
    "groundedness", "Whether the response's claims follow from the supplied context or retrieved documents.",
    fields=("query", "response", "context"), conversation_fields=("context",),
    templates=JudgeTemplates(single="groundedness.md", turn="groundedness.md"),
)
