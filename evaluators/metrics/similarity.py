"""Similarity: does the response say what the ground truth says? (1-5)

The judge reads the query, the response and the ground truth, as azure-ai-evaluation 1.18's
SimilarityEvaluator does (for conversations: each turn that carries a ground truth).
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "similarity", "Semantic equivalence of the response and the ground-truth answer.",
    fields=("query", "response", "ground_truth"), conversation_fields=("ground_truth",),
    templates=JudgeTemplates(single="similarity.md", turn="similarity.md"),
)
