"""Experiments (issue 36): two prompts over the same questions in one command, each variant a run named
"experiment · variant", compared on the same rows with the paired test (McNemar's exact test, checked against
SciPy's binomial test) in the CLI's experiment.json and on the Compare page; the target's cost apart from the
judge's and inside the budget; a target function named on the command line; a questions-only file refused by a
metric that needs answers, saying how to get them. The target is a real OpenAI-compatible server on loopback whose
answers are planted, so every number is computed here by hand."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from scipy.stats import binomtest

from tests.apptest import app, shown_text
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import JudgeServer, prompt_text

QUESTIONS = [{"input": f"Which colour is item {k}?", "ideal": f"item {k} is {c}"}
             for k, c in enumerate(["red", "green", "blue", "amber", "violet"], 1)]
RIGHT = {"A": {0, 1}, "B": {0, 1, 2, 3}}  # the rows each prompt's answers get right (an ideal answer: F1 1)


def planted(prompt: str, request: dict) -> str:
    """Prompt A's and prompt B's messages start "A:" / "B:"; each answers its rows right, the others "no idea"."""
    text = request["messages"][-1]["content"]
    variant, question = text.split(": ", 1)
    k = next(i for i, q in enumerate(QUESTIONS) if q["input"] == question)
    return QUESTIONS[k]["ideal"] if k in RIGHT[variant] else "no idea"


@pytest.fixture
def target():
    with JudgeServer(responder=planted) as s:
        yield s


def _files(tmp_path):
    data = tmp_path / "colours.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    for v in "AB":
        (tmp_path / f"{v}.md").write_text(f"[user]\n{v}: {{{{ query }}}}")
    return data


def _env(tmp_path) -> dict:
    env = env_for_subprocess(EVAL_HOME=str(tmp_path / "home"))
    env.pop("EVAL_DATABASE_URL", None)
    return env


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "evaluators", "run", *args], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=180)


def test_two_prompts_are_one_experiment_compared_on_the_same_rows_with_the_paired_test(tmp_path, target, monkeypatch,
                                                                                    fresh_caches):
    data = _files(tmp_path)
    p = _run(tmp_path, str(data), "--metrics", "f1_score", "--out", str(tmp_path / "out"), "--target-base-url",
             target.url, "--target-model", "app", "--target-prompt", str(tmp_path / "A.md"), "--target-prompt",
             str(tmp_path / "B.md"), "--target-price", "2,1,8", "--experiment", "colours")
    assert p.returncode == 0, p.stderr
    assert len(target.calls) == 10  # five questions, each asked once by each prompt
    exp = json.loads((tmp_path / "out" / "experiment.json").read_text())
    assert [v["name"] for v in exp["variants"]] == ["A", "B"] and exp["baseline"] == "A"
    [cmp] = exp["comparisons"]
    # by hand: A passes rows 1-2, B rows 1-4 (F1 1 against 0); B - A = 2/5; discordant pairs: 0 one way, 2 the other
    assert cmp["difference"] == pytest.approx(0.4) and cmp["rows"] == 5
    assert cmp["p_value"] == pytest.approx(binomtest(2, 2, 0.5).pvalue)  # McNemar's exact test = binomial on 2
    assert cmp["sentence"].startswith("B's pass rate (≥ 0.5) on f1_score is 40.0 points higher than A's")
    assert cmp["sentence"] in p.stdout
    for v, right in RIGHT.items():
        metrics = json.loads((tmp_path / "out" / v / "metrics.json").read_text())
        assert metrics["f1_score.f1_score_pass_rate"] == pytest.approx(len(right) / 5)
        # the target's cost apart from the judge's: its tokens at 2 and 8 USD per 1M (the server counts them)
        sent = [c for c in target.calls if c["messages"][-1]["content"].startswith(v + ":")]
        prompt_tokens = sum(target.token_count(prompt_text(c)) for c in sent)
        completion_tokens = sum(target.token_count(planted("", c)) for c in sent)
        assert (metrics["target.calls"], metrics["target.prompt_tokens"]) == (5, prompt_tokens)
        assert metrics["target.usd"] == pytest.approx((2 * prompt_tokens + 8 * completion_tokens) / 1e6, abs=1e-6)
    from evaluators.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 'home' / 'evals.db'}")
    runs = {r["name"]: r["id"] for r in store.list_runs()}
    assert set(runs) == {"colours · A", "colours · B"}
    # the Compare page says the same sentence, naming the two prompts
    monkeypatch.setenv("EVAL_DATABASE_URL", f"sqlite:///{tmp_path / 'home' / 'evals.db'}")
    at = app("pages/compare.py", base=runs["colours · A"], runs=runs["colours · B"])
    assert "B's pass rate (≥ 0.5) on f1_score is 40.0 points higher than A's" in shown_text(at)


def test_the_budget_covers_the_target_and_a_budget_without_its_price_is_refused(tmp_path, target):
    data = _files(tmp_path)
    base = [str(data), "--metrics", "f1_score", "--out", str(tmp_path / "out"), "--target-base-url", target.url,
            "--target-model", "app", "--target-prompt", str(tmp_path / "A.md")]
    p = _run(tmp_path, *base, "--budget", "1")
    assert p.returncode == 2 and "needs the price of the target model 'app'" in p.stderr and not target.calls
    # with --target-param max_tokens=5 each call is estimated at 5 completion tokens (input is free here) at
    # 100,000 USD per 1M: 0.5 USD; a call leaves while what was spent plus 0.5 stays within 1 USD. By hand, from
    # the tokens the server bills (A's answers in order, one call at a time):
    price, spent, sent = 0.1, 0.0, 0
    for k in range(5):
        if spent + 5 * price > 1.0:
            break
        spent += price * target.token_count(QUESTIONS[k]["ideal"] if k in RIGHT["A"] else "no idea")
        sent += 1
    p = _run(tmp_path, *base, "--budget", "1", "--target-price", "0,0,100000", "--concurrency", "1",
             "--target-param", "max_tokens=5")
    assert p.returncode == 1 and "past the budget of $1.0000" in p.stderr
    assert not (tmp_path / "out" / "metrics.json").exists() and len(target.calls) == sent == 2


def test_a_target_function_answers_from_the_command_line(tmp_path):
    data = _files(tmp_path)
    (tmp_path / "my_app.py").write_text("def answer(input):\n    return {'response': 'item 1 is red' if 'item 1?' in input else "
                                        "'unknown'}\n")
    env = {**_env(tmp_path), "PYTHONPATH": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(data), "--metrics", "f1_score", "--out",
                        str(tmp_path / "out"), "--target-callback", "my_app:answer"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["f1_score.f1_score_pass_rate"] == pytest.approx(1 / 5)  # "item 1 is red" is the first ideal only
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(data), "--metrics", "f1_score", "--out",
                        str(tmp_path / "out2"), "--target-callback", "my_app:missing"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 2 and "--target-callback my_app:missing: cannot load it" in p.stderr


def test_a_questions_only_file_is_read_and_a_metric_needing_answers_says_how_to_get_them(tmp_path):
    data = _files(tmp_path)
    p = _run(tmp_path, str(data), "--metrics", "f1_score", "--out", str(tmp_path / "out"))
    assert p.returncode == 2 and "needs response" in p.stderr and "--target-base-url" in p.stderr


def _answer_in_dashboard(did: str, url: str, variant: str):
    at = app("pages/new.py", dataset=did)
    assert "This dataset has questions only" in shown_text(at)
    at.text_input(key="target.base_url").input(url)
    at.text_input(key="target.model").input("app")
    at.text_area(key="new.target.prompt").input(f"[user]\n{variant}: {{{{ query }}}}")
    at.text_input(key="new.target.name").input(variant)
    at.run()
    at.checkbox(key="new.metric.f1_score").check().run()  # needs a response: available, answers to come
    at.button(key="new.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]


@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the runs go to the job queue
def test_the_dashboard_answers_a_questions_only_dataset_and_compare_names_the_two_prompts(tmp_path, target, fresh_caches,
                                                                                         home_store):
    from evaluators.data.loading import load_dataset
    from tests.conftest import wait_for_run

    did = home_store.save_dataset(load_dataset(str(_files(tmp_path))))
    assert home_store.get_dataset(did).questions_only()
    app()  # (seeds the samples)
    at = app("pages/new.py", dataset=did)
    assert at.checkbox(key="new.metric.f1_score").disabled is False  # before: "needs response"
    _answer_in_dashboard(did, target.url, "A")
    _answer_in_dashboard(did, target.url, "B")
    runs = {r["name"] or "": r for r in home_store.list_runs()}
    assert len(target.calls) == 10
    ids = {}
    for run in home_store.list_runs():
        done = wait_for_run(home_store, run["id"])
        assert done["status"] == "completed"
        ids[run["spec"]["target"]["variant"]] = run["id"]
        assert run["spec"]["target"]["calls"] == 5 and "api_key" not in json.dumps(run["spec"])
    assert set(ids) == {"A", "B"} and len(runs) == 2
    for v, right in RIGHT.items():
        answered = home_store.get_dataset(home_store.get_run(ids[v])["dataset_id"])
        assert answered.name == f"colours.jsonl · {v}"
        assert [r["response"] for r in answered.records] == [q["ideal"] if k in right else "no idea"
                                                             for k, q in enumerate(QUESTIONS)]
    at = app("pages/compare.py", base=ids["A"], runs=ids["B"])
    text = shown_text(at)
    assert "B's pass rate (≥ 0.5) on f1_score is 40.0 points higher than A's" in text
    assert f"p = {binomtest(2, 2, 0.5).pvalue:.3g}" in text
    # the same questions, prompt and model again: every answer from the store's cache, no call
    _answer_in_dashboard(did, target.url, "A")
    assert len(target.calls) == 10


def test_submit_answers_each_variant_here_then_queues_it_with_its_answers(tmp_path, target, postgres):
    """submit --target-*: the submitting machine asks the target (a queue worker never holds its key), stores each
    variant's answered rows and queues its run, named and carrying the target's facts; nothing is left on disk."""
    from evaluators.store.store import Store
    from tests.test_queue import cli

    url = postgres.new_database()
    data = _files(tmp_path)
    p = cli("submit", data, "--metrics", "f1_score", "--target-base-url", target.url, "--target-model", "app",
            "--target-prompt", tmp_path / "A.md", "--target-prompt", tmp_path / "B.md", "--experiment", "colours",
            url=url, TMPDIR=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("queued run ") == 2 and len(target.calls) == 10
    store = Store(url)
    for run in store.list_runs():
        variant = run["spec"]["target"]["variant"]
        assert run["name"] == f"colours · {variant}" and run["status"] == "queued"
        answers = [r["response"] for r in store.get_dataset(run["dataset_id"]).records]
        assert answers == [q["ideal"] if k in RIGHT[variant] else "no idea" for k, q in enumerate(QUESTIONS)]
    assert not list(tmp_path.glob("evals-answers-*"))  # the answers' folder went with the submit
