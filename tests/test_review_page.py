"""The Review page in AppTest on a real store: who reviews (the signed-in user, else a name asked once), a
queue made in the page, blind review, verdicts stored as given, and the Results page's marks."""
from __future__ import annotations

import hashlib

import pytest

from evaluators.read.view import open_view
from evaluators.review import make_queue
from evaluators.store.schema import Result
from tests.apptest import app, configured_app, shown_text
from ui.auth import USER

pytestmark = pytest.mark.usefixtures("fresh_caches")
N = 12


def _coherence(i: int) -> float:
    return float(i % 5 + 1)


@pytest.fixture
def run(home_store):
    from evaluators import load_dataset

    ds = load_dataset([{"query": f"How do I fix problem {i}?", "response": f"Try step {i}, then restart."}
                       for i in range(N)])
    did = home_store.save_dataset(ds)
    rid = home_store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 3}}, "h", "page run")
    home_store.write_results(rid, [Result(i, "coherence", 0, "ok", _coherence(i), {"coherence": _coherence(i)},
                                          reason=f"the judge's reasoning on row {i + 1}") for i in range(N)])
    home_store.update_run(rid, status="completed", tasks_total=N, tasks_done=N)
    return home_store, rid


def _click(at, label: str) -> None:
    button = next(b for b in at.button if b.label == label and not b.disabled)
    button.click()
    at.run()


def test_a_name_once_then_a_blind_queue_answered_with_the_scale(run):
    store, rid = run
    at = app("pages/review.py", run=rid)
    assert any(t.label == "Your name" for t in at.text_input)
    next(t for t in at.text_input if t.label == "Your name").input("dana")
    _click(at, "Start reviewing")
    assert "no review queue yet" in shown_text(at)
    # the Queues tab's form, with its defaults: a blind stratified sample of every judged metric
    at.query_params["view"] = "Queues"
    at.run()
    _click(at, "Make the queue")
    q = store.queues(rid)[0]
    assert q["strategy"] == "stratified" and q["blind"] and q["metrics"] == ["coherence"] and len(q["rows"]) == N
    assert q["created_by"] == "dana"
    text = shown_text(at)
    assert "hidden until you answer" in text and "the judge's reasoning on row" not in text
    agree = next(b for b in at.button if b.label == "Agree with the judge")
    agree.click().run()  # nothing to agree with while the verdict is hidden: refused, saying why
    assert "Blind review: give your own verdict first" in " ".join(e.value for e in at.error)
    first = q["rows"][0]
    _click(at, "2")
    got = store.reviews(rid)
    assert [(r["row_idx"], r["reviewer"], r["value"], r["queue_id"], r["judge_value"]) for r in got] == [
        (first, "dana", 2.0, q["id"], _coherence(first))]
    assert f"Saved row {first + 1}: coherence you 2, judge {int(_coherence(first))}" in shown_text(at)
    # the next row: answer by agreeing once the verdict is shown (after answering), then change it
    second = q["rows"][1]
    _click(at, "5")
    assert f"you 5, judge {int(_coherence(second))}" in shown_text(at)


def test_the_signed_in_user_reviews_under_their_name(run, monkeypatch):
    store, rid = run
    monkeypatch.setenv("EVAL_DASHBOARD_PASSWORD_SHA256", hashlib.sha256(b"pw").hexdigest())
    qid = make_queue(store, rid, open_view(store, rid), "q", "random", ["coherence"], 3, seed=1, blind=False)
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state[USER] = "erin@example.org"
    at.session_state["routed"] = True
    at = app("pages/review.py", at=at, run=rid, queue=qid)
    assert not any(t.label == "Your name" for t in at.text_input)  # no name asked: the sign-in says who
    assert "the judge's reasoning on row" in shown_text(at)  # not blind: the verdict shows at once
    _click(at, "Agree with the judge")
    r = store.reviews(rid)[0]
    assert r["reviewer"] == "erin@example.org" and r["agreed"] and r["value"] == _coherence(r["row_idx"])


def test_results_page_marks_reviewed_rows_and_says_the_corrected_rate(run):
    store, rid = run
    view = open_view(store, rid)
    qid = make_queue(store, rid, view, "q", "random", ["coherence"], 6, seed=2)
    for i in store.get_queue(qid)["rows"]:
        store.save_review(rid, i, "coherence", "fay", 1.0, queue_id=qid)  # fay fails every row
    row = store.get_queue(qid)["rows"][0]
    at = app("pages/results.py", run=rid, view="Rows", row=str(row + 1))
    text = shown_text(at)
    assert "corrected by 6 reviews" in text and "pass rate 50.0% as judged" in text  # 6 of the 12 scores (1-5, 1-5, 1, 2) are 3 or more
    assert "fay: 1 · fail" in text
    table = at.dataframe[0].value
    assert (table["reviewed"] == "✓ 1").sum() == 6
    assert any(f"review?run={rid}&row={row + 1}" in m.value for m in at.markdown)


def test_the_results_page_follows_verdicts_given_since_it_was_last_drawn(run):
    store, rid = run
    assert "No one has reviewed this run yet" in shown_text(app("pages/results.py", run=rid))
    qid = make_queue(store, rid, open_view(store, rid), "q", "random", ["coherence"], 6, seed=2)
    for i in store.get_queue(qid)["rows"]:
        store.save_review(rid, i, "coherence", "fay", 1.0, queue_id=qid)
    before = _corrected(shown_text(app("pages/results.py", run=rid)))
    store.save_review(rid, store.get_queue(qid)["rows"][0], "coherence", "fay", 5.0, queue_id=qid)  # one changed
    after = _corrected(shown_text(app("pages/results.py", run=rid)))
    # by hand: one of the six reviewed rows turned from fail to pass moves the mean of (human - judge) by 1/6
    assert after - before == pytest.approx(100 / 6, abs=0.1)


def _corrected(text: str) -> float:
    import re

    return float(re.search(r"([0-9.]+)% \[[0-9., ]+\] corrected by 6 reviews", text).group(1))


def test_a_row_from_a_link_outside_any_queue_is_reviewed_alone(run):
    store, rid = run
    at = app("pages/review.py", run=rid, row="5")
    next(t for t in at.text_input if t.label == "Your name").input("gus")
    _click(at, "Start reviewing")
    assert "This row is in no review queue" in shown_text(at) and "Row 5" in shown_text(at)
    _click(at, "3")
    assert [(r["row_idx"], r["queue_id"]) for r in store.reviews(rid)] == [(4, None)]


def test_results_page_says_how_often_a_repeated_judge_flips(home_store):
    from evaluators import load_dataset

    did = home_store.save_dataset(load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(8)]))
    spec = {"metrics": ["coherence"], "thresholds": {"coherence": 3}, "repeat": 3}
    rid = home_store.create_run(did, spec, "h", "repeated")
    votes = [[4, 4, 4], [2, 3, 4], [1, 1, 2], [5, 5, 5], [3, 2, 2], [4, 5, 4], [1, 2, 1], [3, 3, 3]]
    home_store.write_results(rid, [Result(i, "coherence", 0, "ok", sum(v) / 3, {"coherence": sum(v) / 3, "votes": v})
                                   for i, v in enumerate(votes)])
    home_store.update_run(rid, status="completed", tasks_total=8, tasks_done=8)
    at = app("pages/results.py", run=rid)
    # rows 2 (2,3,4) and 5 (3,2,2) straddle 3: 2 of 8 flip
    assert "judged 3 times per row; the verdict flips on 25.0% of rows" in shown_text(at)


def test_a_human_column_off_the_scale_is_named_and_the_results_page_goes_on(home_store):
    from evaluators import load_dataset

    ds = load_dataset([{"query": f"q{i}", "response": f"r{i}", "human_coherence": 9 if i == 2 else 3}
                       for i in range(4)])
    did = home_store.save_dataset(ds)
    rid = home_store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 3}}, "h", "labelled")
    home_store.write_results(rid, [Result(i, "coherence", 0, "ok", 4.0, {"coherence": 4.0}) for i in range(4)])
    home_store.update_run(rid, status="completed", tasks_total=4, tasks_done=4)
    at = app("pages/results.py", run=rid)
    text = shown_text(at)
    assert "row 3, column 'human_coherence': 9 is not on coherence's scale (1, 2, 3, 4, 5)" in text
    assert "Coherence pass rate" in text  # the rest of the page is there


def test_with_only_classic_runs_review_and_compare_lead_to_a_new_evaluation(home_store):
    from evaluators import load_dataset

    did = home_store.save_dataset(load_dataset([{"response": "a b", "ground_truth": "a c"}]))
    rid = home_store.create_run(did, {"metrics": ["f1_score"], "thresholds": {}}, "h", "classic only")
    home_store.update_run(rid, status="completed")
    for page in ("pages/review.py", "pages/compare.py"):
        at = app(page)
        assert [p.proto.label for p in at.get("page_link")] == ["Start a new evaluation"], page
    assert "No completed run with a judged metric" in shown_text(app("pages/review.py"))




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_new_evaluation_opens_on_the_sample_just_evaluated(home_store):
    from tests.conftest import wait_for_run

    at = app()
    next(b for b in at.button if b.label == "Evaluate the sample").click()
    at.run()
    wait_for_run(home_store, home_store.run_rows()[0]["id"])
    at.switch_page("pages/new.py")
    at.query_params.clear()
    at.run()
    sample = next(d for d in home_store.list_datasets() if d["name"].startswith("rag_single_turn"))
    assert at.query_params["dataset"] == sample["id"]  # not the newest dataset (the conversations)
