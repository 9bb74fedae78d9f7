"""A seeded synthetic world for alignment tests: rows, reviewers who follow a planted rule, and a loopback judge
scripted to follow whatever rules or examples its prompt carries.

The reviewers fail an answer that mentions ``zorblax`` (5% of their verdicts flipped) and say so in their notes.
The current judge, with no rule or example in its prompt, fails answers that apologise ("sorry"), which has
nothing to do with the reviewers' verdicts. A spurious word, ``indeed``, comes with the reviewers' "fail" on the
train rows only (elsewhere it is random): a judge that learns from train examples can pick it up.
"""
from __future__ import annotations

import json
import random
import re

from evaluators.review.align_candidates import EXAMPLES_HEADER, RULES_HEADER  # noqa: F401 (the tests read them here)
from evaluators.store.align_splits import DEFAULT_SHARES, deal, row_hash

RUN_ID = "alignrun0001"
METRIC = "acceptable"
PLANTED, APOLOGY, SPURIOUS = "zorblax", "sorry", "indeed"
METRIC_FILE = """---
name: acceptable
description: Whether a support answer is acceptable to our reviewers, 1 (no) to 5 (yes).
fields: [query, response]
kind: score
range: [1, 5]
threshold: 3
reply_key: score
reason_key: reason
---
[system]
You grade the answers of a customer-support assistant.
[user]
Question: {{query}}
<answer>
{{response}}
</answer>
Grade the answer from 1 (unacceptable) to 5 (fine). Answer with one JSON object: {"reason": "<why>", "score": <1-5>}
"""


def _words(rng: random.Random, n: int) -> list[str]:
    return [f"w{rng.randrange(3000):04d}" for _ in range(n)]


def world(n: int = 300, seed: int = 0, noise: float = 0.05, reviewed: list[int] | None = None,
          spurious_in: tuple[str, ...] = ("train",)) -> tuple[list[dict], list[int]]:
    """(dataset rows, the reviewers' verdicts 1 pass / 0 fail, on every row), the splits the verdicts of the
    ``reviewed`` rows (default: all) make for :data:`RUN_ID` predicted here (as the store deals them) so the
    spurious word goes with "fail" on the ``spurious_in`` splits only (default: train)."""
    rng = random.Random(seed)
    planted = [rng.random() < 0.4 for _ in range(n)]
    human = [int(not p) if rng.random() >= noise else int(p) for p in planted]
    strata = {i: "pass" if h else "fail" for i, h in enumerate(human)}
    splits = {}
    shown = set(range(n) if reviewed is None else reviewed)
    for stratum in ("fail", "pass"):
        mine = sorted(((RUN_ID, i) for i in range(n) if strata[i] == stratum and i in shown),
                      key=lambda k: row_hash(seed, k[0], k[1], METRIC))
        splits |= {k[1]: s for k, s in deal(mine, dict.fromkeys(("train", "dev", "test"), 0), DEFAULT_SHARES).items()}
    rows = []
    for i in range(n):
        words = _words(rng, 6) + [f"ref{i:04d}"]
        if planted[i]:
            words.append(PLANTED)
        if rng.random() < 0.35:
            words.append(APOLOGY)
        spurious = (rng.random() < (0.85 if human[i] == 0 else 0.05)) if splits.get(i) in spurious_in else rng.random() < 0.3
        if spurious:
            words.append(SPURIOUS)
        rng.shuffle(words)
        rows.append({"query": f"question {i} " + " ".join(_words(rng, 3)), "response": " ".join(words)})
    return rows, human


def reviews(rows: list[dict], human: list[int], only: list[int] | None = None, judge_fails_on=APOLOGY,
            blame: str = PLANTED) -> list[dict]:
    """The reviewers' verdicts (5 pass, 1 fail) on the ``only`` rows (default: all), with a note where they
    overrule the current judge, naming ``blame`` where the answer has it (the planted word, or the spurious one
    for reviewers who read too much into a coincidence)."""
    out = []
    for i, (r, h) in enumerate(zip(rows, human)):
        if only is not None and i not in only:
            continue
        judge_pass = judge_fails_on not in r["response"].split()
        note = None
        if h != judge_pass:
            note = (f"it mentions {blame}, which we never allow" if not h and blame in r["response"].split() else
                    "apologising is fine" if h else "just not good")
        out.append(dict(row_idx=i, metric=METRIC, reviewer="ann", value=5.0 if h else 1.0, note=note))
    return out


def _answer(prompt: str) -> str:
    return prompt.rsplit("<answer>", 1)[1].split("</answer>", 1)[0]


def _learned_markers(prompt: str) -> set[str]:
    """Words the prompt's examples teach: in all but at most one "fail" example, in no "pass" one."""
    section = prompt.split(EXAMPLES_HEADER, 1)[1].split("[user]", 1)[0]
    fails, passes = [], []
    for block in re.findall(r"response: (.*?)\nReviewers' verdict: (pass|fail)", section):
        (fails if block[1] == "fail" else passes).append(set(block[0].split()))
    if len(fails) < 2:
        return set()
    seen_in_pass = set().union(*passes) if passes else set()
    counts: dict[str, int] = {}
    for f in fails:
        for w in f:
            counts[w] = counts.get(w, 0) + 1
    return {w for w, c in counts.items() if c >= len(fails) - 1 and w not in seen_in_pass}


def responder(prompt: str, request: dict) -> str:
    """The scripted proposer and judge (see the module's docstring)."""
    if '{"rules": [' in prompt and "Case C1" in prompt:  # the proposer: a rule from the notes naming the word
        cited = re.findall(r"Case (C\d+)\n(?:.*\n)*?  people's note: ([^\n]*)", prompt)
        rules = []
        for word in (PLANTED, SPURIOUS):
            cases = [c for c, note in cited if word in note]
            if cases:
                rules.append({"rule": f"Answers that mention {word} fail.", "cases": cases})
        return json.dumps({"rules": rules})
    words = set(_answer(prompt).split())
    if RULES_HEADER in prompt:
        banned = set(re.findall(r"- Answers that mention (\w+) fail", prompt))
        fail = bool(words & banned)
    elif EXAMPLES_HEADER in prompt:
        fail = bool(words & _learned_markers(prompt))
    else:
        fail = APOLOGY in words
    return json.dumps({"reason": "scripted", "score": 1 if fail else 5})
