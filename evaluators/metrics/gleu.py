"""Sentence Google-BLEU: min(precision, recall) over all 1- to 4-grams.

Equal to ``nltk.translate.gleu_score.sentence_gleu([ref], hyp)``.
"""
from __future__ import annotations

from evaluators.metrics._classic import reference_metric
from evaluators.metrics._ngrams import clipped_matches, pair_matches
from evaluators.metrics._text import lost_words_note

MIN_N, MAX_N = 1, 4


def sentence_gleu(reference: list[str], hypothesis: list[str]) -> float:
    """GLEU of one hypothesis against one reference; 0.0 when both are empty."""
    return gleu_from_matches(clipped_matches(reference, hypothesis), len(hypothesis), len(reference))


def _ngram_total(length: int) -> int:
    """How many 1- to 4-grams a text of ``length`` tokens has."""
    return sum(length - n + 1 for n in range(MIN_N, min(MAX_N, length) + 1))


def gleu_from_matches(matches, hyp_len: int, ref_len: int) -> float:
    """GLEU from the clipped n-gram matches (n = 1..4): shared n-grams over the larger side's n-gram count."""
    total = max(_ngram_total(hyp_len), _ngram_total(ref_len))
    return sum(matches) / total if total else 0.0


def _compute(tok: str):
    def compute(row):
        out = {"gleu_score": gleu_from_matches(*pair_matches(row["ground_truth"], row["response"], tok))}
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
