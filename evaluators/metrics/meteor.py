"""METEOR (alpha 0.9, beta 3.0, gamma 0.5) with exact, Porter-stem and WordNet-synonym matching.

Equal to ``nltk.translate.meteor_score.meteor_score([ref], hyp)`` as the Azure AI
Evaluation SDK calls it. The alignment is the same greedy three-stage alignment;
the speed comes from computing each word's stem and synonym set once per process
instead of once per pair, and from NLTK's Porter stemmer ported for speed (``_porter``).
"""
from __future__ import annotations

from evaluators.metrics._classic import reference_metric
from evaluators.metrics._porter import stem as porter_stem
from evaluators.metrics._text import lost_words_note, word_tokenize
from evaluators.metrics.wordnet import lemma_names

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5


# Per word, computed once per process: a Porter stem and a WordNet synonym set are pure functions
# of the word, and words repeat across texts (Zipf) even when no text does. Plain dicts read
# with .get() cost less than lru_cache's wrapper on ~800,000 look-ups for 10,000 short pairs.
_STEMS: dict[str, str] = {}
_SYNONYMS: dict[str, frozenset[str]] = {}
_MEMO_LIMIT = 200_000


def _stem(word: str) -> str:
    stem = _STEMS.get(word)
    if stem is None:
        if len(_STEMS) >= _MEMO_LIMIT:  # bounded: memory stays flat whatever the vocabulary
            _STEMS.clear()
        stem = _STEMS[word] = porter_stem(word)
    return stem


def _stems(words: list[str]) -> list[str]:
    """``[_stem(w) for w in words]``, the known stems read in one pass."""
    stems = list(map(_STEMS.get, words))
    if None in stems:
        stems = [s if s is not None else _stem(w) for s, w in zip(stems, words)]
    return stems


def _synonyms(word: str) -> frozenset[str]:
    """NLTK's ``hypothesis_syns``: the word's WordNet lemma names without "_", plus the word."""
    syns = _SYNONYMS.get(word)
    if syns is None:
        if len(_SYNONYMS) >= _MEMO_LIMIT:
            _SYNONYMS.clear()
        syns = _SYNONYMS[word] = frozenset(n for n in lemma_names(word) if "_" not in n) | {word}
    return syns


def _align(hpos: list[int], hyp: list[str], rpos: list[int], ref: list[str], out: list, synonyms: bool = False):
    """One alignment stage of NLTK's METEOR: each hypothesis word, last first, takes the last free
    reference word equal to it (``synonyms``: equal to one of its WordNet synonyms).

    Args:
        hpos, hyp: the unmatched hypothesis words and their original positions (parallel lists).
        rpos, ref: the same for the reference.
        out: (hyp position, ref position) of each match made is appended here.
    Returns:
        (hpos, hyp, rpos, ref) of the words still unmatched, in their order.
    """
    if synonyms:
        ref_words = frozenset(ref)
        # a hypothesis word none of whose synonyms is a reference word takes part in no match
        wanted = {w: s for w in set(hyp) if (s := _synonyms(w) & ref_words)}
        if not wanted:
            return hpos, hyp, rpos, ref
        keep = frozenset().union(*wanted.values())
    else:
        keep = set(hyp).intersection(ref)
        if not keep:  # no word in common: nothing to match (the usual case of the stem stage)
            return hpos, hyp, rpos, ref
    positions: dict[str, list[int]] = {}
    for j, w in enumerate(ref):
        if w in keep:
            positions.setdefault(w, []).append(j)
    used_r: set[int] = set()
    left_h: list[int] = []
    for i in range(len(hyp) - 1, -1, -1):
        if synonyms:
            cands = wanted.get(hyp[i])
            best, best_key = -1, None
            if cands:
                for syn in cands:
                    pos = positions.get(syn)
                    if pos and pos[-1] > best:
                        best, best_key = pos[-1], syn
            if best_key is None:
                left_h.append(i)
                continue
            j = positions[best_key].pop()
        else:
            pos = positions.get(hyp[i])
            if not pos:
                left_h.append(i)
                continue
            j = pos.pop()
        used_r.add(j)
        out.append((hpos[i], rpos[j]))
    left_h.reverse()
    left_r = [j for j in range(len(ref)) if j not in used_r]
    return [hpos[i] for i in left_h], [hyp[i] for i in left_h], [rpos[j] for j in left_r], [ref[j] for j in left_r]


def meteor(reference, hypothesis) -> float:
    """METEOR of one hypothesis against one reference (tokens, any case)."""
    hyp = [w.lower() for w in hypothesis]
    ref = [w.lower() for w in reference]
    if not hyp or not ref:
        return 0.0
    matches: list[tuple[int, int]] = []
    hp, h, rp, r = _align(list(range(len(hyp))), hyp, list(range(len(ref))), ref, matches)
    # As in NLTK, the words left after the stem stage stay stemmed for the synonym stage.
    hp, h, rp, r = _align(hp, _stems(h), rp, _stems(r), matches)
    if h and r:
        _align(hp, h, rp, r, matches, synonyms=True)
    if not matches:
        return 0.0
    matches.sort()
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
