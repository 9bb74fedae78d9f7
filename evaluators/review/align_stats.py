"""Alignment's numbers: the baseline card of a judge against its reviewers, and the one gate a candidate judge
passes on the test split. Pure functions over pass/fail arrays (1 pass, 0 fail) and values; every κ and interval
comes from :mod:`evaluators.core.agreement`, McNemar's test from :mod:`evaluators.core.inference`.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from evaluators.core.agreement import agreement_numbers, bootstrap_ci, cohen_kappa
from evaluators.core.inference import mcnemar_exact

GATE_ROUNDS = 2000  # paired bootstrap rounds of the gate: its interval decides, so it gets more than a card's
VERDICTS = ("better", "no detectable change", "worse")


def _share(hits: np.ndarray) -> float | None:
    return float(hits.mean()) if len(hits) else None


def split_card(human: Sequence[int], judge: Sequence[int], human_values: Sequence[float] | None = None,
               judge_values: Sequence[float] | None = None, scale_values: Sequence[float] | None = None,
               seed: int = 0) -> dict[str, Any]:
    """A judge against people on one split's rows.

    Args:
        human, judge: each row's pass (1) or fail (0).
        human_values, judge_values, scale_values: values on an ordered scale (weighted κ); None for labels.
    Returns:
        ``rows``; ``kappa`` and ``weighted_kappa`` as [value, ci95 low, ci95 high]; ``tpr`` (the judge passes
        what people pass), ``tnr`` (fails what they fail); ``accuracy``; ``majority_accuracy`` (always saying
        the reviewers' commoner verdict) and ``majority_verdict``.
    """
    h, j = np.asarray(human, dtype=np.int64), np.asarray(judge, dtype=np.int64)
    out: dict[str, Any] = {"rows": int(len(h))}
    if not len(h):
        return out | {"kappa": [None] * 3, "weighted_kappa": [None] * 3, "tpr": None, "tnr": None,
                      "accuracy": None, "majority_accuracy": None, "majority_verdict": None}
    if scale_values is not None and human_values is not None:
        nums = agreement_numbers(np.asarray(judge_values, dtype=float), np.asarray(human_values, dtype=float),
                                 j, h, scale_values, seed=seed)
    else:
        nums = agreement_numbers(j.astype(float), h.astype(float), j, h, None, seed=seed)
    out["kappa"], out["weighted_kappa"] = list(nums["kappa"]), list(nums["weighted_kappa"])
    out["tpr"], out["tnr"] = _share(j[h == 1] == 1), _share(j[h == 0] == 0)
    out["accuracy"] = float((j == h).mean())
    passed = int(h.sum())
    out["majority_verdict"] = "pass" if passed * 2 >= len(h) else "fail"
    out["majority_accuracy"] = max(passed, len(h) - passed) / len(h)
    return out


def length_bias(judge_values: Sequence[float], human_values: Sequence[float], lengths: Sequence[float],
                seed: int = 0) -> dict[str, Any]:
    """The least-squares slope of (judge - human) on the response's length, per 1,000 characters, with a 95%
    bootstrap interval: above 0, the judge grows kinder than people as answers grow longer.

    Returns:
        ``slope_per_1000_chars``, ``ci95_low``, ``ci95_high``, ``rows`` (None where lengths do not vary)."""
    d = np.asarray(judge_values, dtype=float) - np.asarray(human_values, dtype=float)
    x = np.asarray(lengths, dtype=float) / 1000.0

    def slope(ix: np.ndarray) -> float | None:
        xs = x[ix]
        var = float(((xs - xs.mean()) ** 2).sum())
        return None if var == 0 else float(((xs - xs.mean()) * (d[ix] - d[ix].mean())).sum()) / var

    every = np.arange(len(d))
    s = slope(every) if len(d) >= 2 else None
    lo, hi = bootstrap_ci(slope, len(d), 1000, seed) if s is not None else (None, None)
    return {"slope_per_1000_chars": s, "ci95_low": lo, "ci95_high": hi, "rows": int(len(d))}


def _kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    return cohen_kappa(a.tolist(), b.tolist(), labels=[0, 1])


def gate(human: Sequence[int], current: Sequence[int], candidate: Sequence[int], seed: int = 0,
         rounds: int = GATE_ROUNDS) -> dict[str, Any]:
    """The candidate judge against the current one on the same test rows, both against people.

    The paired bootstrap resamples rows and takes κ(candidate, people) - κ(current, people) on each resample, so
    the rows both judges saw are compared as pairs. McNemar's exact test asks whether the two are right on
    different numbers of rows (rows where exactly one of them agrees with people).

    Returns:
        ``kappa_current``, ``kappa_candidate``, ``delta``, ``delta_ci95_low``, ``delta_ci95_high``, ``mcnemar_p``,
        ``disagreements`` (rows where the two judges differ), ``test_rows``, ``verdict`` (one of
        :data:`VERDICTS`: "better" only when the whole interval lies above 0, "worse" when it lies below) and
        ``sentence`` (the verdict in plain words).
    """
    h, cur, cand = (np.asarray(v, dtype=np.int64) for v in (human, current, candidate))
    if not (len(h) == len(cur) == len(cand)):
        raise ValueError("the gate needs the human, current and candidate verdicts of the same rows")
    k_cur, k_cand = _kappa(cur, h), _kappa(cand, h)
    delta = None if k_cur is None or k_cand is None else k_cand - k_cur

    def diff(ix: np.ndarray) -> float | None:
        a, b = _kappa(cand[ix], h[ix]), _kappa(cur[ix], h[ix])
        return None if a is None or b is None else a - b

    lo, hi = bootstrap_ci(diff, len(h), rounds, seed)
    right_cur, right_cand = cur == h, cand == h
    p = mcnemar_exact(int((right_cur & ~right_cand).sum()), int((right_cand & ~right_cur).sum()))
    verdict = "better" if lo is not None and lo > 0 else "worse" if hi is not None and hi < 0 else \
        "no detectable change"
    out = {"kappa_current": k_cur, "kappa_candidate": k_cand, "delta": delta, "delta_ci95_low": lo,
           "delta_ci95_high": hi, "mcnemar_p": p, "disagreements": int((cur != cand).sum()), "test_rows": int(len(h)),
           "verdict": verdict}
    out["sentence"] = gate_sentence(out)
    return out


def _f(v: float | None) -> str:
    return "undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.2f}"


def gate_sentence(g: dict[str, Any]) -> str:
    """The gate's verdict in one plain sentence, with the numbers it rests on."""
    rows = g["test_rows"]
    ci = f"[{_f(g['delta_ci95_low'])}, {_f(g['delta_ci95_high'])}]"
    # (not "κ ...": capitalised below, a leading κ became a Greek capital K)
    what = (f"Cohen's κ against your reviewers changed by {_f(g['delta'])} (95% interval {ci}) on {rows} held-out "
            f"test rows; "
            f"the two judges differ on {g['disagreements']} of them (McNemar p = {g['mcnemar_p']:.3g})")
    if g["verdict"] == "better":
        return f"Better: the candidate agrees with your reviewers more than the current judge. {what[0].upper()}{what[1:]}."
    if g["verdict"] == "worse":
        return f"Worse: the candidate agrees with your reviewers less than the current judge. {what[0].upper()}{what[1:]}."
    return f"No detectable change: these test rows cannot tell the candidate from the current judge. " \
           f"{what[0].upper()}{what[1:]}."
