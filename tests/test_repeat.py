"""Repeated judging (``--repeat K``) against a loopback judge that answers the same prompt differently on
each asking: every judgment its own call and cache entry, the row's value their mean, flips and Fleiss'
kappa across them, and a review queue of the flipping rows."""
from __future__ import annotations

import json
import threading
from collections import Counter

import numpy as np
import pytest

from evaluators import review
from evaluators.api import evaluate
from evaluators.core.agreement import fleiss_kappa
from evaluators.core.registry import get_metric
from evaluators.core.votes import combine, combined_value
from evaluators.read.repeats import repeat_agreement
from evaluators.read.view import open_view
from tests.conftest import SINGLE
from tests.judge_server import JudgeServer, expected_score
from tests.test_cli import cli


class Fickle:
    """A judge whose k-th answer to a prompt is the scripted score of ``prompt#k``: it disagrees with itself."""

    def __init__(self):
        self.asked: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, prompt: str, request: dict) -> str:
        with self.lock:
            k = self.asked[prompt]
            self.asked[prompt] += 1
        score = expected_score(prompt if k == 0 else f"{prompt}#{k}")
        return json.dumps({"reason": f"answer {k + 1}", "score": score})


def scores_of(prompt: str, k: int) -> list[int]:
    return [expected_score(prompt if j == 0 else f"{prompt}#{j}") for j in range(k)]


def test_votes_combine_by_kind():
    assert combined_value(get_metric("coherence"), [3, 4, 4]) == pytest.approx(11 / 3)  # a score: the mean
    assert combined_value(get_metric("violence"), [1, 6, 2, 5]) == 2  # a severity: the lower median, on the scale
    assert combined_value(get_metric("protected_material"), [1, 0]) == 1  # a label's tie counts as found
    assert combined_value(get_metric("protected_material"), [0, 0, 1]) == 0
    out, reason = combine(get_metric("coherence"), [{"coherence": 2.0}, {"coherence": 5.0}, {"coherence": 4.0}],
                          ["low", "high", "mid"])
    assert out["votes"] == [2.0, 5.0, 4.0] and out["coherence"] == pytest.approx(11 / 3)
    assert reason == "3 judgments (2, 5, 4); judgment 3: mid"  # the judgment nearest the mean speaks


def test_each_repeat_is_its_own_call_and_cache_entry(store):
    fickle = Fickle()
    with JudgeServer(responder=fickle) as server:
        from evaluators.judge.config import JudgeConfig

        judge = JudgeConfig(model="fickle", provider="compatible", base_url=server.url)
        first = evaluate(SINGLE, ["coherence"], judge=judge, store=store, api_key="k", repeat=3)
        assert len(server.calls) == 31 * 3
        prompts = sorted(fickle.asked)
        assert len(prompts) == 31 and set(fickle.asked.values()) == {3}
        view = open_view(store, first.run_id)
        got = sorted(view.values("coherence"))
        assert got == pytest.approx(sorted(np.mean(scores_of(p, 3)) for p in prompts))
        again = evaluate(SINGLE, ["coherence"], judge=judge, store=store, api_key="k", repeat=3)
        assert len(server.calls) == 31 * 3  # every judgment came from the cache
        more = evaluate(SINGLE, ["coherence"], judge=judge, store=store, api_key="k", repeat=4)
        assert len(server.calls) == 31 * 4  # only the fourth judgment of each row was asked
    assert sorted(open_view(store, again.run_id).values("coherence")) == pytest.approx(got)
    assert sorted(open_view(store, more.run_id).values("coherence")) == pytest.approx(
        sorted(np.mean(scores_of(p, 4)) for p in prompts))
    # self-agreement: rows whose three judgments straddle the threshold (3) flip
    stats = repeat_agreement(view, "coherence")
    flipping = sum(1 for p in prompts if len({s >= 3 for s in scores_of(p, 3)}) > 1)
    assert stats["repeat"] == 3 and stats["rows"] == 31 and len(stats["flip_rows"]) == flipping
    counts = [[scores_of(p, 3).count(v) for v in range(1, 6)] for p in prompts]
    assert stats["fleiss_kappa"] == pytest.approx(fleiss_kappa(counts))
    qid = review.make_queue(store, first.run_id, view, "flips", "flips", ["coherence"], None)
    assert sorted(store.get_queue(qid)["rows"]) == stats["flip_rows"]
    detail = view.cell("coherence", stats["flip_rows"][0])
    assert detail.reason.startswith("3 judgments (") and "judgment 1 of 3" in detail.turns[0].raw


def test_cli_repeat_writes_self_agreement_keys(tmp_path):
    with JudgeServer(responder=Fickle()) as server:
        out = tmp_path / "out"
        p = cli("run", SINGLE, "--metrics", "coherence", "--out", out, "--judge-base-url", server.url,
                "--repeat", "2", "--quiet")
        assert p.returncode == 0, p.stderr
        assert len(server.calls) == 62
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["coherence.repeat"] == 2
    assert 0 <= metrics["coherence.repeat_flip_share"] <= 1 and "coherence.repeat_fleiss_kappa" in metrics
    bad = cli("run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "o2", "--judge-base-url", "http://127.0.0.1:9",
              "--repeat", "0")
    assert bad.returncode == 2 and "--repeat takes 1 to 20" in bad.stderr


def _scripted(offset: int):
    """A judge that scores every prompt its scripted score moved by ``offset`` (kept within 1-5)."""
    def respond(prompt: str, request: dict) -> str:
        s = min(5, max(1, expected_score(prompt) + offset))
        return json.dumps({"reason": f"offset {offset}", "score": s})
    return respond


def test_a_jury_of_three_judges(tmp_path, monkeypatch):
    krippendorff = pytest.importorskip("krippendorff")
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    from evaluators.read.repeats import jury_agreement

    with JudgeServer(responder=_scripted(0)) as a, JudgeServer(responder=_scripted(1)) as b, \
            JudgeServer(responder=_scripted(-2)) as c:
        judges = tmp_path / "judges.toml"
        judges.write_text("".join(f'[{n}]\nbase_url = "{s.url}"\nmodel = "m-{n}"\n' for n, s in
                                  (("ann", a), ("bea", b), ("cy", c))))
        monkeypatch.setenv("EVAL_JUDGES", str(judges))
        out = tmp_path / "out"
        p = cli("run", SINGLE, "--metrics", "coherence", "--out", out, "--judge", "ann", "--judge", "bea",
                "--judge", "cy", "--quiet")
        assert p.returncode == 0, p.stderr
        assert len(a.calls) == len(b.calls) == len(c.calls) == 31  # every task asked of every judge
        prompts = [x["messages"] for x in a.calls]
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    from tests.judge_server import prompt_text

    base = {prompt_text({"messages": m}): expected_score(prompt_text({"messages": m})) for m in prompts}
    triples = [[min(5, max(1, s + o)) for o in (0, 1, -2)] for s in base.values()]
    assert sorted(r["outputs.coherence.coherence"] for r in rows) == sorted(float(sorted(t)[1]) for t in triples)
    metrics = json.loads((out / "metrics.json").read_text())
    data = np.array(triples, dtype=float).T
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert metrics["coherence.jury_judges"] == 3 and metrics["coherence.jury_alpha"] == pytest.approx(ref)
    splits = sum(1 for t in triples if len({v >= 3 for v in t}) > 1)
    assert metrics["coherence.jury_split_share"] == pytest.approx(splits / 31)
    assert "coherence.repeat" not in metrics  # a jury is not one judge repeated
    from evaluators.store.store import Store

    store = Store()
    rid = store.run_rows()[0]["id"]
    got = jury_agreement(open_view(store, rid), "coherence")
    pairs = {(x, y): k for x, y, k in got["pairs"]}
    assert pairs[("ann", "bea")] == pytest.approx(sklearn_metrics.cohen_kappa_score(
        [t[0] >= 3 for t in triples], [t[1] >= 3 for t in triples]))




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_new_evaluation_asks_each_row_k_times(home_store, fresh_caches):
    from tests.apptest import app
    from tests.conftest import wait_for_run

    with JudgeServer(responder=Fickle()) as server:
        at = app("pages/new.py")
        did = next(d["id"] for d in home_store.list_datasets() if d["name"].startswith("rag_single_turn"))
        at = app("pages/new.py", at=at, dataset=did)
        next(c for c in at.checkbox if c.label == "Coherence").check()
        at.run()
        next(t for t in at.text_input if t.label == "Base URL").input(server.url)
        next(t for t in at.text_input if t.label == "Model (Azure: deployment)").input("fickle")
        at.run()
        next(n for n in at.number_input if n.label == "Judge each row K times").set_value(2)
        at.run()
        assert any("the figures are 2 times one judgment's" in c.value for c in at.caption)
        next(b for b in at.button if b.label == "Start evaluation").click()
        at.run()
        rid = home_store.run_rows()[0]["id"]
        assert wait_for_run(home_store, rid)["status"] == "completed"
        assert home_store.get_run(rid)["spec"]["repeat"] == 2 and len(server.calls) == 62
