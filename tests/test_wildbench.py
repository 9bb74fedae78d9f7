"""WildBench judging: input filling, reply parsing, the length rule, aggregates, both orders, CLI/Python.

Expected values are worked out by hand in the comments (or come from WildBench's own rules as
stated in its leaderboard code); the judge is the real loopback server.
"""
from __future__ import annotations

import json
import re

import pytest

from evaluators import JudgeConfig, evaluate
from evaluators.data.loading import load_dataset
from evaluators.core.errors import DataValidationError, UsageError
from evaluators.core.registry import get_metric
from evaluators.run.spec import RunSpec
from evaluators.run.planning import plan_tasks, render_judge_tasks
from evaluators.core.replies import ReplyError
from evaluators.judge.templates import parse_template
from evaluators.core.wb_rules import (EMPTY, PairRow, ScoreRow, consistent, length_rule, mixture, pairwise_aggregates,
                                      score_aggregates, shorten, task_groups)
from tests.judge_server import prompt_text
from tests.test_cli import cli

SCORE = get_metric("wildbench_score")
PAIR = get_metric("wildbench_pairwise")

CONV = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Write a haiku about rain."}]
HISTORY = "USER: Hi\n\nASSISTANT: Hello! How can I help?\n\n"  # WildBench's blocks, each then a blank line
CHECK = ["Is it 5-7-5?", "Is it about rain?"]
CHECK_TEXT = "- Is it 5-7-5?\n- Is it about rain?\n"


def _values(rows, metric="wildbench_pairwise", options=None):
    ds = load_dataset(rows)
    spec = RunSpec([metric], judge=JudgeConfig(model="x", provider="compatible", base_url="http://127.0.0.1:9/v1"),
                   options=options or {})
    tasks, skipped = plan_tasks(ds, spec, set())
    return tasks, skipped, render_judge_tasks(tasks, spec) if tasks else []


# ---------------------------------------------------------------- filling
def test_wildbench_placeholders_filled_as_wildbench_fills_them():
    t = parse_template("H[{$history}]Q[{$user_query}]A[{$candidate_A}]B[{$candidate_B}]C[{$checklist}]", "wb.md")
    long_a = " ".join(["w"] * 1001)
    rows = [{"conversation_input": CONV, "checklist": CHECK, "candidate_A": long_a, "candidate_B": "",
             "model_A": "m", "model_B": "ref"}]
    # an empty candidate_B is refused at the door only for 'response'; candidate_B is the pair's own column
    tasks, _, _ = _values(rows)
    msg = t.render(tasks[0].values)[0]["content"]
    cut = "w " * 999 + "w... (truncated)"  # 1,000 words, then WildBench's marker
    assert msg == f"H[{HISTORY}]Q[Write a haiku about rain.]A[{cut}]B[{EMPTY}]C[{CHECK_TEXT}]"


@pytest.mark.parametrize("row", [
    {"messages": CONV},
    {"history": HISTORY, "user_query": "Write a haiku about rain."},
    {"history": CONV[:2], "user_query": "Write a haiku about rain."},
], ids=["messages", "history+user_query", "history-as-messages"])
def test_every_conversation_shape_gives_the_same_inputs(row):
    tasks, _, _ = _values([{**row, "checklist": CHECK, "model_output": "Rain taps the window", "model": "m"}],
                          "wildbench_score")
    v = tasks[0].values
    assert (v["history"], v["query"], v["checklist"], v["response"]) == (
        HISTORY, "Write a haiku about rain.", CHECK_TEXT, "Rain taps the window")


def test_first_turn_has_an_empty_history_and_exactly_1000_words_stay_whole():
    words = " ".join(["w"] * 1000)
    tasks, _, _ = _values([{"conversation_input": CONV[:1], "checklist": CHECK, "candidate_A": words,
                            "candidate_B": "b"}])
    assert tasks[0].values["history"] == "" and tasks[0].values["query"] == "Hi"
    assert tasks[0].values["candidate_A"] == words and shorten(words + " x") == words + "... (truncated)"


def test_original_wildbench_template_loads_and_fills(shared_dir, tmp_path):
    """The seed is WildBench's own pairwise template file: a user may load it as is."""
    seed = next((shared_dir / "seeds").glob("001_*.txt"))
    tasks, _, _ = _values([{"conversation_input": CONV, "checklist": CHECK, "candidate_A": "Rain", "candidate_B": "Sun"}])
    msg = parse_template(seed.read_text(), seed.name).render(tasks[0].values)[-1]["content"]
    # the mirror puts "|" lines between the template's lines; each placeholder sits on a line of its own
    assert f"\n{HISTORY}\n" in msg and "\nWrite a haiku about rain.\n" in msg
    assert "\nRain\n" in msg and "\nSun\n" in msg and f"\n{CHECK_TEXT}\n" in msg
    assert "{$" not in msg


def test_both_orders_plans_the_swapped_pair_as_turn_1():
    rows = [{"conversation_input": CONV, "checklist": CHECK, "candidate_A": "AAA", "candidate_B": "BB"}]
    tasks, _, _ = _values(rows, options={"wildbench_pairwise": {"both_orders": True}})
    assert [(t.turn, t.values["candidate_A"], t.values["candidate_B"]) for t in tasks] == [(0, "AAA", "BB"), (1, "BB", "AAA")]
    assert tasks[1].facts == {"model_A": "A", "model_B": "B", "len_A": 3, "len_B": 2, "excluded": False, "groups": None}
    tasks, _, _ = _values(rows)
    assert [t.turn for t in tasks] == [0]


def test_rows_without_a_request_or_second_response_are_skipped_with_the_reason():
    _, skipped, _ = _values([{"checklist": CHECK, "candidate_A": "a", "candidate_B": "b", "user_query": None},
                             {"user_query": "q", "checklist": CHECK, "candidate_A": "a"}])
    assert [s.error for s in skipped] == [
        "no user request: give messages, conversation_input, or history with user_query",
        "no candidate_B (text) to compare with"]


def test_checklist_must_be_a_list_of_texts():
    with pytest.raises(DataValidationError) as e:
        load_dataset([{"user_query": "q", "model_output": "r", "checklist": ["ok"]},
                      {"user_query": "q", "model_output": "r", "checklist": 7}])
    assert "row 2" in str(e.value) and "checklist" in str(e.value)
    ds = load_dataset(b'user_query,model_output,checklist\nq,r,"[""a"", ""b""]"\n', name="wb.csv")
    assert ds.canonical(0)["checklist"] == ["a", "b"] and ds.availability()["wildbench_score"] == []


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize("reply,score,strengths", [
    ('{"strengths": "clear", "weaknesses": "short", "score": "7"}', 7.0, "clear"),
    ('```json\n{"strengths": "a", "weaknesses": "b", "score": 9,}\n```', 9.0, "a"),  # trailing comma
    ('Here: {"strengths": "line one\nline two", "weaknesses": "w", "score": "3"}', 3.0, "line one\nline two"),
    ('<think>{"score": 1}</think>{"strengths": "s", "weaknesses": "w", "score": 10}', 10.0, "s"),
])
def test_score_replies(reply, score, strengths):
    v = SCORE.parse_reply(reply)
    assert v.outputs["wildbench_score"] == score and v.outputs["wildbench_score_strengths"] == strengths


@pytest.mark.parametrize("reply", ['{"strengths": "s", "score": "11"}', '{"score": "[1~10]"}', "Score: 7",
                                   '{"strengths": "s"}', ""])
def test_score_replies_without_a_valid_score_are_errors(reply):
    with pytest.raises(ReplyError):
        SCORE.parse_reply(reply)


@pytest.mark.parametrize("reply,label,reward", [
    ('{"analysis of A": "a", "analysis of B": "b", "reason of A=B": "", "reason of A>B": "x", '
     '"reason of B>A": "", "choice": "A++"}', "A++", 100),
    ('{\n"analysis of A": "a",\n"choice": "B+",\n}', "B+", -50),  # the templates' own trailing comma
    ('{"analysis of A": "has "quotes" inside", "choice": "[A=B]"}', "A=B", 0),  # broken JSON: field by field
    ('verdict follows {"choice": " a+ "}', "A+", 50),
])
def test_pairwise_replies(reply, label, reward):
    v = PAIR.parse_reply(reply)
    assert (v.outputs["choice"], v.outputs["wildbench_pairwise_reward"]) == (label, reward)


@pytest.mark.parametrize("reply", ['{"choice": "A>B"}', '{"choice": "tie"}', '{"analysis of A": "a"}', "A+"])
def test_pairwise_replies_without_a_valid_choice_are_errors(reply):
    with pytest.raises(ReplyError):
        PAIR.parse_reply(reply)


# ---------------------------------------------------------------- rules
@pytest.mark.parametrize("reward,len_a,len_b,k,expected", [
    (50, 1600, 1000, 500, 0),     # A wins slightly but is 600 chars longer (> 500): tie
    (50, 1500, 1000, 500, 50),    # exactly 500 longer is not "more than K"
    (50, 1501, 1000, 500, 0),
    (50, 1000, 1600, 500, 50),    # the winner is the shorter one: kept
    (100, 5000, 10, 500, 100),    # a clear win is never changed
    (-50, 100, 700, 500, 0),      # B wins slightly while 600 longer: tie
    (-50, 700, 100, 500, -50),    # the loser is the longer one: kept
    (-100, 10, 5000, 500, -100),
    (50, 1600, 1000, -1, 50),     # K = -1 disables the rule
    (50, 1600, 1000, 0, 0),
])
def test_length_rule(reward, len_a, len_b, k, expected):
    assert length_rule(reward, len_a, len_b, k) == expected


@pytest.mark.parametrize("ab,ba,expected,flip", [
    (100, 50, 50, False), (100, 100, 100, False), (50, -50, 0, True), (-100, 50, 0, True), (0, 100, 0, False),
    (-50, -100, -50, False),
])
def test_order_consistency(ab, ba, expected, flip):
    assert consistent(ab, ba) == (expected, flip)


def test_tags_fold_into_five_groups():
    assert task_groups("Creative Writing", ["Math", "Editing", "Brainstorming"]) == ["Creative Tasks", "Math & Data Analysis"]
    assert task_groups("Information seeking", ["Advice seeking"]) == ["Information/Advice seeking"]
    assert task_groups("Others", []) == ["Creative Tasks"]


# ---------------------------------------------------------------- aggregates
CREATIVE, MATH, CODE, PLAN, INFO = ("Creative Tasks", "Math & Data Analysis", "Coding & Debugging",
                                    "Planning & Reasoning", "Information/Advice seeking")


def test_score_aggregates_by_hand():
    rows = [ScoreRow(8, 100, False, [CREATIVE, MATH]), ScoreRow(6, 300, False, [CODE, PLAN]),
            ScoreRow(3, 0, True, [CREATIVE]), ScoreRow(9, 200, False, [INFO])]
    a = score_aggregates(rows)
    assert a["WB_score"] == pytest.approx((6.5 - 5) * 20)  # mean (8+6+3+9)/4 = 6.5 -> 30
    assert a["Length"] == pytest.approx(200)  # the empty response is left out: (100+300+200)/3
    # categories leave the empty response out: Creative = only the 8
    assert (a[f"WB_score.{CREATIVE}"], a[f"WB_score.{MATH}"], a[f"WB_score.{CODE}"], a[f"WB_score.{PLAN}"],
            a[f"WB_score.{INFO}"]) == pytest.approx((60, 60, 20, 20, 80))
    # (60*0.5 + 20*1.25 + 60*1 + 80*0.75 + 20*1.25) / 4.75 = 200 / 4.75
    assert a["WB_score.task_macro"] == pytest.approx(200 / 4.75)
    lo, hi = a["WB_score_ci95"]
    assert lo <= a["WB_score"] <= hi
    assert score_aggregates(rows) == a  # a fixed seed: the same interval every time


PAIRS = [PairRow(50, 2000, 1000),   # slight win, 1000 longer: a tie at K=500, a win at K=-1
         PairRow(100, 3000, 100),   # clear win
         PairRow(-50, 900, 100),    # slight loss while the longer one: stays a loss
         PairRow(-100, 10, 10, excluded=True),  # empty or truncated: 0, not counted, still in the denominator
         PairRow(0, 10, 10)]


def test_pairwise_aggregates_by_hand():
    a = pairwise_aggregates(PAIRS, 500)
    assert a["WB_reward"] == pytest.approx((0 + 100 - 50 + 0 + 0) / 5)  # 10
    assert [a[k] for k in ("win_much", "win", "tie", "lose", "lose_much")] == [1, 0, 2, 1, 0]
    b = pairwise_aggregates(PAIRS, -1)
    assert b["WB_reward"] == pytest.approx((50 + 100 - 50) / 5)  # 20
    assert [b[k] for k in ("win_much", "win", "tie", "lose", "lose_much")] == [1, 1, 1, 1, 0]
    m = mixture({"ref1": PAIRS, "ref2": [PairRow(100, 1, 1), PairRow(-100, 1, 1)]}, 500)
    assert m["references"]["ref2"]["WB_reward"] == 0 and m["mixture_of_rewards"] == pytest.approx(5)  # (10+0)/2
    lo, hi = m["mixture_of_rewards_ci95"]
    assert lo <= 5 <= hi


# ---------------------------------------------------------------- the loopback judge, Python and CLI
def _score_reply(prompt, request):
    if "ROW-BAD" in prompt:
        return "I would give it a seven."
    score = "7" if "ROW-ONE" in prompt else 9
    return json.dumps({"strengths": f"good {score}", "weaknesses": "none", "score": score})


def test_score_metric_from_python(judge_server, judge_config, store):
    judge_server.responder = _score_reply
    rows = [{"messages": [{"role": "user", "content": f"ROW-{n} question"}], "checklist": CHECK,
             "model_output": f"answer {n}", "model": "org/my-model", "primary_tag": tag, "secondary_tags": []}
            for n, tag in (("ONE", "Math"), ("TWO", "Coding & Debugging"), ("BAD", "Math"))]
    res = evaluate(rows, ["wildbench_score"], judge=judge_config, store=store)
    out = res.rows.to_dict(orient="records")
    assert [r["outputs.wildbench_score.wildbench_score"] for r in out][:2] == [7.0, 9.0]
    assert out[0]["outputs.wildbench_score.wildbench_score_strengths"] == "good 7"
    assert out[0]["outputs.wildbench_score.wildbench_score_weaknesses"] == "none"
    assert "unusable judge reply" in out[2]["outputs.wildbench_score.wildbench_score_error"]
    bad = [r for r in store.load_results(res.run_id) if r.row_idx == 2][0]
    assert bad.status == "error" and bad.raw == "I would give it a seven."  # the raw reply is kept
    m = res.metrics
    assert m["wildbench_score.WB_score"] == pytest.approx((8 - 5) * 20)  # mean of 7 and 9
    assert m[f"wildbench_score.WB_score.{MATH}"] == pytest.approx(40)  # (7-5)*20
    assert m[f"wildbench_score.WB_score.{CODE}"] == pytest.approx(80)  # (9-5)*20
    assert m["wildbench_score.WB_score.task_macro"] == pytest.approx((40 * 1 + 80 * 1.25) / 4.75)
    assert m["wildbench_score.errored_rows"] == 1


def _content_judge(prompt, request):
    """Prefers the reply saying GOOD wherever it is shown; a request marked BIAS gets 'A+' whatever the order."""
    if "BIAS" in prompt:
        return json.dumps({"analysis of A": "first", "analysis of B": "second", "choice": "A+"})
    a = re.search(r"<\|begin_of_response_A\|>(.*?)<\|end_of_response_A\|>", prompt, re.S).group(1)
    return json.dumps({"analysis of A": "checked", "analysis of B": "checked", "reason of A>B": "GOOD",
                       "choice": "A++" if "GOOD" in a else "B++"})


def test_pairwise_both_orders_from_the_cli(judge_server, tmp_path):
    judge_server.responder = _content_judge
    data = tmp_path / "pairs.jsonl"
    rows = [{"user_query": "Which is right?", "checklist": CHECK, "candidate_A": "GOOD answer", "candidate_B": "meh",
             "model_A": "mine", "model_B": "ref"},
            {"user_query": "BIAS check", "checklist": CHECK, "candidate_A": "one", "candidate_B": "two",
             "model_A": "mine", "model_B": "ref"},
            {"user_query": "Which is right?", "checklist": CHECK, "candidate_A": "x" * 900, "candidate_B": "GOOD",
             "model_A": "mine", "model_B": "ref"}]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "out"
    p = cli("run", data, "--metrics", "wildbench_pairwise", "--out", out, "--both-orders", "--length-penalty", "100",
            "--judge-base-url", judge_server.url, "--judge-model", "loopback")
    assert p.returncode == 0, p.stderr
    assert len(judge_server.calls) == 6  # 3 pairs x 2 orders
    swapped = [t for t in judge_server.prompts() if "Which is right?" in t and "meh\n<|end_of_response_A|>" in t]
    assert len(swapped) == 1  # the pair was shown the other way round once
    got = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    key = "outputs.wildbench_pairwise.wildbench_pairwise_"
    # row 1: A++ shown straight, B++ shown swapped -> both for A: +100, consistent
    # row 2: A+ in both orders -> A then B preferred: a flip, counted as a tie
    # row 3: B++ straight and A++ swapped (GOOD is B) -> -100 for A
    assert [r[key + "reward"] for r in got] == [100, 0, -100]
    assert [r[key + "flipped"] for r in got] == [False, True, False]
    assert [r[key + "choice"] for r in got] == ["A++", "A+", "B++"]
    assert [r[key + "choice_swapped"] for r in got] == ["B++", "A+", "A++"]
    m = json.loads((out / "metrics.json").read_text())
    assert m["wildbench_pairwise.flip_rate"] == pytest.approx(1 / 3)
    assert m["wildbench_pairwise.flip_rate_ci95_low"] <= 1 / 3 <= m["wildbench_pairwise.flip_rate_ci95_high"]
    assert m["wildbench_pairwise.WB_reward"] == pytest.approx(0)  # (100 + 0 - 100) / 3
    assert m["wildbench_pairwise.length_penalty"] == 100
    assert (m["wildbench_pairwise.win_much"], m["wildbench_pairwise.tie"], m["wildbench_pairwise.lose_much"]) == (1, 1, 1)
    p = cli("wildbench", "leaderboard", "--out", tmp_path / "lb")  # over the runs in the (same) store
    assert p.returncode == 0, p.stderr
    board = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    ref = board["mine"]["rewards"]["ref"]
    assert ref["records"] == 3 and ref["WB_reward"] == pytest.approx(0) and ref["K"] == 100


def test_length_penalty_option_changes_rewards_not_judgments(judge_server, judge_config, store):
    judge_server.responder = lambda prompt, req: json.dumps({"choice": "A+"})
    rows = [{"user_query": "q", "checklist": CHECK, "candidate_A": "a" * 700, "candidate_B": "b" * 100,
             "model_A": "mine", "model_B": "ref"}]
    r500 = evaluate(rows, ["wildbench_pairwise"], judge=judge_config, store=store)
    r_off = evaluate(rows, ["wildbench_pairwise"], judge=judge_config, store=store,
                     options={"wildbench_pairwise": {"length_penalty": -1}})
    assert len(judge_server.calls) == 1  # the second run reads the cached verdict
    key = "outputs.wildbench_pairwise.wildbench_pairwise_"
    assert r500.rows.iloc[0][key + "reward"] == 0 and bool(r500.rows.iloc[0][key + "length_adjusted"])  # 600 > 500
    assert r_off.rows.iloc[0][key + "reward"] == 50
    assert r500.metrics["wildbench_pairwise.tie"] == 1 and r_off.metrics["wildbench_pairwise.win"] == 1


def test_bad_options_are_refused(tmp_path, judge_server):
    data = tmp_path / "s.jsonl"
    data.write_text(json.dumps({"user_query": "q", "checklist": CHECK, "model_output": "r"}))
    p = cli("run", data, "--metrics", "wildbench_score", "--out", tmp_path / "o", "--length-penalty", "10",
            "--judge-base-url", judge_server.url)
    assert p.returncode == 2 and "wildbench_pairwise" in p.stderr
    p = cli("run", data, "--metrics", "wildbench_score", "--out", tmp_path / "o", "--option", "wildbench_score.nope=1",
            "--judge-base-url", judge_server.url)
    assert p.returncode == 2 and "has no option 'nope'" in p.stderr
    with pytest.raises(UsageError, match="not a int"):
        PAIR.with_params({"length_penalty": "many"})
    assert not judge_server.calls


def test_only_declared_run_options_can_be_set():
    with pytest.raises(UsageError, match=r"has no option 'n' \(options: none\)"):
        get_metric("bleu").with_params({"n": 2})  # a constant of the metric, not a run option
    assert PAIR.with_params({"both_orders": "yes"}).param("both_orders") is True
    assert PAIR.with_params({"length_penalty": "-1"}).signature() == "wildbench_pairwise|v:1|length_penalty:-1|both_orders:False"
