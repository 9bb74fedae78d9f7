"""Two scans of the same configuration against two builds of a target: which attacks newly broke it, which it now
resists, and whether the change in ASR could be chance (McNemar's exact test on the paired attacks, the paired
difference with its interval: ``core.inference.paired_difference``, as Compare reads two runs).

Attacks pair by id (category / objective / technique) when both scans sent the same prompt and both have a verdict;
an attack only one scan has, whose prompt differs (another seed or objectives) or that errored in either is counted
apart and never in a rate.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError
from evaluators.core.jsonlines import json_objects
from evaluators.core.inference import paired_difference


def read_attacks(path: str | Path) -> list[dict]:
    """``attacks.jsonl`` (or the folder a scan wrote it in), each line checked for what a diff reads."""
    p = Path(path)
    f = p / "attacks.jsonl" if p.is_dir() else p
    try:
        lines = json_objects(f)
    except OSError as e:
        raise UsageError(f"{f}: cannot read it ({e.strerror or e}); give a folder `redteam --out` wrote") from None
    out = []
    for n, rec in lines:
        missing = [k for k in ("id", "risk_category", "attack_technique", "prompt", "attack_success")
                   if k not in rec]
        if missing:
            raise UsageError(f"{f}: line {n} has no field {missing[0]} (is it a scan's attacks.jsonl?)")
        out.append(rec)
    return out


def _group(pairs: list[tuple[dict, dict]]) -> dict[str, Any]:
    before = [float(a["attack_success"]) for a, _ in pairs]
    after = [float(b["attack_success"]) for _, b in pairs]
    rec: dict[str, Any] = {"pairs": len(pairs),
                           "newly_broken": [a["id"] for a, b in pairs if b["attack_success"] and not a["attack_success"]],
                           "fixed": [a["id"] for a, b in pairs if a["attack_success"] and not b["attack_success"]]}
    d = paired_difference(before, after, binary=True)
    if d is not None:
        rec.update(asr_before=sum(before) / len(pairs), asr_after=sum(after) / len(pairs), difference=d.diff,
                   ci95=[d.low, d.high], mcnemar_p=d.p_value)
    return rec


def diff_scans(before: list[dict], after: list[dict]) -> dict[str, Any]:
    """The paired comparison of two scans' attacks: overall and per category x technique, the attacks newly
    broken and fixed, ASR before and after, the paired difference with its 95% interval and McNemar's p; and the
    attacks left out, by why."""
    b_by = {a["id"]: a for a in before}
    a_by = {a["id"]: a for a in after}
    left_out = {"only_before": sorted(set(b_by) - set(a_by)), "only_after": sorted(set(a_by) - set(b_by)),
                "prompt_differs": [], "no_verdict": []}
    pairs = []
    for aid, old in b_by.items():
        new = a_by.get(aid)
        if new is None:
            continue
        if old["prompt"] != new["prompt"]:
            left_out["prompt_differs"].append(aid)
        elif old["attack_success"] is None or new["attack_success"] is None:
            left_out["no_verdict"].append(aid)
        else:
            pairs.append((old, new))
    cells = []
    for key in dict.fromkeys((o["risk_category"], o["attack_technique"]) for o, _ in pairs):
        group = [(o, n) for o, n in pairs if (o["risk_category"], o["attack_technique"]) == key]
        cells.append({"risk_category": key[0], "attack_technique": key[1], **_group(group)})
    return {"overall": _group(pairs), "cells": cells, "left_out": left_out}
