"""Scores from a judge's token probabilities (G-Eval, Liu et al. 2023): the probability-weighted mean of the
score tokens the judge could have written where it wrote its score, instead of the one it sampled.

A judge asked for ``logprobs`` answers with the probabilities of each token it wrote and of the likeliest
alternatives (``top_logprobs``). The judge client keeps them with the reply's text as one JSON *envelope*
(:func:`envelope`), so the reply cached, stored and parsed again later scores the same; a metric's parser
opens it with :func:`open_envelope` and scores with :func:`weighted_score`. Pure functions, no I/O.
"""
from __future__ import annotations

import json
import math
from typing import Any

MARK = "evaldash.logprobs/1"  # what says a stored reply is an envelope (a judge's own JSON never has it)


def envelope(text: str, content_logprobs: list[dict[str, Any]] | None) -> str:
    """The reply's text with its tokens' probabilities: ``[token, {alternative: logprob...}]`` a token."""
    tokens = []
    for t in content_logprobs or []:
        tops = {a.get("token", ""): a.get("logprob") for a in t.get("top_logprobs") or []
                if isinstance(a, dict) and isinstance(a.get("logprob"), (int, float))}
        tokens.append([t.get("token", ""), tops or {t.get("token", ""): t.get("logprob", 0.0)}])
    return json.dumps({MARK: True, "content": text, "tokens": tokens}, ensure_ascii=False)


def open_envelope(text: str) -> tuple[str, list | None]:
    """(the reply's text, its tokens or None) for a reply that may or may not be an envelope."""
    if text.startswith("{") and MARK in text[:60]:
        try:
            d = json.loads(text)
        except ValueError:
            return text, None
        if isinstance(d, dict) and d.get(MARK):
            return str(d.get("content") or ""), list(d.get("tokens") or [])
    return text, None


def weighted_score(tokens: list, at: int, low: float, high: float) -> tuple[float, dict[int, float]]:
    """The G-Eval score for the score written at character ``at`` of the reply's text.

    Args:
        tokens: the envelope's ``[token, {alternative: logprob}]`` list, in the order of the text.
        at: where the score's first digit is in the text (the tokens' texts joined).
        low, high: the scale; alternatives that are not a whole number on it are left out.
    Returns:
        (Σ p(s)·s / Σ p(s) over the scale's scores s among the alternatives, {s: p(s)} normalised).
    Raises:
        ValueError: no token at ``at``, or none of its alternatives is a score on the scale.
    """
    pos = 0
    for token, alts in tokens:
        if pos <= at < pos + len(token) or (not token and pos == at):
            probs: dict[int, float] = {}
            for alt, lp in alts.items():
                s = alt.strip()
                if s.lstrip("-").isdigit() and low <= int(s) <= high and lp is not None:
                    probs[int(s)] = probs.get(int(s), 0.0) + math.exp(lp)
            total = math.fsum(probs.values())
            if not probs or total <= 0:
                raise ValueError(f"none of the judge's likeliest tokens at its score ({', '.join(map(repr, alts))}) "
                                 f"is a score from {low:g} to {high:g}")
            shares = {s: p / total for s, p in sorted(probs.items())}
            return math.fsum(s * p for s, p in shares.items()), shares
        pos += len(token)
    raise ValueError("the judge's token probabilities do not cover its score (did it return logprobs?)")
