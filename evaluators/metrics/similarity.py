"""Similarity: does the response say what the ground truth says? (1-5)"""
from ..registry import JudgeTemplates
from ._judge import quality_metric

SPEC = quality_metric(
    "similarity", "Semantic equivalence of the response and the ground-truth answer.",
    fields=("query", "response", "ground_truth"), conversation_fields=None,
    templates=JudgeTemplates(single="similarity.md"),
)
