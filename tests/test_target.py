"""Answers from a target (issue 36): a file of questions only (an OpenAI Evals file's input and ideal) answered by a
model under test, then judged; each answer asked once (a killed run asks the target only for what it had not
answered); from Python, the Azure SDK's ``target`` function with its ``${target.response}`` mapping. The target is
a real OpenAI-compatible server on loopback answering "ANSWER <question>", so every expected answer and F1 is
computed here by hand."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import JudgeServer
from tests.procs import wait_until

QUESTIONS = [{"input": "What is 2+2?", "ideal": "4"},
             {"input": "What is the capital of France?", "ideal": "Paris is the capital of France."},
             {"input": "Name a primary colour.", "ideal": "Red"},
             {"input": "Who wrote Hamlet?", "ideal": "Shakespeare wrote Hamlet."},
             {"input": "What is H2O?", "ideal": "Water"}]


def answering(prompt: str, request: dict) -> str:
    return "ANSWER " + request["messages"][-1]["content"]  # the user's message: the question


@pytest.fixture
def target():
    with JudgeServer(responder=answering) as s:
        yield s


def _file(tmp_path) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return str(path)


def _env(tmp_path) -> dict:
    """The CLI's store: a SQLite file under the test's home in both passes (the kill test reads it directly)."""
    env = env_for_subprocess(EVAL_HOME=str(tmp_path / "home"))
    env.pop("EVAL_DATABASE_URL", None)
    return env


def _cli(tmp_path, out, target, *extra):
    return subprocess.Popen([sys.executable, "-m", "evaluators", "run", _file(tmp_path), "--metrics", "f1_score",
                             "--out", str(out), "--target-base-url", target.url, "--target-model", "app", *extra],
                            cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_questions_file_is_answered_by_the_target_then_judged_and_answers_are_asked_once(tmp_path, target):
    p = _cli(tmp_path, tmp_path / "out", target)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    answers = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    assert [a["response"] for a in answers] == ["ANSWER " + q["input"] for q in QUESTIONS]
    assert [a["input"] for a in answers] == [q["input"] for q in QUESTIONS] and len(target.calls) == 5
    usage = json.loads((tmp_path / "out" / "target.json").read_text())
    assert (usage["calls"], usage["cached"], usage["failed_rows"], usage["model"]) == (5, 0, 0, "app")
    # F1 of each answer against its ideal, by hand (lower case, punctuation and articles out; shared words):
    # "answer what is capital of france" / "paris is capital of france": 4 shared, P 4/6, R 4/5 -> 8/11;
    # "answer who wrote hamlet" / "shakespeare wrote hamlet": 2 shared, P 2/4, R 2/3 -> 4/7; the others share none
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["f1_score.f1_score"] == pytest.approx((8 / 11 + 4 / 7) / 5)
    assert "target app: 5 answers (5 asked, 0 from the cache)" in err
    # the same questions, target and prompt again: every answer from the store, no call
    p = _cli(tmp_path, tmp_path / "again", target)
    assert p.wait(timeout=120) == 0 and len(target.calls) == 5
    # another prompt is another target: asked again, its template filled from the row
    prompt = tmp_path / "prompt.md"
    prompt.write_text("[system]\nAnswer in one word.\n[user]\nQ: {{ query }}")
    p = _cli(tmp_path, tmp_path / "prompted", target, "--target-prompt", str(prompt))
    assert p.wait(timeout=120) == 0 and len(target.calls) == 10
    assert target.calls[-1]["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert {c["messages"][-1]["content"] for c in target.calls[5:]} == {f"Q: {q['input']}" for q in QUESTIONS}


def test_a_killed_run_asks_the_target_only_for_the_answers_it_had_not_stored(tmp_path, target):
    target.hold_calls(after=2)  # two questions answered, the other three wait: the run is killed meanwhile
    p = _cli(tmp_path, tmp_path / "out", target)
    db = tmp_path / "home" / "evals.db"

    def stored() -> int:
        try:
            with sqlite3.connect(db) as c:
                return c.execute("select count(*) from judge_cache").fetchone()[0]
        except sqlite3.Error:
            return 0

    wait_until(lambda: stored() == 2 and target.held == 3, 60, "two answers stored, three held")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    target.release()
    first = len(target.calls)
    p = _cli(tmp_path, tmp_path / "out", target)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert len(target.calls) - first == 3  # only the three never stored
    assert "5 answers (3 asked, 2 from the cache)" in err
    answers = [json.loads(line)["response"] for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    assert answers == ["ANSWER " + q["input"] for q in QUESTIONS]


def test_a_target_that_fails_leaves_nothing_judged_and_says_which_row(tmp_path):
    with JudgeServer(responder=answering) as broken:
        from tests.judge_server import Action

        broken.on_prompt("What is H2O?", Action(status=400))  # refused: not retried
        p = _cli(tmp_path, tmp_path / "out", broken, "--retries", "0")
        out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "the target did not answer 1 of 5 questions (first: row 5:" in err
    assert not (tmp_path / "out" / "metrics.json").exists() and not (tmp_path / "out" / "answers.jsonl").exists()


def test_evaluate_takes_the_sdk_s_target_function_and_its_mapping(tmp_path, home_store):
    from evaluators import evaluate

    seen = []

    def app(input: str) -> dict:  # as the SDK calls a target: the row's columns its parameters name
        seen.append(input)
        return {"response": "ANSWER " + input, "tokens": 3}

    res = evaluate(_file(tmp_path), ["f1_score"], column_mapping={"response": "${target.response}"}, target=app,
                   store=home_store)
    assert seen == [q["input"] for q in QUESTIONS]
    assert res.metrics["f1_score.f1_score"] == pytest.approx((8 / 11 + 4 / 7) / 5)
    assert list(res.rows["inputs.target.response"]) == ["ANSWER " + q["input"] for q in QUESTIONS]
    with pytest.raises(Exception, match="must return a dict"):
        evaluate(_file(tmp_path), ["f1_score"], target=lambda input: "text", store=home_store)


def test_a_questions_file_with_a_broken_row_is_refused_naming_it_before_any_call(tmp_path, target):
    bad = tmp_path / "questions.jsonl"
    bad.write_text('{"input": "What is 2+2?", "ideal": "4"}\nnot json\n')
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(bad), "--metrics", "f1_score", "--out",
                        str(tmp_path / "out"), "--target-base-url", target.url, "--target-model", "app"], cwd=ROOT,
                       env=_env(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "questions.jsonl, row 2: broken JSON line" in p.stderr and not target.calls
