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


# For each Treebank rule (keyed by its pattern): characters of which a match must
# contain at least one, checked against the text as it stands when the rule runs.
# Skipping a rule that cannot match changes nothing; most rules cannot match most
# text. A pattern not listed here (a future NLTK rule) always runs.
_NEEDS = {
    "([«“‘„]|[`]+)": "«“‘„`", '^\\"': '"', "(``)": "`", "([ \\(\\[{<])(\\\"|\\'{2})": "\"'",
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": "'",
    "([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$": ".", "([:,])([^\\d])": ":,", "([:,])$": ":,",
    "\\.{2,}": ".", "[;@#$%&]": ";@#$%&", "[\\u2012-\\u2015]": "\u2012\u2013\u2014\u2015",
    "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$": ".", "[?!]": "?!", "([^'])' ": "'", "[*]": "*",
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": "[](){}<>", "--": "-", "([»”’])": "»”’", "''": "'", '"': '"',
    "([^' ])('[sS]|'[mM]|'[dD]|') ": "'", "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": "'",
}
# A contraction rule such as (?i)\\b(gon)(?#X)(na)\\b matches only where its letters
# ("gonna") stand together; one search for all of them decides whether any can.
_CONTRACTION_PARTS = re.compile(r"\(\?i\)|\\b|\(\?#X\)|\(\?=\\s\)|[()]")


@lru_cache(maxsize=1)
def _treebank_rules():
    """NLTK's own Treebank rules, recompiled on the standard ``re`` engine, with guards.

    NLTK 3.10 wraps these patterns in a time-limited matcher that makes one short
    text cost ~0.3 ms; the rules are unchanged here, only the engine differs, and a
    test checks our tokens equal ``NLTKWordTokenizer().tokenize``.
    """
    from nltk.tokenize.destructive import NLTKWordTokenizer as T  # lazy: classic metrics only

    def plain(rules):
        return [(re.compile(rx.pattern, rx.flags), sub, _NEEDS.get(rx.pattern)) for rx, sub in rules]

    contractions = [re.compile(rx.pattern, rx.flags) for rx in T.CONTRACTIONS2 + T.CONTRACTIONS3]
    literals = [_CONTRACTION_PARTS.sub("", rx.pattern) for rx in contractions]
    if all(re.fullmatch(r"[\w' ]+", lit) for lit in literals):
        guard = re.compile("|".join(re.escape(lit) for lit in literals), re.I)
    else:  # a rule we cannot read as a literal: no shortcut
        guard = re.compile("")
    return (plain(T.STARTING_QUOTES) + plain(T.PUNCTUATION) + plain([T.PARENS_BRACKETS]) + plain([T.DOUBLE_DASHES]),
            plain(T.ENDING_QUOTES), guard, contractions)


def treebank_tokenize(sentence: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(sentence)``: the same rules in the same order."""
    before, ending, guard, contractions = _treebank_rules()
    text = sentence
    for rx, sub, needs in before:
        if needs is None or any(c in text for c in needs):
            text = rx.sub(sub, text)
    text = " " + text + " "
    for rx, sub, needs in ending:
        if needs is None or any(c in text for c in needs):
            text = rx.sub(sub, text)
    if guard.search(text):
        for rx in contractions:
            text = rx.sub(r" \1 \2 ", text)
    return text.split()


def tokenize_words(text: str) -> list[str]:
    """Treebank word tokens, sentence by sentence (uncached)."""
    out: list[str] = []
    for sentence in _SENT_END.split(text.strip()):
        if sentence:
            out.extend(treebank_tokenize(sentence))
    return out


@lru_cache(maxsize=65_536)
def _cached_words(text: str) -> tuple[str, ...]:
    return tuple(tokenize_words(text))


def word_tokenize(text: str) -> list[str]:
    """Treebank word tokens (cached: BLEU, GLEU and METEOR on one row tokenize each text once).

    Args:
        text: any text.
    Returns:
        The tokens BLEU, GLEU and METEOR compare.
    """
    return list(_cached_words(text))


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
