"""Tokenizers and normalisers shared by the classic metrics.

Kept apart from the metrics so each tokenizer is written (and tested) once.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache

# Sentence boundaries for word tokenization: a ., ! or ? followed by space and
# something that starts a sentence. NLTK's word_tokenize splits sentences with the
# Punkt model first (a data download we cannot make at run time); this rule stands
# in for it so that a sentence-final period is split off, as Punkt + Treebank do.
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


@lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer  # lazy: nltk is only needed for classic metrics

    return NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """Treebank word tokens (NLTK's tokenizer, sentence by sentence).

    Args:
        text: any text.
    Returns:
        The tokens BLEU, GLEU and METEOR compare.
    """
    tok = _treebank().tokenize
    out: list[str] = []
    for sentence in _SENT_END.split(text.strip()):
        if sentence:
            out.extend(tok(sentence))
    return out


# ROUGE's reference tokenizer keeps [a-z0-9] runs and drops everything else, so
# text in other scripts vanishes and identical non-English strings score 0. Ours
# keeps Unicode letters and digits; on ASCII text it gives the very same tokens.
_ROUGE_SPLIT = re.compile(r"[\W_]+")


def rouge_tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric runs (Unicode-aware), as rouge-score splits them."""
    return [t for t in _ROUGE_SPLIT.split(text.lower()) if t]


_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> list[str]:
    """SQuAD answer normalisation: lower case, drop punctuation and articles, split on space."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()
