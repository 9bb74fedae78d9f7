"""Template rendering and judge-reply parsing: accept what judges really send, never guess."""
from __future__ import annotations

import json

import pytest

from evaluators.core.errors import UsageError
from evaluators.read.results import mean_ci
from evaluators.core.replies import ReplyError, parse_score_reply
from evaluators.judge.templates import load_template, parse_template

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass


@pytest.mark.parametrize("reply,score,reason", [
    ('{"reason": "clear", "score": 4}', 4, "clear"),
    ('```json\n{"reason": "ok", "score": 5}\n```', 5, "ok"),
    ('Here is my verdict:\n{"reason": "meh", "score": 2}\nThanks.', 2, "meh"),
    ('<think>maybe {"score": 1}? no, better</think>{"reason": "good", "score": 4}', 4, "good"),
    ('{"reason": "string score", "score": "3"}', 3, "string score"),
    ('{"reason": "float but whole", "score": 5.0}', 5, "float but whole"),
    ('Format: {"reason": "...", "score": 1}. Answer: {"reason": "final", "score": 3}', 3, "final"),
    ('{"explanation": "older key", "score": 2}', 2, "older key"),
])
def test_parse_accepts(reply, score, reason):
    parsed = parse_score_reply(reply, 1, 5)
    assert parsed.score == score and parsed.reason == reason


@pytest.mark.parametrize("reply,match", [
    ("", "empty"),
    ("I would give it a four.", "no JSON object"),
    ('{"reason": "too high", "score": 7}', "outside 1-5"),
    ('{"reason": "zero", "score": 0}', "outside 1-5"),
    ('{"reason": "half", "score": 3.5}', "whole number"),
    ('{"reason": "word", "score": "four"}', "not a number"),
    ('{"reason": "bool", "score": true}', "not a number"),
    ('{"reason": "no score"}', "no JSON object"),
    ("<think>I think {\"score\": 4} fits", "no JSON object"),  # unclosed think: nothing after it
])
def test_parse_refuses(reply, match):
    with pytest.raises(ReplyError, match=match):
        parse_score_reply(reply, 1, 5)


def test_render_fills_placeholders_in_both_styles():
    t = parse_template("[system]\nBe strict.\n[user]\nQ: {{ query }}\nA: {$model_output}\nC: {{context}}", "t.md")
    msgs = t.render({"query": "why?", "response": "because", "context": ""})
    assert msgs == [{"role": "system", "content": "Be strict."},
                    {"role": "user", "content": "Q: why?\nA: because\nC: (none)"}]
    assert t.placeholders == {"query", "response", "context"}


def test_unknown_placeholder_is_a_setup_error(tmp_path):
    f = tmp_path / "mine.md"
    f.write_text("Rate {{answer}} please")
    with pytest.raises(UsageError, match="mine.md: unknown placeholder"):
        load_template(str(f))
    with pytest.raises(UsageError, match="not found"):
        load_template(str(tmp_path / "missing.md"))


def test_template_hash_changes_with_text():
    a, b = parse_template("Rate {{response}}", "a"), parse_template("Rate {{response}}!", "b")
    assert a.sha != b.sha and len(a.sha) == 12


@pytest.mark.parametrize("model", ["gemma-7b-it", "gpt-3.5-turbo-0125", "reka-core-20240501"])
def test_real_wildbench_verdicts_parse_and_average_to_the_leaderboard(shared_dir, model):
    """Published gpt-4o judge outputs: parse each as the fenced JSON the template asks for (1-10)."""
    base = shared_dir / "fixtures" / "wildbench"
    entries = json.loads((base / "eval_results/v2.0625/score.v2/eval=gpt-4o-2024-05-13" / f"{model}.json").read_text())
    board = json.loads((base / "leaderboard/data_dir/score.json").read_text())[model]
    scores = []
    for e in entries:
        reply = "Analysis first.\n```\n" + json.dumps(e["parsed_result"], indent=4) + "\n```"
        parsed = parse_score_reply(reply, 1, 10)
        assert parsed.score == int(e["score"])
        scores.append(parsed.score)
    mean, lo, hi = mean_ci(scores)
    assert len(scores) == board["total"]
    assert mean == pytest.approx(board["score"], abs=1e-9)
    assert (mean - 5) * 2 == pytest.approx(board["adjusted_score"], abs=1e-9)  # WB-Score rescaling
    assert lo < mean < hi
