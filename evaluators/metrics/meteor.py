"""METEOR (alpha 0.9, beta 3.0, gamma 0.5) with exact, Porter-stem and WordNet-synonym matching.

Equal to ``nltk.translate.meteor_score.meteor_score([ref], hyp)`` as the Azure AI
Evaluation SDK calls it. The alignment is the same greedy three-stage alignment;
the speed comes from computing each word's stem and synonym set once per process
instead of once per pair.
"""
from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

from ._classic import reference_metric
from ._nltk import import_nltk
from ._text import lost_words_note, word_tokenize
from .wordnet import lemma_names

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5


@lru_cache(maxsize=1)
def _stemmer():
    import_nltk()
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


@lru_cache(maxsize=200_000)
def _synonyms(word: str) -> frozenset[str]:
    return frozenset(n for n in lemma_names(word) if "_" not in n) | {word}


def _match(hyp: list[tuple[int, str]], ref: list[tuple[int, str]], synonyms: bool = False):
    """One alignment stage: each hypothesis word, last first, takes the last free reference word.

    Args:
        hyp, ref: (original position, word) pairs still unmatched.
        synonyms: compare the hypothesis word's WordNet synonyms with reference words.
    Returns:
        (matches as (hyp position, ref position), hyp left, ref left)
    """
    positions: dict[str, list[int]] = defaultdict(list)
    for j, (_, w) in enumerate(ref):
        positions[w].append(j)
    matches, used_h, used_r = [], set(), set()
    ref_words = frozenset(positions) if synonyms else None
    for i in range(len(hyp) - 1, -1, -1):
        word = hyp[i][1]
        if synonyms:
            best, best_key = -1, None
            # only synonyms that are reference words can match (one C-level intersection, not a loop)
            for syn in _synonyms(word) & ref_words:
                pos = positions.get(syn)
                if pos and pos[-1] > best:
                    best, best_key = pos[-1], syn
            if best_key is None:
                continue
            j = positions[best_key].pop()
        else:
            pos = positions.get(word)
            if not pos:
                continue
            j = pos.pop()
        used_h.add(i)
        used_r.add(j)
        matches.append((hyp[i][0], ref[j][0]))
    return (matches, [p for i, p in enumerate(hyp) if i not in used_h], [p for j, p in enumerate(ref) if j not in used_r])


@lru_cache(maxsize=65_536)
def _lower(tokens: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w.lower() for w in tokens)


def meteor(reference, hypothesis) -> float:
    """METEOR of one hypothesis against one reference (tokens, any case)."""
    hyp = list(enumerate(_lower(tuple(hypothesis))))
    ref = list(enumerate(_lower(tuple(reference))))
    if not hyp or not ref:
        return 0.0
    exact, h, r = _match(hyp, ref)
    # As in NLTK, the words left after the stem stage stay stemmed for the synonym stage.
    stem, h, r = _match([(i, _stem(w)) for i, w in h], [(j, _stem(w)) for j, w in r])
    syn, _, _ = _match(h, r, synonyms=True)
    matches = sorted(exact + stem + syn)
    if not matches:
        return 0.0
    precision, recall = len(matches) / len(hyp), len(matches) / len(ref)
    fmean = precision * recall / (ALPHA * precision + (1 - ALPHA) * recall)
    chunks = 1 + sum(
        1 for (a, b), (c, d) in zip(matches, matches[1:]) if not (c == a + 1 and d == b + 1)
    )
    penalty = GAMMA * (chunks / len(matches)) ** BETA
    return (1 - penalty) * fmean


def _compute(tok: str):
    def compute(row):
        out = {"meteor_score": meteor(word_tokenize(row["ground_truth"], tok), word_tokenize(row["response"], tok))}
        out.update(lost_words_note(row, tok, rouge=False, option="meteor_unicode"))
        return out
    return compute


for _name, _tok, _about in (("meteor", "sdk", "the Azure AI Evaluation SDK's tokens"),
                            ("meteor_unicode", "unicode", "Unicode word tokens, for text that is not English")):
    reference_metric(
        _name, "meteor", ("meteor_score",),
        f"Word alignment with the ground truth (exact, stem, WordNet synonym), penalising fragmentation ({_about}).",
        _compute(_tok),
        params=(("alpha", ALPHA), ("beta", BETA), ("gamma", GAMMA), ("wordnet", "3.0"), ("tok", _tok)),
    )
