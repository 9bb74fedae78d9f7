"""Relevance: does the response address what was asked? (1-5)

Single-turn rows use the query/context rubric; conversation turns use the rubric
that builds a reference answer from the documents, or the one that compares with
the turn's ground truth when the turn carries one.
"""
from ..registry import JudgeTemplates
from ._judge import quality_metric

SPEC = quality_metric(
    "relevance", "How completely and directly the response addresses the query.",
    fields=("query", "response", "context"), conversation_fields=(),
    templates=JudgeTemplates(single="relevance.md", turn="relevance_turn.md",
                             turn_ground_truth="relevance_turn_ground_truth.md"),
)
