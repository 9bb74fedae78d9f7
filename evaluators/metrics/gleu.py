"""Sentence Google-BLEU: min(precision, recall) over all 1- to 4-grams.

Equal to ``nltk.translate.gleu_score.sentence_gleu([ref], hyp)``.
"""
from __future__ import annotations

from collections import Counter

from ._classic import reference_metric
from ._text import lost_words_note, word_tokenize

MIN_N, MAX_N = 1, 4


def _all_ngrams(tokens: list[str]) -> Counter:
    counts: Counter = Counter()
    for n in range(MIN_N, min(MAX_N, len(tokens)) + 1):
        counts.update(zip(*(tokens[i:] for i in range(n))))
    return counts


def sentence_gleu(reference: list[str], hypothesis: list[str]) -> float:
    """GLEU of one hypothesis against one reference; 0.0 when both are empty."""
    hyp, ref = _all_ngrams(hypothesis), _all_ngrams(reference)
    total = max(sum(hyp.values()), sum(ref.values()))
    if total == 0:
        return 0.0
    shared = sum(min(hyp[g], ref[g]) for g in hyp.keys() & ref.keys())
    return shared / total


def _compute(tok: str):
    def compute(row):
        out = {"gleu_score": sentence_gleu(word_tokenize(row["ground_truth"], tok), word_tokenize(row["response"], tok))}
        out.update(lost_words_note(row, tok, rouge=False, option="gleu_unicode"))
        return out
    return compute


for _name, _tok, _about in (("gleu", "sdk", "the Azure AI Evaluation SDK's tokens"),
                            ("gleu_unicode", "unicode", "Unicode word tokens, for text that is not English")):
    reference_metric(
        _name, "gleu", ("gleu_score",),
        f"Google-BLEU: the lower of n-gram precision and recall (1-4 grams; {_about}).",
        _compute(_tok), params=(("n", f"{MIN_N}-{MAX_N}"), ("tok", _tok)),
    )
