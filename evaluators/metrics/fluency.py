"""Fluency: is each sentence of the response well formed and grammatical? (1-5)

The judge reads the response alone, as azure-ai-evaluation 1.18's FluencyEvaluator does.
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "fluency", "Grammar, word choice and sentence construction of the response.",
    fields=("response",), conversation_fields=(),
    templates=JudgeTemplates(single="fluency.md", turn="fluency.md"),
)
