"""F1 over words shared by the response and the ground truth (SQuAD-style)."""
from __future__ import annotations

from collections import Counter

from evaluators.metrics._classic import reference_metric
from evaluators.metrics._text import squad_normalize


def f1(response: str, ground_truth: str) -> float:
    """Token F1 after SQuAD normalisation; 0.0 when nothing is shared."""
    pred, gold = squad_normalize(response), squad_normalize(ground_truth)
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


reference_metric(
    "f1_score", "f1_score", ("f1_score",),
    "Share of words in common with the ground truth (precision/recall harmonic mean).",
    lambda row: {"f1_score": f1(row["response"], row["ground_truth"])},
    params=(("norm", "squad"),),
)
