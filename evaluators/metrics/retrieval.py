"""Retrieval: how useful are the retrieved documents for the user's question? (1-5)"""
from ..registry import JudgeTemplates
from ._judge import quality_metric

SPEC = quality_metric(
    "retrieval", "How relevant the retrieved documents are to the user's question, in conversation.",
    fields=("messages",), conversation_fields=("context",),
    templates=JudgeTemplates(turn="retrieval.md"),
)
