"""Import of published WildBench judgments, checked against WildBench's published leaderboard numbers.

The real files live in ../shared/fixtures/wildbench (skipped cleanly when absent). Pairwise
per-instance files are not published there, so the pairwise import is checked on a small hand-made
file, and the reward formula and the K=-1 / K=500 length rule against the published count tables.
"""
from __future__ import annotations

import json
import math
import statistics

import pytest

from evaluators.read.results import open_results
from evaluators.core.wb_rules import GROUP_WEIGHTS, reward_from_counts, task_macro
from evaluators.suites.wildbench import ImportFormatError, import_files
from tests.test_cli import cli

PUBLISHED = {"gpt-3.5-turbo-0125": (32.2776, 1023, 1844.14), "gemma-7b-it": (10.1758, 1024, 1726.34),
             "reka-core-20240501": (41.0352, 1024, 2592.59)}  # LEADERBOARD.md: WB_score, total, Length


@pytest.fixture
def wb_dir(shared_dir):
    d = shared_dir / "fixtures" / "wildbench"
    if not d.is_dir():
        pytest.skip("../shared/fixtures/wildbench is not present")
    return d


def _score_files(wb_dir):
    return sorted((wb_dir / "eval_results" / "v2.0625" / "score.v2" / "eval=gpt-4o-2024-05-13").glob("*.json"))


def test_import_reproduces_published_wb_scores(wb_dir, tmp_path, new_store_url):
    db = new_store_url("evals")
    p = cli("wildbench", "import", *_score_files(wb_dir), "--out", tmp_path / "lb", "--db", db)
    assert p.returncode == 0, p.stderr
    board = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert set(board) == set(PUBLISHED)
    for model, (wb, total, length) in PUBLISHED.items():
        assert round(board[model]["WB_score"], 4) == wb
        assert board[model]["records"] == total
        assert round(board[model]["Length"], 2) == length
        lo, hi = board[model]["WB_score_ci95"]
        assert lo < wb < hi
    # importing again keeps the runs (no duplicates)
    p2 = cli("wildbench", "import", _score_files(wb_dir)[0], "--out", tmp_path / "lb2", "--db", db)
    assert p2.returncode == 0 and p2.stdout.startswith("kept ")


def test_imported_runs_read_like_our_own(wb_dir, store):
    files = _score_files(wb_dir)
    runs, board = import_files(store, [files[1]])  # gpt-3.5-turbo-0125
    res = open_results(store, runs[0].run_id)
    m = res.metrics()
    assert round(m["wildbench_score.WB_score"], 4) == 32.2776 and m["wildbench_score.scored_rows"] == 1023
    row = res.row(0)
    raw = json.loads(files[1].read_text())[0]
    assert row["outputs.wildbench_score.wildbench_score"] == float(raw["score"])
    assert row["outputs.wildbench_score.wildbench_score_strengths"] == raw["parsed_result"]["strengths"]
    assert row["inputs.model_output"] == raw["model_output"]
    run = store.get_run(runs[0].run_id)
    assert run["status"] == "completed" and "imported" in run["name"]
    # the bootstrap interval agrees with the normal approximation on 1,023 records (within 10%)
    scores = [float(r["score"]) for r in json.loads(files[1].read_text())]
    half = 1.96 * 20 * statistics.stdev(scores) / math.sqrt(len(scores))
    lo, hi = board["gpt-3.5-turbo-0125"]["WB_score_ci95"]
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)


def test_published_category_scores_give_the_published_task_macro(wb_dir):
    stats = json.loads((wb_dir / "leaderboard" / "data_dir" / "all_stat_wildbench.-1.json").read_text())
    for model in PUBLISHED:
        s = stats[model]
        cats = {g: s[f"WB_score.{g}"] for g in GROUP_WEIGHTS}
        assert task_macro(cats) == pytest.approx(s["WB_score.task_macro"], abs=1e-9)


@pytest.mark.parametrize("ref", ["gpt4t", "haiku", "llama"])
def test_reward_formula_and_length_rule_against_published_counts(wb_dir, ref):
    data = wb_dir / "leaderboard" / "data_dir"
    off = json.loads((data / f"pairwise-{ref}-K=-1.json").read_text())
    on = json.loads((data / f"pairwise-{ref}-K=500.json").read_text())
    checked = 0
    for model, a in off.items():
        b = on[model]
        for t in (a, b):
            assert reward_from_counts(t, t["total"]) == pytest.approx(100 * t["reward"], abs=1e-9)
            assert task_macro(t["task_categorized_rewards"]) == pytest.approx(t["task_macro_reward"], abs=1e-12)
        # the length rule only turns slight wins and losses into ties: clear outcomes and the number of
        # counted pairs are the same with and without it
        assert (a["win_much"], a["lose_much"], a["total"]) == (b["win_much"], b["lose_much"], b["total"])
        assert a["win"] + a["tie"] + a["lose"] == b["win"] + b["tie"] + b["lose"]
        assert b["win"] <= a["win"] and b["lose"] <= a["lose"] and b["tie"] >= a["tie"]
        checked += 1
    assert checked > 40


def test_published_mixture_and_reward_score_average(wb_dir):
    for k in (-1, 500):
        stats = json.loads((wb_dir / "leaderboard" / "data_dir" / f"all_stat_wildbench.{k}.json").read_text())
        for model in PUBLISHED:
            s = stats[model]
            refs = [s[f"{r}_reward.K={k}"] for r in ("haiku", "llama", "gpt4t")]
            assert sum(refs) / 3 == pytest.approx(s[f"mixture_of_rewards.K={k}"], abs=1e-9)
            macro = sum(s[f"{r}_reward.task_macro.K={k}"] for r in ("haiku", "llama", "gpt4t")) / 3
            assert macro == pytest.approx(s[f"task_macro_reward.K={k}"], abs=1e-9)
            assert (s["WB_score.task_macro"] + macro) / 2 == pytest.approx(s["RewardScore_Avg"], abs=1e-9)


# ---------------------------------------------------------------- pairwise files, hand-made
def _pairwise_file(tmp_path):
    folder = tmp_path / "eval=judge-x" / "ref=claude-3-haiku-20240307"
    folder.mkdir(parents=True)
    mine, ref = "org/my-model", "claude-3-haiku-20240307"
    recs = [
        # my model shown as A wins slightly while 700 chars longer: a tie at K=500, a win (+50) at K=-1
        {"session_id": "s1", "model_A": mine, "model_B": ref, "winner": mine, "extent": 1,
         "model_outputs": {mine: "x" * 1200, ref: "y" * 500},
         "parsed_result": {"analysis of A": "long", "analysis of B": "short", "choice": "A+"}},
        # the reference shown as A wins clearly: -100 (stored as the swapped order)
        {"session_id": "s2", "model_A": ref, "model_B": mine, "winner": ref, "extent": 2,
         "model_outputs": {ref: "good", mine: "bad"}, "parsed_result": {"choice": "A++"}},
        {"session_id": "s3", "model_A": mine, "model_B": ref, "winner": "tie", "extent": 0,
         "model_outputs": {mine: "same", ref: "same"}, "parsed_result": {"choice": "A=B"}},
        # the reference's response was truncated: left out of the counts, 0 in a denominator of 4
        {"session_id": "s4", "model_A": ref, "model_B": mine, "winner": mine, "extent": 1,
         "model_outputs": {ref: "long text... (truncated)", mine: "short"}, "parsed_result": {"choice": "B+"}},
    ]
    path = folder / "my-model.json"
    path.write_text(json.dumps(recs))
    return path


def test_pairwise_import_by_hand(tmp_path, store):
    path = _pairwise_file(tmp_path)
    runs, board = import_files(store, [path], 500)
    r = board["my-model"]["rewards"]["claude-3-haiku-20240307"]
    assert [r[k] for k in ("win_much", "win", "tie", "lose", "lose_much")] == [0, 0, 2, 0, 1]
    assert r["WB_reward"] == pytest.approx(-100 / 4)  # (0 - 100 + 0 + 0) / 4 records
    assert board["my-model"]["mixture_of_rewards"] == pytest.approx(-25)
    res = open_results(store, runs[0].run_id)
    key = "outputs.wildbench_pairwise.wildbench_pairwise_"
    rows = res.rows()
    assert [x[key + "reward"] for x in rows] == [0, -100, 0, 50]
    assert [x[key + "choice"] for x in rows] == ["A+", "B++", "A=B", "A+"]  # A is always my model
    assert [x[key + "choice_swapped"] for x in rows] == [None, "A++", None, "B+"]  # as the judge said it
    assert rows[0][key + "length_adjusted"] is True and rows[0]["inputs.candidate_A"] == "x" * 1200

    _, off = import_files(store, [path], -1)  # the same judgments, K=-1
    r = off["my-model"]["rewards"]["claude-3-haiku-20240307"]
    assert [r[k] for k in ("win_much", "win", "tie", "lose", "lose_much")] == [0, 1, 1, 0, 1]
    assert r["WB_reward"] == pytest.approx((50 - 100) / 4)


def test_pairwise_import_from_the_cli_writes_rewards(tmp_path, new_store_url):
    path = _pairwise_file(tmp_path)
    p = cli("wildbench", "import", path, "--out", tmp_path / "lb", "--db", new_store_url("e"),
            "--length-penalty", "-1")
    assert p.returncode == 0, p.stderr
    board = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert board["my-model"]["rewards"]["claude-3-haiku-20240307"]["WB_reward"] == pytest.approx(-12.5)
    assert board["my-model"]["pairwise_records"] == 4


@pytest.mark.parametrize("records,message", [
    ([{"session_id": "s", "model_test": "m", "score": "7"}], r"m.json: record 1 \(s\) lacks model_output"),
    ([{"session_id": "s", "model_test": "m", "score": "x", "model_output": ""}], "record 1, field score"),
    ([{"session_id": "s", "model_test": "m", "score": "12", "model_output": ""}], "outside 1-10"),
    ([{"session_id": "s", "model_A": "a", "model_B": "b", "winner": "c", "extent": 1,
       "model_outputs": {"a": "", "b": ""}}], "winner/extent"),
    ([{"session_id": "s", "model_test": "m", "score": "7", "model_output": 42}], "record 1, field model_output: 42 is not text"),
    ([{"session_id": 3, "model_test": "m", "score": "7", "model_output": ""}], "record 1, field session_id: 3 is not text"),
    ([{"session_id": "s", "model_A": "a", "model_B": "b", "winner": "a", "extent": 1,
       "model_outputs": {"a": 1, "b": ""}}], "outputs of model_A and model_B must be text"),
])
def test_bad_files_are_refused_naming_record_and_field(tmp_path, store, records, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(records))
    with pytest.raises(ImportFormatError, match=message):
        import_files(store, [path])
    assert store.list_runs() == [] and store.list_datasets() == []  # nothing half-imported


def test_cli_import_error_is_one_line(tmp_path, new_store_url):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = cli("wildbench", "import", bad, "--out", tmp_path / "lb", "--db", new_store_url("e"))
    assert p.returncode == 2 and p.stderr.startswith("error: ") and "bad.json" in p.stderr
    assert not (tmp_path / "lb").exists()
