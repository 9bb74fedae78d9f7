"""Groundedness: is every claim of the response supported by the given context? (1-5)

The judge reads the context and the response. That is what azure-ai-evaluation 1.18's
``evaluate()`` sends: its GroundednessEvaluator has a second prompt that also reads the query, but
``evaluate()`` calls the evaluator past the code that loads it, so rows are judged without the
query even when they have one (seen in ``bench/azure_sdk_keys.py``).
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "groundedness", "Whether the response's claims follow from the supplied context or retrieved documents.",
    fields=("response", "context"), conversation_fields=("context",),
    templates=JudgeTemplates(single="groundedness.md", turn="groundedness.md"),
)
