"""Issue 24, what a new user meets in the browser, through Streamlit's AppTest: the Datasets preview under a
remapped field, the metrics kept on New evaluation, the WildBench import on the Leaderboard page and the
wording of counts, costs, headings and disabled buttons. Each test fails without its fix. The browser's side
(wrapping, headings as drawn, the upload in Chromium) is in tests/test_newuser_browser.py."""
from __future__ import annotations

import json

import pytest

from tests.apptest import app
from tests.conftest import wait_for_run
from tests.test_dashboard_rest import sample_id

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches


def preview_of(at):
    return next(d.value for d in at.dataframe if d.value.index.name == "row")


# ---------------------------------------------------------------- 1. a remapped field beside a column of its name
def test_the_preview_follows_a_field_remapped_away_from_a_column_of_its_name(home_store):
    # a "response" column (empty on row 2) and the response the user means to score, in "answer"
    rows = [{"query": f"q{i}", "response": "" if i == 1 else f"draft {i}", "answer": f"final {i}"} for i in range(3)]
    at = app("pages/datasets.py", allow_errors=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    at.file_uploader(key="datasets.upload").set_value(("drafts.jsonl", data, "application/octet-stream")).run()
    fid = next(s.key for s in at.selectbox if s.key.endswith(".response")).rsplit(".", 2)[1]
    assert at.selectbox(key=f"datasets.map.{fid}.response").value == "response"  # detected by its name
    assert [(p["row"], p["field"]) for _, p in next(d.value for d in at.dataframe if "problem" in d.value).iterrows()] \
        == [(2, "response")]  # the empty draft on row 2 is what the check found
    at.selectbox(key=f"datasets.map.{fid}.response").set_value("answer").run()
    # the field is read from "answer"; the "response" column beside it is not read, and both show as such
    frame = preview_of(at)
    assert list(frame.columns) == ["query", "response ← answer", "response (not used)"]
    assert list(frame["response ← answer"]) == ["final 0", "final 1", "final 2"]
    assert list(frame["response (not used)"]) == ["draft 0", "", "draft 2"]
    assert list(frame.index) == [1, 2, 3]
    # and the checks read the same column: row 2's empty draft is no longer a problem
    assert any("3 rows, single shape, all checks passed" in s.value for s in at.success)
    at.button(key="datasets.save").click().run()
    saved = next(d for d in home_store.list_datasets() if d["name"] == "drafts.jsonl")
    assert home_store.get_dataset(saved["id"]).mapping == {"query": "query", "response": "answer"}


# ---------------------------------------------------------------- 2. the ticked metrics and thresholds are kept
@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_ticked_metrics_and_thresholds_are_kept_for_the_browser_session(home_store):
    app()
    did = sample_id(home_store)
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.f1_score").check().run()
    at.checkbox(key="new.metric.bleu").check().run()
    at.number_input(key="new.th.f1_score").set_value(0.7).run()
    # away to another page of the app and back, in the same tab (session)
    at.switch_page("pages/runs.py")
    at.run()
    at.switch_page("pages/new.py")  # from the sidebar: no dataset in the address
    at.query_params.clear()
    at.run()
    assert at.query_params["dataset"] == did  # the dataset left, not the newest
    ticked = [c.key for c in at.checkbox if c.key.startswith("new.metric.") and c.value]
    assert sorted(ticked) == ["new.metric.bleu", "new.metric.f1_score"]
    assert at.number_input(key="new.th.f1_score").value == 0.7
    assert at.number_input(key="new.th.bleu").value == 0.5  # bleu's default, untouched
    # another dataset that cannot feed them (conversations, no ground truth): shown unticked, nothing chosen
    conv = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "conversation")
    at.query_params["dataset"] = conv
    at.run()
    assert at.checkbox(key="new.metric.bleu.unavailable").disabled and not at.checkbox(
        key="new.metric.bleu.unavailable").value
    assert [i.value for i in at.info] == ["Pick at least one metric."]
    at.query_params["dataset"] = did  # and back: the ticks the user made are there again
    at.run()
    assert at.checkbox(key="new.metric.bleu").value and at.number_input(key="new.th.f1_score").value == 0.7
    at.button(key="new.start").click().run()
    run = wait_for_run(home_store, home_store.list_runs()[0]["id"])
    assert sorted(run["spec"]["metrics"]) == ["bleu", "f1_score"] and run["spec"]["thresholds"]["f1_score"] == 0.7
    # a new browser session starts with nothing ticked
    fresh = app("pages/new.py", dataset=did)
    assert not [c.key for c in fresh.checkbox if c.key.startswith("new.metric.") and c.value]


# ---------------------------------------------------------------- 3. WildBench import on the Leaderboard page
# LEADERBOARD.md in ../shared/fixtures/wildbench: WB_score and records (total) of each published score file
PUBLISHED = {"gpt-3.5-turbo-0125": (32.2776, 1023), "gemma-7b-it": (10.1758, 1024),
             "reka-core-20240501": (41.0352, 1024)}


@pytest.fixture
def score_files(shared_dir):
    folder = shared_dir / "fixtures" / "wildbench" / "eval_results" / "v2.0625" / "score.v2" / "eval=gpt-4o-2024-05-13"
    if not folder.is_dir():
        pytest.skip("../shared/fixtures/wildbench is not present")
    return sorted(folder.glob("*.json"))


def upload(at, files: list[tuple[str, bytes]], judge: str = "", reference: str = ""):
    at.file_uploader(key="wb.upload").set_value([(name, data, "application/json") for name, data in files])
    at.text_input(key="wb.judge").input(judge)
    at.text_input(key="wb.ref").input(reference)
    at.run()
    at.button(key="wb.import").click().run()
    return at


def scores_of(at):
    return next(d.value for d in at.dataframe if "WB_score" in d.value.columns)


def test_published_score_files_import_from_the_leaderboard_page(home_store, score_files):
    app()
    at = app("pages/leaderboard.py")
    assert at.expander[0].label == "Import published WildBench judgments" and at.expander[0].proto.expanded
    assert at.button(key="wb.import").disabled  # no file yet: greyed, and said why
    assert at.button(key="wb.import").proto.help == "Add one or more eval-result files above first."
    upload(at, [(p.name, p.read_bytes()) for p in score_files], judge="gpt-4o-2024-05-13")
    assert not at.error and not at.exception
    done = next(d.value for d in at.dataframe if "stored" in d.value.columns)
    assert sorted(done["model"]) == sorted(PUBLISHED) and set(done["stored"]) == {"imported"}
    assert sorted(done["file"]) == sorted(p.name for p in score_files)  # the names uploaded, no temporary path
    scores = scores_of(at)
    for model, (wb_score, total) in PUBLISHED.items():  # the published numbers, to 4 decimals
        row = scores[scores["model"] == model].iloc[0]
        assert round(row["WB_score"], 4) == wb_score and row["records"] == total
    runs = home_store.list_runs()
    assert len(runs) == 3 and {r["spec"]["judge"]["model"] for r in runs} == {"gpt-4o-2024-05-13"}
    assert {r["status"] for r in runs} == {"completed"}
    # the same file again: kept once, said so
    upload(at, [(score_files[0].name, score_files[0].read_bytes())], judge="gpt-4o-2024-05-13")
    done = next(d.value for d in at.dataframe if "stored" in d.value.columns)
    assert list(done["stored"]) == ["already stored, kept once"] and len(home_store.list_runs()) == 3


def _broken(score_files, k: int, **change) -> tuple[str, bytes]:
    recs = json.loads(score_files[1].read_text())[:5]
    recs[k - 1].update(change)
    return "broken.json", json.dumps(recs).encode()


@pytest.mark.parametrize("change, said", [
    ({"score": "eleven"}, "broken.json: record 3, field score: 'eleven' is not a number"),
    ({"model_output": 7}, "broken.json: record 3, field model_output: 7 is not text"),
    ({"winner": "x"}, None),  # the first record decides the kind: a score file with a stray field is fine
])
def test_a_bad_file_names_file_record_and_field_and_nothing_is_stored(home_store, score_files, change, said):
    app()
    at = app("pages/leaderboard.py", allow_errors=True)
    good = (score_files[0].name, score_files[0].read_bytes())
    upload(at, [good, _broken(score_files, 3, **change)])
    if said is None:
        assert not at.error and len(home_store.list_runs()) == 2
        return
    assert home_store.list_runs() == []  # the good file beside it is not stored either
    assert not [d for d in home_store.list_datasets() if d["name"].startswith("WildBench")]
    assert [e.value for e in at.error] and said in at.error[0].value and at.error[0].value.startswith(
        "Nothing was imported")
    assert "wb-import-" not in at.error[0].value  # the file as the user named it, not where it was staged


def test_a_pairwise_file_needs_its_reference_only_when_its_name_does_not_say(home_store, tmp_path):
    from tests.test_wildbench_import import _pairwise_file

    data = _pairwise_file(tmp_path).read_bytes()  # my-model vs claude-3-haiku-20240307, worked out by hand
    app()
    at = app("pages/leaderboard.py", allow_errors=True)
    upload(at, [("judgments.json", data)], judge="judge-x")  # neither the file's name nor a ref= folder
    assert "cannot tell the tested model from the reference" in at.error[0].value and not home_store.list_runs()
    upload(at, [("judgments.json", data)], judge="judge-x", reference="claude-3-haiku-20240307")
    assert not at.error
    at = app("pages/leaderboard.py", lbtab="WB-Reward", ref="claude-3-haiku-20240307", K="500")
    row = at.dataframe[-1].value.iloc[0]
    assert row["model"] == "my-model" and row["WB_reward"] == pytest.approx(-25)  # (0 - 100 + 0 + 0) / 4
    run = home_store.list_runs()[0]
    assert run["spec"]["judge"]["model"] == "judge-x"


# ---------------------------------------------------------------- 4. counts, blanks, headings, costs, greyed buttons
def _score_file(tmp_path, scores=(8, 6), model="org/tiny-model"):
    """A published-style score file of our own: no task tags, as WildBench's eval-result files are."""
    recs = [{"session_id": f"s{k}", "model_test": model, "score": str(s), "model_output": f"answer {k}",
             "parsed_result": {"strengths": "s", "weaknesses": "w", "score": str(s)}} for k, s in enumerate(scores)]
    path = tmp_path / "eval=judge-x" / "tiny-model.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(recs))
    return path


def column_labels(element) -> dict[str, str]:
    return {k: v.get("label") for k, v in json.loads(element.proto.columns).items()}


def test_the_leaderboard_says_why_task_macro_is_blank_under_human_headings(home_store, tmp_path):
    from evaluators.suites.wildbench import import_files

    app()
    import_files(home_store, [_score_file(tmp_path)])
    from ui import loaders
    loaders.forget_lists()  # the lists the first app() cached were empty
    at = app("pages/leaderboard.py")
    table = next(d for d in at.dataframe if "WB_score" in d.value.columns)
    row = table.value.iloc[0]
    assert row["model"] == "tiny-model" and row["WB_score"] == pytest.approx(40)  # mean 7 -> (7 - 5) x 2 x 10
    assert row["task_macro"] == "–"  # not "None": no task tags, so no categories to weight
    assert any(c.value.startswith("Task macro shows – where the rows carry no task tags (primary_tag, secondary_tags)")
               for c in at.caption)
    labels = column_labels(table)
    assert (labels["WB_score"], labels["ci95_low"], labels["ci95_high"], labels["task_macro"], labels["length"]) == \
        ("WB-Score", "95% CI low", "95% CI high", "Task macro", "Length (characters)")
    assert labels["model"] == "Model" and labels["records"] == "Records"


def test_counts_say_one_run_and_one_row_not_one_runs(home_store, tmp_path):
    from evaluators.suites.wildbench import import_files

    app()
    import_files(home_store, [_score_file(tmp_path, scores=(9,))])  # one run, of a one-row dataset
    from ui import loaders
    loaders.forget_lists()  # the lists the first app() cached were empty
    at = app("pages/runs.py")
    assert at.caption[0].value.startswith("1 run.")
    at = app("pages/runs.py", q="tiny")
    assert at.caption[0].value.startswith("1 of 1 run.")
    from evaluators.data.loading import load_dataset  # (a judgment set is not offered there: a dataset to judge)

    home_store.save_dataset(load_dataset([{"query": "q", "response": "a"}], name="one.jsonl"))
    loaders.forget_lists()
    at = app("pages/new.py")
    assert "one.jsonl · 1 row · single" in at.selectbox[0].options


def test_a_greyed_generate_button_says_why(home_store):
    app()
    at = app("pages/attacks.py", atab="Generate an attack set")
    assert not at.button(key="atk.go").disabled
    at.toggle(key="atk.fill").set_value(True).run()
    assert at.button(key="atk.go").disabled
    why = "Give the target's base URL and model above to fill the responses, or turn filling off."
    assert at.button(key="atk.go").proto.help == why and why in [c.value for c in at.caption]
    at.text_input(key="atk.url").input("http://127.0.0.1:9/v1").run()
    assert at.button(key="atk.go").proto.help.startswith("Give the target's model above")
    at.text_input(key="atk.model").input("target").run()
    assert not at.button(key="atk.go").disabled and not [c for c in at.caption if c.value.startswith("Give")]


def test_a_cost_says_its_currency(home_store):
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input("http://127.0.0.1:9/v1")
    at.text_input(key="judge.model").input("some-model").run()
    assert {n.label for n in at.number_input if n.key.startswith("price.")} == {
        "Price per 1M input tokens (USD)", "Price per 1M cached input tokens (USD)", "Price per 1M output tokens (USD)",
        "Batch API share of these prices"}
    cost = next(m for m in at.metric if m.label.startswith("Cost"))
    assert cost.label == "Cost (est., USD)" and cost.value.startswith("$")
