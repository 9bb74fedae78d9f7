"""Clipped n-gram matches (1- to 4-grams) of a hypothesis against one reference, shared by BLEU and GLEU.

Both metrics read the same four numbers from a pair's tokens: for each n, how many of the
hypothesis's n-grams the reference also has (each counted at most as often as the reference has
it). BLEU divides them by the hypothesis's n-gram counts, GLEU sums them (n-grams of different
lengths never coincide, so the sum is the overlap of the two "all n-grams" bags). Each pair's are
computed once per process and kept, so the second metric of a run reads them instead of
counting again.
"""
from __future__ import annotations

from collections import _count_elements  # Counter's own C counting loop, without Counter's per-call overhead
from functools import lru_cache
from typing import Sequence

from evaluators.metrics._text import word_tokenize

MAX_N = 4


def clipped_matches(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[int, ...]:
    """For n = 1..4, the hypothesis's n-grams found in the reference, clipped by the reference's counts."""
    out = []
    for n in range(1, MAX_N + 1):
        if not out or out[-1]:
            # counted into plain dicts by the loop Counter() runs (Counter's constructor, update() and
            # type checks cost as much again on a short answer's ~60 n-grams: 8 counts a pair)
            hyp: dict = {}
            ref: dict = {}
            _count_elements(hyp, zip(*(hypothesis[i:] for i in range(n))) if n > 1 else hypothesis)
            _count_elements(ref, zip(*(reference[i:] for i in range(n))) if n > 1 else reference)
            # the shared n-grams found by one set intersection of the two key views (C), not a
            # Python loop over every hypothesis n-gram
            out.append(sum(min(hyp[g], ref[g]) for g in hyp.keys() & ref.keys()))
        else:  # no shared (n-1)-gram: no shared n-gram either
            out.append(0)
    return tuple(out)


@lru_cache(maxsize=65_536)
def pair_matches(ground_truth: str, response: str, tok: str) -> tuple[tuple[int, ...], int, int]:
    """(clipped matches, response length, ground-truth length) in tokens of ``tok`` (cached per pair)."""
    ref, hyp = word_tokenize(ground_truth, tok), word_tokenize(response, tok)
    return clipped_matches(ref, hyp), len(hyp), len(ref)
