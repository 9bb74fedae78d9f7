"""Readable names of the built-in metrics: what the dashboard calls a metric where a person reads it (a chart's
title, a card's explanation), beside the key it is stored and exported under (``f1_score``, ``hate_unfairness``).
What each measures in one line is the metric's own ``MetricSpec.description``, declared with it: one line, one
place. A user's metric is called by its own name. Pure data: the engine's layers and the dashboard read it alike.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec

NAMES: dict[str, str] = {
    # judged quality
    "coherence": "Coherence", "fluency": "Fluency", "groundedness": "Groundedness", "relevance": "Relevance",
    "retrieval": "Retrieval quality", "similarity": "Similarity to the expected answer",
    "response_completeness": "Response completeness",
    # WildBench
    "wildbench_score": "WildBench score", "wildbench_pairwise": "WildBench pairwise reward",
    # agents
    "intent_resolution": "Intent resolution", "task_adherence": "Task adherence", "task_completion": "Task completion",
    "tool_call_accuracy": "Tool call accuracy", "tool_selection": "Tool selection",
    "tool_input_accuracy": "Tool input accuracy", "tool_call_success": "Tool call success",
    "tool_output_utilization": "Use of tool results", "task_navigation_efficiency": "Tool path efficiency",
    "document_retrieval": "Document ranking",
    # risk and safety
    "hate_unfairness": "Hate and unfairness", "sexual": "Sexual content", "violence": "Violence",
    "self_harm": "Self-harm", "protected_material": "Protected material", "indirect_attack": "Indirect attack (XPIA)",
    # computed against the expected answer
    "f1_score": "F1 word overlap", "bleu": "BLEU", "bleu_unicode": "BLEU (any script)", "gleu": "GLEU",
    "gleu_unicode": "GLEU (any script)", "meteor": "METEOR", "meteor_unicode": "METEOR (any script)",
    "rouge": "ROUGE-L", "rougeL": "ROUGE-L", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rouge3": "ROUGE-3",
    "rouge4": "ROUGE-4", "rouge5": "ROUGE-5", "rouge_unicode": "ROUGE-L (any script)",
}


def display_name(spec: "MetricSpec") -> str:
    """A built-in metric's readable name ("F1 word overlap" for ``f1_score``); a user's metric's own name."""
    return NAMES.get(spec.name, spec.name) if spec.definition is None else spec.name


def name_of(key: str) -> str:
    """The readable name of a metric's key where only the key is at hand (a picker's option, a table's column):
    a built-in's name, else the key itself (a user's metric is called by its own name, which is its key)."""
    return NAMES.get(key, key)


def about(spec: "MetricSpec") -> str:
    """The metric's name and, when it differs, its key, then what it measures: one line for a tooltip."""
    name = display_name(spec)
    head = name if name == spec.name else f"{name} ({spec.name})"
    return f"{head}: {spec.description}" if spec.description else head
