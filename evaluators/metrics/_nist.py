"""NLTK's ``NISTTokenizer().international_tokenize``: what the SDK uses for non-ASCII text.

The tokenizer's character classes come from NLTK's ``perluniprops`` data (a
run-time download). They are *not* Unicode's general categories: NLTK's
``Number`` list, for one, holds every printable ASCII character and thousands of
letters, so no ``unicodedata`` rule rebuilds them. We read the same lists from
the ``sacremoses`` package on PyPI (MIT; the Moses tokenizer port by the author of
NLTK's NIST tokenizer and of ``perluniprops``), which carries them as a Python
module. A test checks NLTK's own doctest outputs for the tokenizer and for
``perluniprops`` with these lists, and our tokens against ``NISTTokenizer`` itself.

The rules are NLTK's, in NLTK's order, compiled on Python's ``re``: the classes
are explicit character lists (plus ``[\\x00-\\x7f]``), where ``re`` and the
``regex`` engine NLTK uses agree, and ``re`` handles such large classes ~60x faster.
"""
from __future__ import annotations

import re
from functools import lru_cache

from evaluators.metrics._nltk import import_nltk


@lru_cache(maxsize=1)
def _perluniprops_tables() -> dict[str, str]:
    """sacremoses' ``PERLUNIPROPS`` table (category -> characters), read without importing
    the ``sacremoses`` package, whose ``__init__`` compiles its whole tokenizer (~1.5 s)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sacremoses")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("BLEU, GLEU and METEOR need the 'sacremoses' package (NLTK's perluniprops lists, "
                                  "for text with non-ASCII characters): pip install -r requirements.txt")
    data = Path(next(iter(spec.submodule_search_locations))) / "_data_perluniprops.py"
    module_spec = importlib.util.spec_from_file_location("_evaldash_perluniprops", data)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.PERLUNIPROPS


def perluniprops(category: str) -> list[str]:
    """``nltk.corpus.perluniprops.chars(category)``: the category file's characters, stripped."""
    return list(_perluniprops_tables()[category].strip())


def _class(chars: list[str]) -> str:
    # NLTK: "".join(set(chars)), then ], ^, \ and - escaped (order is irrelevant in a class)
    return re.sub(r"[]^\\-]", r"\\\g<0>", "".join(sorted(set(chars))))


@lru_cache(maxsize=1)
def _rules():
    number, punct, symbol = (_class(perluniprops(c)) for c in ("Number", "Punctuation", "Symbol"))
    return [
        (re.compile("([\x00-\x7f]+)"), r" \1 "),                      # NONASCII
        (re.compile(f"([{number}])([{punct}])"), "\\1 \\2 "),         # PUNCT_1
        (re.compile(f"([{punct}])([{number}])"), " \\1 \\2"),         # PUNCT_2
        (re.compile(f"([{symbol}])"), " \\1 "),                       # SYMBOLS
    ]


def international_tokenize(text: str) -> list[str]:
    """``NISTTokenizer().international_tokenize(text)`` with its defaults (no lower-casing)."""
    import_nltk()
    from nltk.tokenize.util import xml_unescape

    text = text.replace("<skipped>", "")       # STRIP_SKIP
    text = text.replace("\u2028", " ")         # STRIP_EOL_HYPHEN
    text = xml_unescape(text)
    for rx, sub in _rules():
        text = rx.sub(sub, text)
    return text.split()
