"""ROUGE-N (1-5) and ROUGE-L: precision, recall and F1 against the ground truth.

Equal to Google's ``rouge-score`` (``RougeScorer([type]).score(ground_truth, response)``,
no stemmer), which the Azure AI Evaluation SDK vendors unchanged; ``rouge_unicode`` keeps
words of any script instead. LCS uses a bit-parallel algorithm (Hyyrö 2004): one
big-integer step per response token instead of a full dynamic-programming table.
"""
from __future__ import annotations

from collections import Counter

from evaluators.metrics._classic import reference_metric
from evaluators.metrics._text import lost_words_note, rouge_tokenize

OUTPUTS = ("rouge_f1_score", "rouge_precision", "rouge_recall")


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    if len(a) < len(b):
        a, b = b, a  # the bit vector runs over the longer list; fewer Python steps
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        m = masks.get(tok)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _prf(overlap: int, pred_total: int, target_total: int) -> dict[str, float]:
    precision = overlap / pred_total if pred_total else 0.0
    recall = overlap / target_total if target_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"rouge_precision": precision, "rouge_recall": recall, "rouge_f1_score": f1}


def rouge_l(target: list[str], prediction: list[str]) -> dict[str, float]:
    if not target or not prediction:
        return _prf(0, 0, 0)
    return _prf(lcs_length(target, prediction), len(prediction), len(target))


def rouge_n(target: list[str], prediction: list[str], n: int) -> dict[str, float]:
    t = Counter(zip(*(target[i:] for i in range(n))))
    p = Counter(zip(*(prediction[i:] for i in range(n))))
    overlap = sum(min(c, p[g]) for g, c in t.items() if g in p)
    # rouge-score divides by max(count, 1); with overlap 0 the result is the same.
    return _prf(overlap, sum(p.values()), sum(t.values()))


def _make(name: str, variant: str, description: str, tok: str = "sdk") -> None:
    if variant == "L":
        score = rouge_l
    else:
        n = int(variant)
        score = lambda t, p: rouge_n(t, p, n)  # noqa: E731

    def compute(row):
        out = score(rouge_tokenize(row["ground_truth"], tok), rouge_tokenize(row["response"], tok))
        out.update(lost_words_note(row, tok, rouge=True, option="rouge_unicode"))
        return out

    reference_metric(name, "rouge", OUTPUTS, description, compute,
                     params=(("type", f"rouge{variant}"), ("stem", False), ("tok", tok)))


_make("rouge", "L", "ROUGE-L: longest common subsequence with the ground truth (precision, recall, F1).")
_make("rougeL", "L", "ROUGE-L (same as 'rouge').")
for _n in range(1, 6):
    _make(f"rouge{_n}", str(_n), f"ROUGE-{_n}: {_n}-gram overlap with the ground truth (precision, recall, F1).")
_make("rouge_unicode", "L", "ROUGE-L on Unicode words (letters and digits of any script), for text that is not English.",
      tok="unicode")
