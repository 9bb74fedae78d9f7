"""A crescendo attack read as a timeline on the Red team page (issue 33): a scan started as the page starts one (the
CLI in a process of its own) with the crescendo strategy against the scripted attacker, target and judge of
tests/test_redteam_multiturn.py, over the bundled objectives; the page's timeline says each turn as planted there."""
from __future__ import annotations

import json
import re

import pytest

from evaluators.judge.config import JudgeConfig
from evaluators.suites.redteam import background
from evaluators.suites.redteam.objectives import load_objectives
from tests.apptest import app, shown_text
from tests.judge_server import JudgeServer
from tests.procs import wait_until
from tests.test_redteam_multiturn import judge, target

pytestmark = pytest.mark.usefixtures("fresh_caches")
BUNDLED = [o.text for o in load_objectives(["violence"], 3, 0)]


def attacker(prompt: str, request: dict) -> str:
    """As tests/test_redteam_multiturn.attacker, over the bundled objectives the scan chose."""
    system, user = (m["content"] for m in request["messages"])
    kind = "crescendo" if "crescendo technique" in system else "multi_turn"
    idx = next(i for i, text in enumerate(BUNDLED) if text in system)
    turn = int(re.search(r"Turn (\d+) of \d+\.", user).group(1))
    return f"{kind} o{idx} turn {turn} try {len(re.findall(r'^- ', user, re.M))}: tell me more"


def crescendo_scan(home_store) -> str:
    with (JudgeServer(responder=attacker) as a, JudgeServer(responder=target) as t,
          JudgeServer(responder=judge) as j):
        req = background.ScanRequest(target_base_url=t.url, target_model="app",
                                     judge=JudgeConfig(model="judge", provider="compatible", base_url=j.url),
                                     risk_categories=["violence"], strategies=["crescendo"], objectives=3, seed=0,
                                     attacker_base_url=a.url, attacker_model="attacker")
        name = background.start(home_store.url, req)
        wait_until(lambda: background.state(name)["status"] != "running", 90, f"scan {name} to end")
    s = background.state(name)
    assert s["status"] == "completed", s["log"]
    return name


def test_the_page_reads_a_crescendo_attack_turn_by_turn(home_store):
    name = crescendo_scan(home_store)
    lines = [json.loads(x) for x in (background.folder(name) / "attacks.jsonl").read_text().splitlines()]
    won = next(a for a in lines if a["attack_technique"] == "crescendo" and a["objective"] == BUNDLED[0])
    at = app("pages/redteam.py", scan=name, attack=won["id"])
    text = shown_text(at)
    # by hand from tests/test_redteam_multiturn.STEPS: kept turns 1, 2, 3; two roll-backs at turn 2; severity 6 at turn 3
    assert "3 turns kept, 2 turns rolled back; the attack succeeded at turn 3 (severity 6)." in text
    assert text.count("Turn 2 · severity 0 · refused · rolled back: the target never saw it again") == 2
    assert "Turn 3 · severity 6 · above 3: the attack succeeded here" in text
    assert "Turn 1 · severity 0" in text and "Turn 2 · severity 2" in text
    codes = [c.value for c in at.code]
    asked = [s["question"] for s in won["timeline"]]
    assert asked == [f"crescendo o0 turn {t} try {r}: tell me more" for t, r in
                     [(1, 0), (2, 0), (2, 1), (2, 2), (3, 0)]]
    assert all(q in codes for q in asked)  # each question shown as text, rolled-back ones included
    assert "Here is how. [violence:6]" in codes


def test_an_attack_that_never_gave_in_says_so(home_store):
    name = crescendo_scan(home_store)
    lines = [json.loads(x) for x in (background.folder(name) / "attacks.jsonl").read_text().splitlines()]
    refused = next(a for a in lines if a["attack_technique"] == "crescendo" and a["objective"] == BUNDLED[2])
    text = shown_text(app("pages/redteam.py", scan=name, attack=refused["id"]))
    assert "10 turns kept, 10 turns rolled back; no answer went above the threshold." in text
    assert text.count("refused · rolled back: the target never saw it again") == 10
    assert text.count("refused · kept (no roll-back left)") == 10
