"""Over-refusal (issue 33): harmless requests of each category, rewritten by the scan's strategies, sent to the same
target and judged for a refusal. The scripted target helps with harmless requests asked plainly and refuses them
reversed (it "resists" by refusing whatever looks odd); the scripted judge reads the refusal from the reply."""
from __future__ import annotations

import json
import math
import re

import pytest

from evaluators.judge.config import JudgeConfig
from evaluators.suites.redteam.objectives import RISK_CATEGORIES, read_seed_prompts
from evaluators.suites.redteam.refusal import HARMLESS
from evaluators.suites.redteam.scan import scan
from tests.judge_server import Action, JudgeServer
from tests.safety_judge import safety_responder
from tests.test_redteam_scan import OBJECTIVES, seeds_file

pytestmark = pytest.mark.usefixtures("forget_custom_metrics")  # (a scan registers its label judges)

RAW = json.loads(HARMLESS.read_text(encoding="utf-8"))
TEXTS = {cat: [e["messages"][0]["content"] for e in RAW if e["metadata"]["target_harms"][0]["risk-type"] == cat]
         for cat in RISK_CATEGORIES}


def target(prompt: str, request: dict) -> str:
    text = request["messages"][-1]["content"]
    if any(text == t for ts in TEXTS.values() for t in ts):
        return "Sure, here is some help with that."
    return "I can't help with that."  # reversed harmless requests and every attack


def judge(prompt: str, request: dict) -> str:
    if "REFUSAL CHECK" not in prompt:
        return safety_responder(prompt, request)
    reply = re.search(r"Assistant's reply to check:\n(.*?)\n\nAnswer with", prompt, re.S).group(1)
    return json.dumps({"reason": "scripted", "refused": reply.startswith("I can't")})


def wilson95(k: int, n: int) -> list[float]:
    z = 1.959964
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))]


def test_the_harmless_set_mirrors_each_category_in_the_sdk_format():
    got = read_seed_prompts(HARMLESS)
    attacks = {o.text for o in read_seed_prompts(HARMLESS.with_name("objectives.json"))}
    for cat in RISK_CATEGORIES:
        assert len(TEXTS[cat]) >= 10 and len(set(TEXTS[cat])) == len(TEXTS[cat])
    assert len(got) == len(RAW) and not attacks & {o.text for o in got}


def test_over_refusal_is_the_refusal_rate_on_harmless_requests_per_technique(home_store, tmp_path):
    failing = TEXTS["violence"][0]  # asked plainly, it fails at the target: neither refused nor not
    with JudgeServer(responder=target) as app, JudgeServer(responder=judge) as j:
        app.on_prompt(failing, *[Action(status=400) for _ in range(3)])
        res = scan(JudgeConfig(model="app", provider="compatible", base_url=app.url),
                   JudgeConfig(model="judge", provider="compatible", base_url=j.url), store=home_store,
                   risk_categories=list(OBJECTIVES), strategies=["flip"], objectives_file=seeds_file(tmp_path),
                   over_refusal=True, out=tmp_path / "out")  # (10 a category: every harmless request)
    lines = [json.loads(x) for x in (tmp_path / "out" / "harmless.jsonl").read_text().splitlines()]
    assert lines == res.harmless and len(lines) == 2 * 10 * 2
    assert [h["objective"] for h in lines[::2]] == TEXTS["violence"] + TEXTS["self_harm"]
    for h in lines:
        want = None if h["prompt"] == failing else h["attack_technique"] == "flip"
        assert h["refused"] is want and (h["error"] is None) == (want is not None)
    cells = {(c["risk_category"], c["attack_technique"]): c for c in res.scorecard["over_refusal"]}
    for cat in OBJECTIVES:
        base, flip = cells[cat, "baseline"], cells[cat, "flip"]
        n = 9 if cat == "violence" else 10
        assert (base["requests"], base["n"], base["refused"], base["errors"]) == (10, n, 0, 10 - n)
        assert (flip["n"], flip["refused"], flip["refusal_rate"]) == (10, 10, 1.0)
        assert flip["refusal_rate_ci95"] == pytest.approx(wilson95(10, 10))
        assert base["refusal_rate_ci95"] == pytest.approx(wilson95(0, n))
    # the attacks' scorecard is the attacks' alone
    assert res.scorecard["risk_category_summary"][0]["overall_total"] == 12
    assert "over_refusal" in res.runs


def test_without_over_refusal_no_harmless_request_is_sent(home_store, tmp_path):
    with JudgeServer(responder=target) as app, JudgeServer(responder=judge) as j:
        res = scan(JudgeConfig(model="app", provider="compatible", base_url=app.url),
                   JudgeConfig(model="judge", provider="compatible", base_url=j.url), store=home_store,
                   risk_categories=["violence"], strategies=["flip"], objectives_file=seeds_file(tmp_path),
                   out=tmp_path / "out")
        assert len(app.calls) == 6 and not any("REFUSAL CHECK" in p for p in j.prompts())
    assert res.harmless == [] and "over_refusal" not in res.scorecard
    assert not (tmp_path / "out" / "harmless.jsonl").exists()


def test_the_cli_writes_harmless_jsonl_with_over_refusal(tmp_path):
    from tests.test_redteam_cli import _cli

    with JudgeServer(responder=target) as app, JudgeServer(responder=judge) as j:
        p = _cli(tmp_path, "--target-base-url", app.url, "--target-model", "app", "--risk-categories", "sexual",
                 "--strategies", "flip", "--objectives", "2", "--over-refusal", "--judge-base-url", j.url,
                 "--judge-model", "judge", "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in (tmp_path / "out" / "harmless.jsonl").read_text().splitlines()]
    assert [h["refused"] for h in lines] == [False, True] * 2
    card = json.loads((tmp_path / "out" / "scorecard.json").read_text())
    assert [c["refusal_rate"] for c in card["over_refusal"]] == [0.0, 1.0]


def test_understanding_tells_a_refusal_from_a_garbled_reply(home_store, tmp_path):
    """Reversed: objective 0 answered harmfully, objective 1 refused naming it, objective 2 garbled (not understood).
    base64: every answer garbled. The judge reads "I don't follow" as not understood."""
    from tests.test_redteam_scan import SENT

    v = OBJECTIVES["violence"]
    replies = {SENT["flip"](v[0]): "Here is how. [violence:6]", SENT["flip"](v[1]): "I won't help you hurt anyone.",
               SENT["flip"](v[2]): "I don't follow: what does this mean?"}

    def app_reply(prompt: str, request: dict) -> str:
        text = request["messages"][-1]["content"]
        return replies.get(text, "I don't follow: what does this mean?" if text.endswith("=") else "No.")

    def understanding_judge(prompt: str, request: dict) -> str:
        if "UNDERSTANDING CHECK" not in prompt:
            return judge(prompt, request)
        reply = re.search(r"Assistant's reply to check:\n(.*?)\n\nAnswer with", prompt, re.S).group(1)
        return json.dumps({"reason": "scripted", "understood": not reply.startswith("I don't follow")})

    with JudgeServer(responder=app_reply) as app, JudgeServer(responder=understanding_judge) as j:
        res = scan(JudgeConfig(model="app", provider="compatible", base_url=app.url),
                   JudgeConfig(model="judge", provider="compatible", base_url=j.url), store=home_store,
                   risk_categories=["violence"], strategies=["flip", "base64"], objectives_file=seeds_file(tmp_path),
                   understanding=True, out=tmp_path / "out")
        asked = sum("UNDERSTANDING CHECK" in p for p in j.prompts())
    assert asked == 6  # every attack but baseline's
    got = {(a["objective"], a["attack_technique"]): a for a in res.attacks}
    assert [got[t, "flip"]["understood"] for t in v] == [True, True, False]
    assert [got[t, "base64"]["understood"] for t in v] == [False] * 3
    assert all(got[t, "baseline"]["understood"] is None for t in v)
    cells = {c["attack_technique"]: c for c in res.scorecard["understanding"]}
    assert (cells["flip"]["n"], cells["flip"]["understood"], cells["flip"]["successes_when_understood"]) == (3, 2, 1)
    assert cells["flip"]["asr_when_understood"] == 0.5 and cells["flip"]["understood_rate_ci95"] == pytest.approx(
        wilson95(2, 3))
    assert (cells["base64"]["understood"], cells["base64"]["asr_when_understood"]) == (0, None)
    line = json.loads((tmp_path / "out" / "attacks.jsonl").read_text().splitlines()[1])
    assert list(line)[-3:] == ["understood", "understood_reason", "understood_error"] and line["understood"] is True
