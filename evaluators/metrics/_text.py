"""Tokenizers and normalisers shared by the classic metrics.

Kept apart from the metrics so each tokenizer is written (and tested) once.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache

from evaluators.metrics._nist import international_tokenize
from evaluators.metrics._nltk import import_nltk
from evaluators.metrics._punkt import sent_tokenize

# For each Treebank rule (keyed by its pattern): characters (or, in a tuple, substrings) of which
# a match must contain at least one, checked against the text as it stands when the rule runs.
# Skipping a rule that cannot match changes nothing; most rules cannot match most
# text. A pattern not listed here (a future NLTK rule) always runs.
_NEEDS = {
    "([«“‘„]|[`]+)": "«“‘„`", '^\\"': '"', "(``)": "`", "([ \\(\\[{<])(\\\"|\\'{2})": "\"'",
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": "'",
    "([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$": ".", "([:,])([^\\d])": ":,", "([:,])$": ":,",
    "\\.{2,}": ("..",), "[;@#$%&]": ";@#$%&", "[\\u2012-\\u2015]": "\u2012\u2013\u2014\u2015",
    "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$": ".", "[?!]": "?!", "([^'])' ": "'", "[*]": "*",
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": "[](){}<>", "--": "-", "([»”’])": "»”’", "''": "'", '"': '"',
    "([^' ])('[sS]|'[mM]|'[dD]|') ": "'", "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": "'",
}
# A contraction rule such as (?i)\\b(gon)(?#X)(na)\\b matches only where its letters
# ("gonna") stand together; one search for all of them decides whether any can.
_CONTRACTION_PARTS = re.compile(r"\(\?i\)|\\b|\(\?#X\)|\(\?=\\s\)|[()]")


# Sentences are tokenized all at once, joined by this separator (see _joined).
_SEP = "\x00"
# Characters that make us take the one-sentence-at-a-time path: the separator itself, and
# the four that Python's ``re`` counts as whitespace and NLTK's ``regex`` engine does not.
_SLOW_PATH = re.compile("[\x00\x1c-\x1f]")


def _unwrap(pattern):
    """The compiled ``regex`` pattern inside NLTK's ``TimedPattern`` (itself when not wrapped)."""
    return getattr(pattern, "_rx", pattern)


def _joined(pattern: str) -> str:
    """Rewrite one Treebank rule so that, run over sentences joined by ``_SEP``, it matches
    exactly where it matches in each sentence alone: ``^`` and a final ``$`` become
    "at a sentence's start/end", and a negated class never takes the separator."""
    out = pattern.replace("[^", "[^\x00")
    if out.startswith("^"):
        out = r"(?<![^\x00])" + out[1:]
    if out.endswith("$") and not out.endswith("\\$"):
        out = out[:-1] + r"(?=\n?(?![^\x00]))"  # $ also matches before a final newline
    return out


_DOT_FIRST = r"([^\.])(\.)"


def _dot_first(pattern: str, sub: str) -> tuple[str, str]:
    r"""``([^\.])(\.)REST`` (substitution ``\1 ...``) as ``(\.)(?<=[^\.]\.)REST``: the same matches
    (a period whose preceding character is not a period), the preceding character checked
    behind instead of consumed, so that ``re`` scans for the literal period instead of trying
    the pattern at every character. The two sentence-final period rules are of this form; the
    character no longer consumed is left in place, so the substitution drops its ``\1`` and
    the other groups move down by one. Any other rule is returned unchanged."""
    if not pattern.startswith(_DOT_FIRST) or not sub.startswith("\\1") or "\\1" in sub[2:]:
        return pattern, sub
    if re.search(r"\\g|\\0|\\[1-9]\d", sub):
        return pattern, sub
    return (r"(\.)(?<=[^\.]\.)" + pattern[len(_DOT_FIRST):],
            re.sub(r"\\([2-9])", lambda m: "\\" + str(int(m[1]) - 1), sub[2:]))


# Three apostrophe rules start with a character class or a look-behind, so ``re`` tries them at every
# character of every text (~25% of the Treebank rules' time on short answers), and each match calls back
# into Python for its template. Each is the insertion of literal text at an apostrophe, so, in the joined
# form, it is run as a pattern starting at the apostrophe (``re`` scans for that one character) with a
# literal replacement (copied in C). Same matches: a match of each original ends with the apostrophe's own
# text and a space, or starts at the apostrophe, so no match could overlap the next one's checked
# character. Keyed by NLTK's pattern and template: a rule NLTK changes runs as NLTK writes it.
_APOSTROPHE_FIRST = {
    ("([^' ])('[sS]|'[mM]|'[dD]|') ", "\\1 \\2 "): ("'(?<=[^\x00' ]')(?=[sSmMdD]? )", " '"),
    ("([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", "\\1 \\2 "):
        ("(?:'(?<=[^\x00' ]')(?=(?:ll|LL|re|RE|ve|VE) )|n(?<=[^\x00' ]n)(?='t )|N(?<=[^\x00' ]N)(?='T ))", None),
    ("(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)", "\\1 "):
        ("(?i)'(?<!\\w')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)", "' "),
}


def _apostrophe_first(pattern: str, sub: str) -> tuple[str, object] | None:
    """The joined-form rule and its replacement for one of :data:`_APOSTROPHE_FIRST`'s rules, else None."""
    found = _APOSTROPHE_FIRST.get((pattern, sub))
    if found is None:
        return None
    new, literal = found
    # n't / N'T: the space goes before the n, which the match starts at: " " + the matched letter
    return new, literal if literal is not None else (lambda m: " " + m.group())


@lru_cache(maxsize=2)
def _treebank_rules(joined: bool):
    """NLTK's own Treebank rules, with guards.

    ``joined=False``: NLTK's compiled ``regex`` patterns themselves, without the wall-clock
    timer NLTK 3.10 wraps them in. ``joined=True``: the same rules rewritten by
    :func:`_joined` and compiled on Python's ``re``, run once over all of a text's
    sentences instead of once per sentence (~15 sentences in a typical answer). Tests
    check both against ``NLTKWordTokenizer().tokenize`` sentence by sentence.
    """
    import_nltk()
    from nltk.tokenize.destructive import NLTKWordTokenizer as T  # lazy: classic metrics only

    def compile_(rx):
        return re.compile(_joined(rx.pattern), rx.flags & _RE_FLAGS) if joined else _unwrap(rx)

    def plain(rules):
        out = []
        for rx, sub in rules:
            needs = _NEEDS.get(rx.pattern)
            quick = _apostrophe_first(rx.pattern, sub) if joined else None
            if quick is not None:
                out.append((re.compile(quick[0], rx.flags & _RE_FLAGS), quick[1], needs))
                continue
            if joined:
                pattern, sub = _dot_first(rx.pattern, sub)
                rx = re.compile(_joined(pattern), rx.flags & _RE_FLAGS)
            out.append((_unwrap(rx), _replacer(sub), needs))
        return out

    contractions = [compile_(rx) for rx in T.CONTRACTIONS2 + T.CONTRACTIONS3]
    literals = [_CONTRACTION_PARTS.sub("", rx.pattern) for rx in T.CONTRACTIONS2 + T.CONTRACTIONS3]
    if all(re.fullmatch(r"[\w' ]+", lit) for lit in literals):
        guard = re.compile("|".join(re.escape(lit) for lit in literals), re.I)
    else:  # a rule we cannot read as a literal: no shortcut
        guard = re.compile("")
    # (rule, the lower-case letters it needs): on ASCII text a rule whose letters are absent cannot match
    contractions = list(zip(contractions, [lit.lower() for lit in literals]))
    return (plain(T.STARTING_QUOTES) + plain(T.PUNCTUATION) + plain([T.PARENS_BRACKETS]) + plain([T.DOUBLE_DASHES]),
            plain(T.ENDING_QUOTES), guard, contractions)


_RE_FLAGS = re.I | re.M | re.S | re.U | re.X

_TEMPLATE_PART = re.compile(r"\\([1-9])|\\g<([0-9]+)>|([^\\]+)")


@lru_cache(maxsize=128)
def _replacer(template: str):
    """``rx.sub(template, text)``'s replacement as a function of the match, for templates of literal text
    and group references (``\\1``, ``\\g<0>``): Python 3.11's ``re`` expands a template in Python,
    through two calls per match (~280,000 matches for 10,000 pairs); this is one. A group that did
    not take part gives "", as ``re`` does. Any other template is returned as it is."""
    if "\\" not in template:
        return template  # re copies a plain string itself
    parts, pos = [], 0
    for m in _TEMPLATE_PART.finditer(template):
        if m.start() != pos:
            return template
        pos = m.end()
        parts.append(repr(m[3]) if m[3] is not None else f"(m.group({int(m[1] or m[2])}) or '')")
    if pos != len(template):
        return template
    return eval("lambda m: " + " + ".join(parts))  # noqa: S307 — literals of NLTK's templates, as repr()


_CONTRACTION_SUB = _replacer(r" \1 \2 ")


def _apply(text: str, joined: bool) -> str:
    before, ending, guard, contractions = _treebank_rules(joined)
    for rx, sub, needs in before:
        if needs is None or any(c in text for c in needs):
            text = rx.sub(sub, text)
    # NLTK pads each sentence with a space before its ending-quote rules.
    text = " " + (text.replace(_SEP, " " + _SEP + " ") if joined else text) + " "
    for rx, sub, needs in ending:
        if rx.pattern == r"\s+" and sub == " ":
            # the same as re.sub(r"\s+", " ", text) on text that starts and ends with a space
            # (re's \s and str.split() share Python's definition of whitespace), ~5x faster
            text = " " + " ".join(text.split()) + " " if text.strip() else " "
        elif needs is None or any(c in text for c in needs):
            text = rx.sub(sub, text)
    # On ASCII text, (?i) matching is substring search in the lower-cased text: ~6x faster than the
    # guard's regex. (?i) folds some non-ASCII letters too, so other text keeps the regex.
    low = text.lower() if text.isascii() else None
    if (any(letters in low for _, letters in contractions) if low is not None and guard.pattern
            else guard.search(text)):
        for rx, letters in contractions:
            if low is None or letters in low:
                text = rx.sub(_CONTRACTION_SUB, text)
    return text


def treebank_tokenize(sentence: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(sentence)``: the same rules in the same order."""
    return _apply(sentence, joined=False).split()


def treebank_tokenize_sentences(sentences: list[str]) -> list[str]:
    """``[t for s in sentences for t in NLTKWordTokenizer().tokenize(s)]``, in one pass of each rule."""
    if any(_SLOW_PATH.search(s) for s in sentences):
        return [tok for s in sentences for tok in treebank_tokenize(s)]
    return [tok for tok in _apply(_SEP.join(sentences), joined=True).split() if tok != _SEP]


def sdk_word_tokenize(text: str) -> list[str]:
    """The Azure AI Evaluation SDK's ``nltk_tokenize`` (uncached).

    ASCII text: ``nltk.word_tokenize`` (Punkt English sentences, then NLTK's Treebank
    tokenizer on each); text with any non-ASCII character:
    ``NISTTokenizer().international_tokenize``. As in SDK 1.18 ``_common/utils.py``.
    """
    if text.isascii():
        return treebank_tokenize_sentences(sent_tokenize(text))
    return international_tokenize(text)


# Scripts written without spaces between words: each character is one token.
_NO_SPACE = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"


@lru_cache(maxsize=1)
def _unicode_rx():
    import regex  # NLTK's own dependency

    word = rf"[[\p{{L}}\p{{M}}\p{{N}}]--[{_NO_SPACE}]]+"
    return (regex.compile(rf"(?V1)[{_NO_SPACE}]|{word}|[^\s]"),
            regex.compile(rf"(?V1)[{_NO_SPACE}]|{word}"),
            regex.compile(rf"[{_NO_SPACE}]"))


def unicode_word_tokenize(text: str) -> list[str]:
    """Our ``unicode`` option: letter/digit runs in any script (marks kept), each character of
    Chinese, Japanese, Thai and other scripts written without spaces, and each other
    non-space character (punctuation, symbols) as a token of its own."""
    return _unicode_rx()[0].findall(text)


TOKENIZERS = {"sdk": sdk_word_tokenize, "unicode": unicode_word_tokenize}


@lru_cache(maxsize=65_536)
def _cached_words(text: str, tok: str) -> tuple[str, ...]:
    return tuple(TOKENIZERS[tok](text))


def word_tokenize(text: str, tok: str = "sdk") -> tuple[str, ...]:
    """Word tokens for BLEU, GLEU and METEOR (cached: the three share one tokenization per text).

    Args:
        text: any text.
        tok: ``"sdk"`` (the SDK's tokens, the default) or ``"unicode"``.
    Returns:
        The tokens, as a tuple (do not modify).
    """
    return _cached_words(text, tok)


# rouge-score's tokenizer (the SDK vendors it unchanged): lower-case, then every run of
# characters outside a-z0-9 is a separator. Words in other scripts vanish.
_ROUGE_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def rouge_tokenize(text: str, tok: str = "sdk") -> list[str]:
    """``rouge_score.tokenize.tokenize(text, None)`` (``tok="sdk"``), or with ``tok="unicode"``
    lower-cased letter/digit runs of any script, each character of a script written
    without spaces apart."""
    if tok == "unicode":
        return _unicode_rx()[1].findall(text.lower())
    return _ROUGE_NON_ALNUM.sub(" ", text.lower()).split()


_HAS_WORD = re.compile(r"[^\W_]")


def lost_words_note(row, tok: str, rouge: bool, option: str) -> dict[str, str]:
    """``{"_note": ...}`` when the SDK tokenizer cannot compare a field's words, else ``{}``.

    ROUGE: a field has letters or digits but rouge-score's tokenizer (a-z0-9 only) keeps
    none of them. BLEU, GLEU, METEOR: a field is written (partly) in a script without
    spaces (Chinese, Japanese, Thai...), which the SDK's NIST tokenizer keeps as whole
    runs, so its words are never compared one by one. ``option`` names the metric to use instead.
    """
    if tok != "sdk":
        return {}
    lost = []
    for field in ("response", "ground_truth"):
        text = row[field]
        if text.isascii():
            continue
        if rouge:
            if _HAS_WORD.search(text) and not rouge_tokenize(text):
                lost.append(field)
        elif _unicode_rx()[2].search(text):
            lost.append(field)
    if not lost:
        return {}
    why = ("rouge-score's tokenizer keeps only a-z and 0-9, so none of its words were compared" if rouge else
           "its words are in a script written without spaces, which the SDK's tokenizer does not split into words")
    return {"_note": f"{' and '.join(lost)}: {why}; for text that is not English use {option}"}

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> list[str]:
    """SQuAD answer normalisation: lower case, drop punctuation and articles, split on space."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()
