"""Relevance: does the response address what was asked? (1-5)

The judge reads the query and the response, as azure-ai-evaluation 1.18's RelevanceEvaluator
does (per turn for conversations). The older conversation rubrics of the Azure documentation,
which also read the earlier turns and the retrieved documents or the turn's ground truth, stay
available as templates: ``--template relevance=builtin:relevance_turn.md`` or
``builtin:relevance_turn_ground_truth.md``.
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "relevance", "How completely and directly the response addresses the query.",
    fields=("query", "response"), conversation_fields=(),
    templates=JudgeTemplates(single="relevance.md", turn="relevance.md"),
)
