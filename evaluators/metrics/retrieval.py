"""Retrieval: how useful are the retrieved documents for the user's question? (1-5)

The judge reads the query and the context, as azure-ai-evaluation 1.18's RetrievalEvaluator
does: single-turn rows with query and context, or each turn of a conversation with that turn's
documents.
"""
from evaluators.core.registry import JudgeTemplates
from evaluators.metrics._judge import quality_metric

SPEC = quality_metric(
    "retrieval", "How relevant the retrieved documents are to the user's question.",
    fields=("query", "context"), conversation_fields=("context",),
    templates=JudgeTemplates(single="retrieval.md", turn="retrieval.md"),
)
