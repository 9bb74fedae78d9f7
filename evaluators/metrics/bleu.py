"""Sentence BLEU (1- to 4-grams, uniform weights) with Chen & Cherry smoothing method 4.

Equal to ``nltk.translate.bleu_score.sentence_bleu([ref], hyp,
smoothing_function=SmoothingFunction().method4)`` — the call the Azure AI
Evaluation SDK makes — but with plain integer counting instead of Fractions.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from evaluators.metrics._classic import reference_metric
from evaluators.metrics._ngrams import MAX_N, clipped_matches, pair_matches
from evaluators.metrics._text import lost_words_note

# SmoothingFunction's default k (Chen & Cherry 2014), used by method 4.
K = 5


def ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    """Counts of the n-grams of ``tokens`` (empty when shorter than n)."""
    return Counter(zip(*(tokens[i:] for i in range(n))))


def sentence_bleu(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """BLEU-4 of one hypothesis against one reference, smoothing method 4."""
    return bleu_from_matches(clipped_matches(reference, hypothesis), len(hypothesis), len(reference))


def bleu_from_matches(matches: Sequence[int], hyp_len: int, ref_len: int) -> float:
    """BLEU-4 from the clipped n-gram matches (n = 1..4) and the two lengths, smoothing method 4."""
    if not matches[0]:
        return 0.0
    precisions = [(m, max(1, hyp_len - n + 1)) for n, m in enumerate(matches, 1)]
    if hyp_len > ref_len:
        bp = 1.0
    else:
        bp = math.exp(1 - ref_len / hyp_len)
    logs = []
    smooth_step = 1
    for matched, total in precisions:
        if matched == 0 and hyp_len > 1:
            # method4: a zero count becomes 1 / (2^i * k / ln(len(hyp))) over the total.
            p = (1 / (2**smooth_step * K / math.log(hyp_len))) / total
            smooth_step += 1
        else:
            p = matched / total
        if p > 0:
            logs.append(0.25 * math.log(p))
    return bp * math.exp(math.fsum(logs))


def _compute(name: str, tok: str):
    def compute(row):
        out = {"bleu_score": bleu_from_matches(*pair_matches(row["ground_truth"], row["response"], tok))}
        out.update(lost_words_note(row, tok, rouge=False, option="bleu_unicode"))
        return out
    return compute


for _name, _tok, _about in (("bleu", "sdk", "the Azure AI Evaluation SDK's tokens"),
                            ("bleu_unicode", "unicode", "Unicode word tokens, for text that is not English")):
    reference_metric(
        _name, "bleu", ("bleu_score",),
        f"n-gram precision (1-4) against the ground truth, with a brevity penalty ({_about}).",
        _compute(_name, _tok), params=(("n", MAX_N), ("smooth", "method4"), ("tok", _tok)),
    )
