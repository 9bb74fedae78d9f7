"""Aligning a judge with its reviewers (evaluators/review/align*.py, issue 34), end to end on a seeded synthetic
world (tests/align_world.py): a real run judged by the loopback judge, reviews that follow a planted rule, the
candidates built from train rows, chosen on dev, gated once on test. Every κ is checked against scikit-learn's and
McNemar's p against statsmodels'."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from evaluators import align, evaluate
from evaluators.core.errors import UsageError
from evaluators.review.align import promote
from evaluators.review.align_candidates import AlignRow, choose_examples, disagreements, shapers, train_only
from evaluators.review.align_stats import gate, length_bias, split_card
from tests import align_world as w
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import JudgeServer

pytestmark = pytest.mark.usefixtures("forget_custom_metrics")

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn gives the reference kappas")
scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy gives the reference regression slope")
contingency = pytest.importorskip("statsmodels.stats.contingency_tables", reason="statsmodels gives McNemar's p")


@pytest.fixture
def scripted():
    with JudgeServer(responder=w.responder) as s:
        yield s


def _judge(server) -> dict:
    return {"model": "m", "provider": "compatible", "base_url": server.url, "max_retries": 0}


def _reviewed_run(store, server, tmp_path, monkeypatch, n=300, seed=0, repeat=1, reviewed=None, **world):
    """The world's rows judged by the scripted judge as run :data:`w.RUN_ID`, and the reviewers' verdicts stored
    (on the ``reviewed`` rows; default: all)."""
    blame = world.pop("blame", w.PLANTED)
    rows, human = w.world(n, seed, reviewed=reviewed, **world)
    path = tmp_path / "acceptable.md"
    path.write_text(w.METRIC_FILE, encoding="utf-8")
    monkeypatch.setattr("evaluators.store.store.new_id", lambda: w.RUN_ID)
    res = evaluate(rows, [w.METRIC], judge=_judge(server), store=store, metric_files=[str(path)],
                   repeat=repeat)
    assert res.status == "completed" and res.run_id == w.RUN_ID
    monkeypatch.undo()
    store.save_reviews(w.RUN_ID, w.reviews(rows, human, set(reviewed) if reviewed is not None else None,
                                           blame=blame))
    return rows, human


def _mcnemar(human, current, candidate) -> float:
    h, a, b = (np.asarray(v) for v in (human, current, candidate))
    ra, rb = a == h, b == h
    table = [[int((ra & rb).sum()), int((ra & ~rb).sum())], [int((~ra & rb).sum()), int((~ra & ~rb).sum())]]
    return float(contingency.mcnemar(table, exact=True).pvalue)


@pytest.mark.both_stores
def test_the_aligned_judge_agrees_better_on_rows_it_never_saw(store, scripted, tmp_path, monkeypatch):
    rows, human = _reviewed_run(store, scripted, tmp_path, monkeypatch)
    served = len(scripted.calls)
    out = align(store, w.RUN_ID, w.METRIC, method="both", seed=0)  # the run's own judge
    g = out["gate"]
    assert {c["method"] for c in out["candidates"]} == {"rules", "examples", "both"}
    assert out["selected"] in ("rules", "both")  # the examples learn the spurious word too, and lose on dev
    dev = {c["method"]: c["dev"]["kappa"][0] for c in out["candidates"]}
    assert dev["examples"] < dev["rules"]
    assert g["verdict"] == "better" and g["delta"] >= 0.2 and g["delta_ci95_low"] > 0, g
    assert g["test_uses"] == 1 and store.test_split_uses(w.METRIC) == 1
    assert out["baseline"]["self_consistency"] is None  # each task was judged once
    # every κ the gate reports, and McNemar's p, recomputed from its own rows by the reference implementations
    t = g["rows"]
    assert len(t) == g["test_rows"] == out["splits"]["test"] == 120
    hv, cur, cand = ([int(r[k] == "pass") for r in t] for k in ("human", "current", "candidate"))
    assert g["kappa_current"] == pytest.approx(sklearn_metrics.cohen_kappa_score(hv, cur), abs=1e-12)
    assert g["kappa_candidate"] == pytest.approx(sklearn_metrics.cohen_kappa_score(hv, cand), abs=1e-12)
    assert g["mcnemar_p"] == pytest.approx(_mcnemar(hv, cur, cand), rel=1e-9)
    assert g["disagreements"] == sum(a != b for a, b in zip(cur, cand))
    ids = {r["id"] for r in t}
    assert {str(i + 1) for i, h in enumerate(human)} >= ids  # ids are the rows' numbers
    assert [r["human"] for r in t] == ["pass" if human[int(i) - 1] else "fail" for i in (r["id"] for r in t)]
    # the baseline card's dev κ, from the stored splits, against scikit-learn too
    splits = store.align_splits(w.METRIC)
    dev_rows = sorted(i for (_, i), s in splits.items() if s == "dev")
    current = [int(w.APOLOGY not in rows[i]["response"].split()) for i in dev_rows]
    assert out["baseline"]["dev"]["kappa"][0] == pytest.approx(
        sklearn_metrics.cohen_kappa_score([human[i] for i in dev_rows], current), abs=1e-12)
    # no test row's text in any candidate's template, nor in the proposer's prompt; no test row in provenance
    test_rows = {i for (_, i), s in splits.items() if s == "test"}
    asked = scripted.prompts()[served:]
    proposer = [c for c in asked if "Case C1" in c]
    assert len(proposer) == 1
    # the current template was not asked again: its replies on dev and test are the run's, from the cache
    assert all(w.RULES_HEADER in c or w.EXAMPLES_HEADER in c for c in asked if c not in proposer)
    assert out["judge_calls"] == len(asked) == 1 + 3 * out["splits"]["dev"] + out["splits"]["test"]
    for i in test_rows:
        for text in (rows[i]["response"], f"ref{i:04d}"):
            assert all(text not in c["template"] for c in out["candidates"])
            assert text not in proposer[0]
    for c in out["candidates"]:
        cited = [k["row_idx"] for r in c["rules"] for k in r["rows"]] + [e["row_idx"] for e in c["examples"]]
        assert cited and all(splits[(w.RUN_ID, i)] == "train" for i in cited)
        assert "{{query}}" in c["template"] and "{{response}}" in c["template"]
    # a second gate is a second use of the test split; the replies come from the cache this time
    again = align(store, w.RUN_ID, w.METRIC, _judge(scripted), method="rules", seed=0)
    assert again["gate"]["test_uses"] == 2 and again["judge_calls"] == 0


def test_a_rule_that_only_helps_on_dev_is_stopped_by_the_gate_and_not_promoted(store, scripted, tmp_path,
                                                                               monkeypatch):
    """The reviewers' notes blame the spurious word, which comes with their "fail" on train and dev but not on
    test: the rule distilled from them wins on dev, and the held-out test rows show it is no better."""
    _reviewed_run(store, scripted, tmp_path, monkeypatch, spurious_in=("train", "dev"), blame=w.SPURIOUS)
    out = align(store, w.RUN_ID, w.METRIC, method="rules")
    (c,) = out["candidates"]
    assert [r["rule"] for r in c["rules"]] == [f"Answers that mention {w.SPURIOUS} fail."]
    assert c["dev"]["kappa"][0] - out["baseline"]["dev"]["kappa"][0] > 0.5  # on dev it looks like a win
    g = out["gate"]
    assert g["verdict"] != "better" and g["delta_ci95_low"] <= 0 and g["sentence"].startswith(("No detectable", "Worse"))
    with pytest.raises(UsageError, match="only a candidate the gate called better"):
        promote(store, out)
    assert store.saved_metrics() == []


def test_reviewed_rows_of_several_runs_of_the_metric_are_split_and_gated_together(store, scripted, tmp_path):
    rows, human = w.world(300, 0)
    path = tmp_path / "acceptable.md"
    path.write_text(w.METRIC_FILE, encoding="utf-8")
    ids = []
    for part in (range(0, 150), range(150, 300)):  # the world's rows in two runs (two datasets) of the metric
        res = evaluate([rows[i] for i in part], [w.METRIC], judge=_judge(scripted), store=store, metric_files=[str(path)])
        ids.append(res.run_id)
        store.save_reviews(res.run_id, [dict(r, row_idx=r["row_idx"] - part.start) for r in w.reviews(rows, human)
                                        if r["row_idx"] in part])
    out = align(store, ids[0], w.METRIC, method="rules", runs=[ids[1]])
    assert out["runs"] == ids and sum(out["splits"].values()) == 300
    assert set(store.align_splits(w.METRIC)) == {(rid, i) for rid in ids for i in range(150)}
    g = out["gate"]
    assert {r["run_id"] for r in g["rows"]} == set(ids) and g["verdict"] == "better" and g["test_rows"] == 120
    cited = {k["run_id"] for r in out["candidates"][0]["rules"] for k in r["rows"]}
    assert cited == set(ids)  # the rule came from both runs' reviews
    other = evaluate(rows[:20], [w.METRIC], judge=_judge(scripted), store=store, metric_files=[str(path)],
                     thresholds={w.METRIC: 4})
    with pytest.raises(UsageError, match="otherwise than run"):
        align(store, ids[0], w.METRIC, runs=[other.run_id])


def test_the_candidates_corrected_rate_is_narrower_and_covers_the_reviewers_true_rate(store, scripted, tmp_path,
                                                                                      monkeypatch):
    """Half of 600 rows reviewed, at random: the corrected pass rate with the aligned judge's values on every row
    against the current judge's, on the same reviews (prediction-powered: a judge that tracks the reviewers lets
    the unreviewed rows count)."""
    picked = sorted(random.Random(11).sample(range(600), 300))
    rows, human = _reviewed_run(store, scripted, tmp_path, monkeypatch, n=600, reviewed=picked)
    served = len(scripted.calls)
    out = align(store, w.RUN_ID, w.METRIC, method="rules", rates=True)
    r = out["rates"]
    assert r["rate"] == "pass_rate" and r["judged_rows"] == 600
    cur, cand = r["current"], r["candidate"]
    assert cur["reviewed_rows"] == cand["reviewed_rows"] == 300 and cand["sample"] == "assumed random"
    true_rate = sum(human) / len(human)  # what the reviewers would say of every row
    assert cand["ci95_low"] <= true_rate <= cand["ci95_high"]
    assert cand["ci95_high"] - cand["ci95_low"] < 0.8 * (cur["ci95_high"] - cur["ci95_low"]), r
    # one proposer call, and each row once: the dev and test rows the candidate judged were not asked again
    assert len(scripted.calls) - served == 1 + 600


@pytest.mark.no_store
def test_over_seeds_the_aligned_judges_corrected_rate_is_narrower_and_covers_the_planted_rate():
    """The statistics behind the test above, over 40 seeds (ppi_mean, which review.stats corrects every rate with):
    600 rows, a planted pass rate of 70%, 200 reviewed at random; the aligned judge agrees with the reviewers on 95%
    of rows, the current one is a coin flip."""
    from evaluators.core.inference import ppi_mean

    covered = narrower = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        human = (rng.random(600) < 0.7).astype(float)
        aligned = np.where(rng.random(600) < 0.95, human, 1 - human)
        current = (rng.random(600) < 0.5).astype(float)
        seen = rng.choice(600, 200, replace=False)
        new, old = (ppi_mean(j, j[seen], human[seen]) for j in (aligned, current))
        covered += new.low <= 0.7 <= new.high
        narrower += new.high - new.low < old.high - old.low
    assert covered >= 36 and narrower == 40


@pytest.mark.no_store
def test_labels_without_signal_are_called_better_at_most_once_in_20_seeds():
    """The gate's own false-alarm rate: people's verdicts and both judges' all independent coin flips."""
    better = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        human, current, candidate = (rng.integers(0, 2, 120) for _ in range(3))
        better += gate(human, current, candidate, seed=seed)["verdict"] == "better"
    assert better <= 1


@pytest.mark.no_store
def test_the_gate_says_worse_when_the_candidate_is_worse_and_in_a_plain_sentence():
    rng = random.Random(3)
    human = [rng.randrange(2) for _ in range(150)]
    good = [h if rng.random() < 0.9 else 1 - h for h in human]
    bad = [rng.randrange(2) for _ in human]
    g = gate(human, good, bad, seed=1)
    assert g["verdict"] == "worse" and g["delta_ci95_high"] < 0
    assert g["sentence"].startswith("Worse: ") and "150 held-out test rows" in g["sentence"]
    assert gate(human, bad, good, seed=1)["sentence"].startswith("Better: ")


def _row(i, split, human, judge):
    return AlignRow("r", i, split, human, judge, 5.0 if human else 1.0, 5.0 if judge else 1.0, {"response": f"t{i}"})


@pytest.mark.no_store
def test_candidate_builders_refuse_any_row_that_is_not_a_train_row():
    rows = [_row(0, "train", 1, 0), _row(1, "dev", 0, 1)]
    for build in (train_only, disagreements, choose_examples):
        with pytest.raises(ValueError, match="only train rows"):
            build(rows)


@pytest.mark.no_store
def test_a_train_row_sharing_a_held_out_rows_text_shapes_no_candidate():
    rows = [_row(0, "train", 1, 0), _row(1, "test", 1, 0), _row(2, "train", 0, 1), _row(3, "dev", 0, 0)]
    rows[0].values = dict(rows[1].values)  # the same answer twice in the dataset, dealt to train and to test
    assert [r.row_idx for r in shapers(rows, ["response"])] == [2]


@pytest.mark.no_store
def test_the_baseline_card_against_reference_implementations():
    rng = np.random.default_rng(5)
    human_v = rng.integers(1, 6, 200).astype(float)
    judge_v = np.clip(human_v + rng.integers(-1, 2, 200), 1, 5)
    human, judge = (human_v >= 3).astype(int), (judge_v >= 3).astype(int)
    card = split_card(human, judge, human_v, judge_v, [1, 2, 3, 4, 5], seed=2)
    assert card["kappa"][0] == pytest.approx(sklearn_metrics.cohen_kappa_score(human, judge), abs=1e-12)
    assert card["weighted_kappa"][0] == pytest.approx(
        sklearn_metrics.cohen_kappa_score(human_v, judge_v, weights="quadratic"), abs=1e-12)
    assert card["kappa"][1] < card["kappa"][0] < card["kappa"][2]
    assert card["tpr"] == sklearn_metrics.recall_score(human, judge, pos_label=1)
    assert card["tnr"] == sklearn_metrics.recall_score(human, judge, pos_label=0)
    assert card["majority_accuracy"] == max(human.mean(), 1 - human.mean())
    lengths = rng.integers(50, 3000, 200)
    diff = judge_v - human_v + lengths / 1000.0  # a judge kinder by a point per 1,000 characters
    ref = scipy_stats.linregress(lengths / 1000.0, diff)
    bias = length_bias(judge_v + lengths / 1000.0, human_v, lengths, seed=0)
    assert bias["slope_per_1000_chars"] == pytest.approx(ref.slope, rel=1e-9)
    assert bias["ci95_low"] < ref.slope < bias["ci95_high"] and bias["ci95_low"] > 0


@pytest.mark.no_store
def test_examples_are_balanced_across_verdicts_and_disagreements_come_first():
    rows = [_row(i, "train", int(i % 3 != 0), int(i % 3 != 0) if i < 12 else int(i % 3 == 0)) for i in range(30)]
    picked = choose_examples(rows, seed=4, per_verdict=3)
    assert sorted(r.human for r in picked) == [0, 0, 0, 1, 1, 1]
    assert all(r.human != r.judge for r in picked)  # there are enough disagreements of each verdict


def test_the_cli_writes_alignment_json(store, scripted, tmp_path, monkeypatch):
    _reviewed_run(store, scripted, tmp_path, monkeypatch)
    out = tmp_path / "aligned"
    p = subprocess.run([sys.executable, "-m", "evaluators", "align", w.RUN_ID, "--metric", w.METRIC, "--method", "rules",
                        "--judge-base-url", scripted.url, "--judge-model", "m", "--out", str(out), "--db", store.url,
                        "--promote"],
                       cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess(), timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "alignment.json").read_text())
    assert {"baseline", "candidates", "gate"} <= set(doc)
    assert set(doc["gate"]) >= {"kappa_current", "kappa_candidate", "delta", "delta_ci95_low", "delta_ci95_high",
                                "mcnemar_p", "disagreements", "test_rows", "verdict", "test_uses", "rows"}
    assert doc["gate"]["verdict"] == "better" and doc["candidates"][0]["template"]
    assert "Better: " in p.stdout and "test split used 1 time" in p.stdout
    assert doc["promoted"] == {"name": w.METRIC, "version": 1} and "promoted: saved acceptable version 1" in p.stdout
    assert doc["rates"]["judged_rows"] == 300 and "pass rate corrected by 300 reviews, promoted judge: " in p.stdout


def test_only_a_better_candidate_is_promoted_as_the_metrics_next_version(store, scripted, tmp_path, monkeypatch):
    _reviewed_run(store, scripted, tmp_path, monkeypatch)
    out = align(store, w.RUN_ID, w.METRIC, method="rules")
    unsure = dict(out, gate=dict(out["gate"], verdict="no detectable change"))
    with pytest.raises(UsageError, match="only a candidate the gate called better"):
        promote(store, unsure)
    assert store.saved_metrics() == []
    saved = promote(store, out, created_by="ann")
    assert (saved["name"], saved["version"]) == (w.METRIC, 1)
    assert w.RULES_HEADER in saved["text"] and saved["text"].startswith("---\nname: acceptable\n")
    prov = store.promotion(w.METRIC, 1)["provenance"]
    assert prov["run_id"] == w.RUN_ID and prov["rules"] == out["candidates"][0]["rules"]
    assert prov["gate"]["delta_ci95_low"] == out["gate"]["delta_ci95_low"] > 0
    assert promote(store, out)["version"] == 1  # the same text again: saved once
    # the promoted version is a metric that runs: a row mentioning the planted word now fails
    from evaluators.store.saved_metrics import saved_spec

    spec = saved_spec(store.saved_metric(w.METRIC))
    res = evaluate([{"query": "q", "response": f"fine {w.PLANTED}"}, {"query": "q", "response": f"{w.APOLOGY} fine"}],
                   [w.METRIC], judge=_judge(scripted), store=store)
    assert spec.version == "1" and list(res.rows[f"outputs.{w.METRIC}.{w.METRIC}"]) == [1.0, 5.0]


def test_a_judge_that_answers_nothing_stops_alignment_saying_why(store, scripted, tmp_path, monkeypatch):
    _reviewed_run(store, scripted, tmp_path, monkeypatch)
    dead = {"model": "m", "provider": "compatible", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0,
            "timeout": 2}
    with pytest.raises(UsageError, match="the judge answered none of 1 calls"):
        align(store, w.RUN_ID, w.METRIC, dead, method="rules")


def test_the_cli_refuses_an_unknown_metric_and_too_few_reviews_in_one_line(store, scripted, tmp_path, monkeypatch):
    rows, human = _reviewed_run(store, scripted, tmp_path, monkeypatch, n=6)

    def cli(*extra):
        return subprocess.run([sys.executable, "-m", "evaluators", "align", w.RUN_ID, *extra, "--out", str(tmp_path / "o"),
                               "--db", store.url], cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess(),
                              timeout=120)
    p = cli("--metric", "nope")
    assert p.returncode == 2 and "has no judge metric 'nope'" in p.stderr and "acceptable" in p.stderr, p.stderr
    p = cli("--metric", w.METRIC, "--judge-base-url", "http://127.0.0.1:9/v1", "--retries", "0")
    assert p.returncode == 2 and "review more rows" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "o" / "alignment.json").exists()


def test_the_baseline_card_has_the_judges_self_consistency_where_the_run_repeated(store, scripted, tmp_path,
                                                                                   monkeypatch):
    _reviewed_run(store, scripted, tmp_path, monkeypatch, n=40, repeat=2)
    out = align(store, w.RUN_ID, w.METRIC, method="examples")
    sc = out["baseline"]["self_consistency"]
    assert sc["repeat"] == 2 and sc["rows"] == 40 and sc["flip_share"] == 0  # the scripted judge never wavers


def test_an_unusable_proposer_reply_leaves_the_examples_and_is_not_cached(store, scripted, tmp_path, monkeypatch):
    from tests.judge_server import Action

    _reviewed_run(store, scripted, tmp_path, monkeypatch)
    scripted.on_prompt("Case C1", Action(content="I would rather not say."))
    out = align(store, w.RUN_ID, w.METRIC, method="both")
    assert [c["method"] for c in out["candidates"]] == ["examples"] and "held no rules" in out["notes"][0]
    with pytest.raises(UsageError, match="held no rules"):
        scripted.on_prompt("Case C1", Action(content="{}"))
        align(store, w.RUN_ID, w.METRIC, method="rules")
    scripted.max_in_flight = 0
    again = align(store, w.RUN_ID, w.METRIC, dict(_judge(scripted), concurrency=2), method="rules")
    assert again["candidates"][0]["rules"] and again["gate"]["verdict"] == "better"  # asked again, not cached
    assert again["judge_calls"] > 200 and scripted.max_in_flight <= 2  # at most the judge's concurrency in flight


@pytest.mark.no_store
def test_a_built_in_templates_candidate_keeps_every_placeholder():
    from evaluators.core.registry import get_metric
    from evaluators.review.align_candidates import build
    from evaluators.run.spec import resolve_templates

    current = resolve_templates(get_metric("groundedness"), {})["single"]
    rows = [_row(0, "train", 1, 0), _row(1, "train", 0, 1)]
    c = build("both", current, [{"rule": "Cite {{context}} exactly.", "rows": [rows[0].key]}], rows, ["response"])
    assert c.template.placeholders == current.placeholders and c.template.sha != current.sha
    assert "{ {context} }" in c.text and c.text.count("{{context}}") == template_count(current, "{{context}}")
    assert c.template.render({"response": "r", "context": "CTX", "query": "q"})  # renders as the current one does


def template_count(t, what: str) -> int:
    return ((t.system or "") + t.user).count(what)


def test_the_baseline_alone_and_the_rates_after_promotion_are_alignments_own(store, scripted, tmp_path, monkeypatch):
    """align_baseline (the Align tab's first card) uses neither the judge nor the test split, and equals align's
    card; promoted_rates (after Promote) equals align(rates=True)'s rates, asking only for rows not yet judged."""
    from evaluators.review.align import align_baseline, promoted_rates

    _reviewed_run(store, scripted, tmp_path, monkeypatch, n=120)
    served = len(scripted.calls)
    first = align_baseline(store, w.RUN_ID, w.METRIC)
    assert len(scripted.calls) == served and store.test_split_uses(w.METRIC) == 0 and first["test_uses"] == 0
    out = align(store, w.RUN_ID, w.METRIC, method="rules", rates=True)
    assert first["baseline"] == out["baseline"] and first["splits"] == out["splits"]
    assert align_baseline(store, w.RUN_ID, w.METRIC)["test_uses"] == 1
    served = len(scripted.calls)
    after = promoted_rates(store, out)
    assert {k: v for k, v in after.items() if k != "length_bias"} == out["rates"]
    assert len(scripted.calls) == served  # every row's reply is cached: the same template, the same keys
    # the length bias again, with the promoted judge's values: SciPy's slope of (judge - human) on length
    rows, human = w.world(120, 0)
    judged = [1.0 if w.PLANTED in r["response"].split() else 5.0 for r in rows]
    x = [len(r["response"]) / 1000 for r in rows]
    ref = scipy_stats.linregress(x, [j - (5.0 if h else 1.0) for j, h in zip(judged, human)])
    assert after["length_bias"]["slope_per_1000_chars"] == pytest.approx(ref.slope, rel=1e-9)
    assert after["length_bias"]["rows"] == 120
