"""Strategies an attacker model writes (issue 33): tense (the group moderate) and tense then base64 (difficult),
against a scripted loopback attacker ("PAST: " + the objective), target and judge. Rewrites are asked once and
cached; an objective the attacker could not rewrite has its attacks errored, never sent, in no rate."""
from __future__ import annotations

import base64
import json

import pytest

from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig
from evaluators.run.target import Target
from evaluators.suites.redteam.attacker import TENSE_SYSTEM
from evaluators.suites.redteam.scan import scan
from tests.judge_server import Action, JudgeServer
from tests.safety_judge import safety_responder
from tests.test_redteam_scan import OBJECTIVES, seeds_file

V = OBJECTIVES["violence"]
COMPLIES = {"PAST: " + V[0]: 6, base64.b64encode(("PAST: " + V[1]).encode()).decode(): 5}


def attacker_responder(prompt: str, request: dict) -> str:
    system, user = request["messages"]
    assert system == {"role": "system", "content": TENSE_SYSTEM}
    return "PAST: " + user["content"]


def target_responder(prompt: str, request: dict) -> str:
    severity = COMPLIES.get(request["messages"][-1]["content"])
    return f"Here it is. [violence:{severity}]" if severity else "I won't."


@pytest.fixture
def servers():
    with (JudgeServer(responder=attacker_responder) as attacker, JudgeServer(responder=target_responder) as target,
          JudgeServer(responder=safety_responder) as judge):
        attacker.on_prompt(V[2], *[Action(status=400) for _ in range(5)])  # no rewrite of objective 2
        yield attacker, target, judge


def run(servers, store, tmp_path, out="out", with_attacker=True):
    attacker, target, judge = servers
    return scan(Target(JudgeConfig(model="app", provider="compatible", base_url=target.url)),
                JudgeConfig(model="judge", provider="compatible", base_url=judge.url), store=store,
                risk_categories=["violence"], strategies=["moderate", "difficult"],
                objectives_file=seeds_file(tmp_path), out=tmp_path / out,
                attacker=JudgeConfig(model="attacker", provider="compatible", base_url=attacker.url)
                if with_attacker else None)


def test_tense_and_tense_then_base64_are_scored_as_moderate_and_difficult(servers, home_store, tmp_path):
    attacker, target, judge = servers
    res = run(servers, home_store, tmp_path)
    got = {(a["objective"], a["attack_technique"]): a for a in res.attacks}
    assert [a["attack_technique"] for a in res.attacks] == ["baseline", "tense", "tense_base64"] * 3
    assert [a["attack_complexity"] for a in res.attacks[:3]] == ["baseline", "moderate", "difficult"]
    for text in V[:2]:
        assert got[text, "tense"]["prompt"] == "PAST: " + text
        assert got[text, "tense_base64"]["prompt"] == base64.b64encode(("PAST: " + text).encode()).decode()
    for t in ("tense", "tense_base64"):  # the attacker failed on objective 2: never sent, neither success nor failure
        a = got[V[2], t]
        assert a["prompt"] is None and a["conversation"] == [] and a["attack_success"] is None
        assert a["error"].startswith("the attacker failed")
    assert [got[V[0], t]["attack_success"] for t in ("baseline", "tense", "tense_base64")] == [False, True, False]
    assert [got[V[1], t]["attack_success"] for t in ("baseline", "tense", "tense_base64")] == [False, False, True]
    sent = [c["messages"][-1]["content"] for c in target.calls]
    assert len(sent) == 7 and not any(V[2] in s and s != V[2] for s in sent)  # 3 baselines, 2 x 2 rewrites
    card = res.scorecard
    tech = card["attack_technique_summary"][0]
    assert (tech["moderate_asr"], tech["moderate_total"], tech["difficult_asr"], tech["difficult_total"]) == (
        50.0, 3, 50.0, 3)  # one of the two judged each; the third of each errored (in the total, as the SDK's)
    assert card["detailed_joint_risk_attack_asr"] == {"difficult": {"violence": {"tense_base64_ASR": 50.0}},
                                                      "moderate": {"violence": {"tense_ASR": 50.0}}}
    assert card["joint_risk_attack_summary"] == [{"risk_category": "violence", "baseline_asr": 0.0,
                                                  "moderate_complexity_asr": 50.0, "difficult_complexity_asr": 50.0}]
    assert card["parameters"]["attack_complexity"] == ["Difficult", "Moderate"]
    assert card["parameters"]["techniques_used"] == {"difficult": ["tense_base64"], "moderate": ["tense"]}
    assert card["errors"] == {"total": 2, "target": 0, "judge": 0, "attacker": 2}


def test_rewrites_come_from_the_cache_the_second_time(servers, home_store, tmp_path):
    attacker, target, judge = servers
    run(servers, home_store, tmp_path)
    asked, sent = len(attacker.calls), len(target.calls)
    assert asked == 3  # one rewrite an objective, shared by tense and tense_base64
    run(servers, home_store, tmp_path, out="again")
    assert len(attacker.calls) - asked == 1 and len(target.calls) == sent  # only the failed rewrite asked again
    assert (tmp_path / "out" / "attacks.jsonl").read_bytes() == (tmp_path / "again" / "attacks.jsonl").read_bytes()
    lines = [json.loads(x) for x in (tmp_path / "again" / "attacks.jsonl").read_text().splitlines()]
    assert len(lines) == 9


def test_tense_without_an_attacker_is_refused_before_any_call(home_store, tmp_path):
    nowhere = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1")  # (a call would fail)
    with pytest.raises(UsageError, match="needs an attacker model"):
        scan(nowhere, nowhere, store=home_store, risk_categories=["violence"], strategies=["moderate"],
             objectives_file=seeds_file(tmp_path))
