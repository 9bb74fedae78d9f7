"""The WildBench pages through Streamlit's AppTest and in headless Chromium, on a real store.

Data: a score run and a both-orders pairwise run judged by the loopback server, and a hand-made
pairwise eval-result file imported as published judgments. Expected numbers are worked out by hand.
"""
from __future__ import annotations

import json
import re

import pytest

from evaluators import Store, evaluate
from evaluators.suites.wildbench import import_files
from tests.browser import ARGS, CHROMIUM, free_port, settle  # noqa: F401
from tests.test_dashboard_e2e import app as live_app, shot  # noqa: F401
from tests.apptest import app
from tests.test_wildbench_import import _pairwise_file

pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

CHECK = ["Is it correct?"]
EVIL = "<b>bold</b> **not markdown** <script>alert(1)</script>"


def _judge(prompt, request):
    if "<|begin_of_response_A|>" in prompt:
        a = re.search(r"<\|begin_of_response_A\|>(.*?)<\|end_of_response_A\|>", prompt, re.S).group(1)
        return json.dumps({"analysis of A": "A-side " + a.strip()[:12], "analysis of B": "B-side note",
                           "reason of A>B": "", "reason of B>A": "", "reason of A=B": "",
                           "choice": "A+" if "BIAS" in prompt else ("A++" if "GOOD" in a else "B++")})
    score = 8 if "first" in prompt else 6
    return json.dumps({"strengths": "s", "weaknesses": "w", "score": str(score)})


def _seed(store: Store, judge_config, tmp_path):
    score_rows = [{"user_query": "first question", "checklist": CHECK, "model_output": "an answer", "model": "mine",
                   "primary_tag": "Math", "secondary_tags": ["Coding & Debugging"]},
                  {"user_query": "second question", "checklist": CHECK, "model_output": "another", "model": "mine",
                   "primary_tag": "Math", "secondary_tags": []}]
    evaluate(score_rows, ["wildbench_score"], judge=judge_config, store=store)
    pair_rows = [{"user_query": "Which? " + EVIL, "checklist": CHECK, "candidate_A": "GOOD " + EVIL, "candidate_B": "meh",
                  "model_A": "mine", "model_B": "ref-x"},
                 {"user_query": "BIAS check", "checklist": CHECK, "candidate_A": "one", "candidate_B": "two",
                  "model_A": "mine", "model_B": "ref-x"}]
    res = evaluate(pair_rows, ["wildbench_pairwise"], judge=judge_config, store=store,
                   options={"wildbench_pairwise": {"both_orders": True}})
    import_files(store, [_pairwise_file(tmp_path)])
    return res.run_id


def test_leaderboard_and_inspector_pages(home_store, judge_server, judge_config, tmp_path):
    judge_server.responder = _judge
    app()  # first start: the store and the samples
    pair_run = _seed(home_store, judge_config, tmp_path)
    import streamlit as st

    st.cache_data.clear()  # the run list is cached for 2 s; a user's next look would see the new runs

    at = app("pages/leaderboard.py")
    scores = at.dataframe[0].value
    mine = scores[scores["model"] == "mine"].iloc[0]
    assert mine["WB_score"] == pytest.approx(40)  # mean(8, 6) = 7 -> (7-5)*20
    assert mine["Math & Data Analysis"] == pytest.approx(40) and mine["Coding & Debugging"] == pytest.approx(60)
    assert mine["task_macro"] == pytest.approx((40 * 1 + 60 * 1.25) / 4.75)

    at = app("pages/leaderboard.py", lbtab="WB-Reward", ref="ref-x")
    rewards = at.dataframe[-1].value  # the WB-Reward tab comes second
    row = rewards[rewards["model"] == "mine"].iloc[0]
    # pair 1: A++ then (swapped) B++ -> +100; pair 2: A+ both orders -> a flip, a tie
    assert row["WB_reward"] == pytest.approx(50) and (row["win_much"], row["tie"]) == (1, 1)
    at = app("pages/leaderboard.py", lbtab="WB-Reward", ref="claude-3-haiku-20240307", K="-1")
    row = at.dataframe[-1].value.iloc[0]
    assert row["model"] == "my-model" and row["WB_reward"] == pytest.approx(-12.5)  # hand-made file at K=-1

    at = app("pages/pairwise.py", run=pair_run, row="1")
    texts = [t.value for t in at.text]
    assert "GOOD " + EVIL in texts  # shown verbatim, as text
    assert not any(EVIL in m.value for m in at.markdown)  # never through Markdown
    assert any("- Is it correct?" == t for t in texts)
    verdicts = at.dataframe[1].value
    assert list(verdicts["judge's label"]) == ["A++", "B++"]
    assert any("both orders agree" in t for t in texts)
    at = app("pages/pairwise.py", run=pair_run, row="2")
    assert any("flipped with the order" in t.value for t in at.text)


def test_browser_walks_leaderboard_and_inspector(live_app, browser, tmp_path):  # noqa: F811
    if not CHROMIUM.exists():
        pytest.skip("no chromium")
    url, store = live_app
    from evaluators.judge.config import JudgeConfig
    from tests.judge_server import JudgeServer

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    settle(page, "Runs")  # first start creates the store
    with JudgeServer(_judge) as server:
        cfg = JudgeConfig(model="loopback", provider="compatible", base_url=server.url, max_retries=1)
        pair_run = _seed(store, cfg, tmp_path)
    ids = ",".join(r["id"] for r in store.list_runs())
    page.goto(url + f"/leaderboard?runs={ids}")
    settle(page, "WB-Score")
    page.get_by_text("mine").first.wait_for()
    shot(page, "wildbench-leaderboard")
    page.get_by_role("tab", name="WB-Reward").click()
    settle(page, "Reference model")
    page.get_by_text("win much").first.wait_for()
    shot(page, "wildbench-rewards")
    page.goto(url + f"/pairwise?run={pair_run}&row=1")
    settle(page, "Response B")
    assert page.get_by_text("GOOD " + EVIL).count() >= 1  # the literal text, not rendered HTML
    assert page.locator("b", has_text="bold").count() == 0
    page.get_by_text("both orders agree").first.wait_for()
    shot(page, "wildbench-pairwise")
    page.close()




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_pairwise_both_orders_started_from_the_dashboard(home_store, judge_server):
    from evaluators.data.loading import load_dataset
    from tests.conftest import wait_for_run

    judge_server.responder = _judge
    app()
    rows = [{"user_query": f"q{n}", "checklist": CHECK, "candidate_A": "GOOD" if n else "x",
             "candidate_B": "y" if n else "GOOD",
             "model_A": "mine", "model_B": "ref-x"} for n in range(3)]
    did = home_store.save_dataset(load_dataset(rows, name="pairs.jsonl"))
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.wildbench_pairwise").check().run()
    at.checkbox(key="new.opt.wildbench_pairwise.both_orders").check().run()
    at.number_input(key="new.opt.wildbench_pairwise.length_penalty").set_value(-1).run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.run()
    assert {m.label: m.value for m in at.metric}["Judge calls"] == "6"  # 3 pairs x 2 orders
    at.button(key="new.start").click().run()
    run = home_store.list_runs()[0]
    assert run["spec"]["options"] == {"wildbench_pairwise": {"length_penalty": -1, "both_orders": True}}
    assert wait_for_run(home_store, run["id"])["status"] == "completed"
    from evaluators.read.results import open_results

    m = open_results(home_store, run["id"]).metrics()
    # row 0: GOOD is B -> B++ straight and A++ swapped: -100 for A in both; rows 1-2: GOOD is A -> +100
    assert m["wildbench_pairwise.WB_reward"] == pytest.approx(100 / 3) and m["wildbench_pairwise.length_penalty"] == -1
    assert m["wildbench_pairwise.flip_rate"] == 0
    at = app("pages/results.py", run=run["id"], row="1")  # the generic pages read the pairwise run too
    assert {x.label: x.value for x in at.metric}["Rows"] == "3"
