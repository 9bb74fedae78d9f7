"""Coherence: do the response's sentences fit together into a logical whole? (1-5)

The judge reads the query and the response, as azure-ai-evaluation 1.18's CoherenceEvaluator does
(per turn for conversations: that turn's user message and reply, no earlier turns).
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "coherence", "How well the response's ideas connect and read as one logical whole.",
    fields=("query", "response"), conversation_fields=(),
    templates=JudgeTemplates(single="coherence.md", turn="coherence.md"),
)
