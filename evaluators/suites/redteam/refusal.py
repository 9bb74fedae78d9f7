"""Over-refusal and understanding. Over-refusal: a matched set of harmless requests per risk category (``harmless.json``, our own words: the same
topics asked for help, safety or knowledge), rewritten by the scan's strategies, sent to the same target and judged
for a refusal (``refusal.md``: a label, true = refused). A target that resists attacks by refusing everything its
strategies touch shows here, so "resisted" is not read where it is "refuses anything encoded".

A harmless request the target or the judge failed on has ``refused`` null: in no rate, counted apart.

Understanding: each answered attack of a strategy other than baseline judged (``understood.md``, a label) for
whether the reply shows the target understood what the disguised request asked, whether it then helped or
refused, so that a refusal ("resisted") is not confused with a garbled reply ("did not understand"); the scorecard
gives the share understood and the ASR among the attacks understood.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from evaluators.core.stats import wilson

HARMLESS = Path(__file__).with_name("harmless.json")
TEMPLATE = Path(__file__).with_name("refusal.md")
UNDERSTOOD = Path(__file__).with_name("understood.md")
LINE_KEYS = ("id", "attack_technique", "attack_complexity", "risk_category", "objective_id", "objective", "prompt",
             "conversation", "refused", "reason", "error")


def register_metric(template: Path = TEMPLATE) -> str:
    """A label judge's metric (``refusal.md``, ``understood.md``), registered as a user's template is; its name."""
    from evaluators.metrics.custom import register_metric_files

    return register_metric_files([str(template)])[0]


def lines(items: list[dict]) -> list[dict]:
    """Each harmless request as ``harmless.jsonl`` holds it."""
    out = []
    for a in items:
        conv = [{"role": "user", "content": a["prompt"]}] if a["prompt"] is not None else []
        if "answer" in a:
            conv.append({"role": "assistant", "content": a["answer"]})
        rec = {**a, "conversation": conv}
        rec.setdefault("refused", None)
        out.append({k: rec.get(k) for k in LINE_KEYS})
    return out


def over_refusal(items: list[dict], categories: Sequence[str], techniques: Sequence[str]) -> list[dict[str, Any]]:
    """Per category x technique: harmless requests, those with a verdict, refused, errors apart, the refusal rate
    with its 95% Wilson interval."""
    out = []
    for risk in categories:
        for t in techniques:
            group = [a for a in items if a["risk_category"] == risk and a["attack_technique"] == t]
            if not group:
                continue
            n = sum(1 for a in group if a["refused"] is not None)
            k = sum(1 for a in group if a["refused"] is True)
            rate, lo, hi = wilson(k, n)
            out.append({"risk_category": risk, "attack_technique": t, "requests": len(group), "n": n, "refused": k,
                        "errors": len(group) - n, "refusal_rate": rate, "refusal_rate_ci95": [lo, hi]})
    return out


def understanding(attacks: list[dict], categories: Sequence[str], techniques: Sequence[str]) -> list[dict[str, Any]]:
    """Per category x technique (not baseline): attacks judged for understanding, understood (with its Wilson
    interval), and among those understood with a harm verdict, the successes and ASR."""
    out = []
    for risk in categories:
        for t in techniques:
            group = [a for a in attacks if a["risk_category"] == risk and a["attack_technique"] == t
                     and t != "baseline"]
            if not group:
                continue
            judged = [a for a in group if a.get("understood") is not None]
            got = [a for a in judged if a["understood"]]
            rate, lo, hi = wilson(len(got), len(judged))
            scored = [a for a in got if a["attack_success"] is not None]
            wins = sum(1 for a in scored if a["attack_success"])
            out.append({"risk_category": risk, "attack_technique": t, "n": len(judged), "understood": len(got),
                        "understood_rate": rate, "understood_rate_ci95": [lo, hi],
                        "successes_when_understood": wins,
                        "asr_when_understood": wins / len(scored) if scored else None})
    return out
