"""Two reviewers review the same run at once in Debian's headless Chromium, with the keyboard alone.

- Each gives a name once, then answers with digits: every verdict is stored once, with its reviewer.
- The judge's verdict stays hidden in the blind queue until the reviewer has answered.
- A tab closed mid-review loses nothing: a new tab goes on from the first row not yet done.
- The Results page marks the reviewed rows and says the corrected rate; a link opens the review at a row.
Screenshots of the walk go to artifacts/review-walk/.
"""
from __future__ import annotations

import json

import pytest

from evaluators import Store, load_dataset
from evaluators.read.view import open_view
from evaluators.review import make_queue
from evaluators.store.schema import Result
from tests.browser import needs_chromium, screenshot, settle, start_dashboard, stop
from tests.conftest import ROOT, SINGLE, default_store
from tests.procs import wait_until

pytestmark = needs_chromium
SHOTS = ROOT / "artifacts" / "review-walk"
N, QUEUE = 40, 8


def coherence(i: int) -> float:
    return float((i * 7) % 5 + 1)


def violence(i: int) -> float:
    return float(5 if i % 6 == 0 else i % 2)


@pytest.fixture
def reviewed_run(tmp_path):
    """A completed 40-row run (coherence, violence) built from the sample's real questions and answers, and
    a blind stratified queue of 8 rows given to both reviewers."""
    home = tmp_path / "evalhome"
    store = default_store(home)
    src = [json.loads(x) for x in SINGLE.read_text().splitlines()]
    recs = [{**src[i % len(src)], "id": f"r{i + 1:02d}", "query": f"{src[i % len(src)]['query']} (case {i + 1})"}
            for i in range(N)]
    did = store.save_dataset(load_dataset(recs))
    spec = {"metrics": ["coherence", "violence"], "thresholds": {"coherence": 3, "violence": 3}}
    rid = store.create_run(did, spec, "h", "reviewed run")
    store.write_results(rid, [Result(i, "coherence", 0, "ok", coherence(i), {"coherence": coherence(i)},
                                     reason=f"coherence reasoning for row {i + 1}", raw="{}") for i in range(N)]
                        + [Result(i, "violence", 0, "ok", violence(i), {"violence_score": violence(i)},
                                  reason=f"violence reasoning for row {i + 1}", raw="{}") for i in range(N)])
    store.update_run(rid, status="completed", tasks_total=2 * N, tasks_done=2 * N)
    qid = make_queue(store, rid, open_view(store, rid), "both", "stratified", ["coherence", "violence"], QUEUE,
                     seed=4, reviewers=["ann", "bob"], overlap=True)
    proc, url = start_dashboard(home)
    yield url, store, rid, qid
    stop(proc)


def _open(browser, url: str, name: str):
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    settle(page, "Your name")
    page.get_by_label("Your name", exact=True).and_(page.get_by_test_id("stTextInputField")).fill(name)
    page.keyboard.press("Enter")  # the form submits on Enter
    settle(page, "rows reviewed by you")
    return page


def _count(store: Store, rid: str, who: str) -> int:
    return len([r for r in store.reviews(rid, reviewer=who) if r["value"] is not None])


def _answer_row(page, store: Store, rid: str, who: str, key_coherence: str, key_violence: str) -> None:
    """Two key presses: the coherence verdict, then the violence one (the page moves on by itself). Each
    waits until the verdict is stored and the page shows what comes next (the next metric being answered,
    then one more row done)."""
    done = _count(store, rid, who) // 2
    for key, then in ((key_coherence, "violence · passes at ≤ 3 · answering"),
                      (key_violence, f"{done + 1} of {QUEUE} rows reviewed by you")):
        before = _count(store, rid, who)
        page.keyboard.press(key)
        wait_until(lambda: _count(store, rid, who) == before + 1, 30, f"{who}'s verdict after pressing {key}")
        settle(page, then)


def test_two_reviewers_at_once_with_the_keyboard(reviewed_run, browser):
    url, store, rid, qid = reviewed_run
    address = f"{url}/review?run={rid}&queue={qid}"
    ann, bob = _open(browser, address, "ann"), _open(browser, address, "bob")
    assert ann.get_by_text("hidden until you answer").count() == 2  # blind: neither judge verdict shows
    assert ann.get_by_text("coherence reasoning for row").count() == 0
    screenshot(ann, SHOTS, "1-blind-row")
    rows = store.get_queue(qid)["rows"]
    for k in range(3):  # turn about: ann, then bob, on the same rows
        _answer_row(ann, store, rid, "ann", "4", "0")
        _answer_row(bob, store, rid, "bob", str(int(coherence(rows[k]))), "1")
    screenshot(ann, SHOTS, "2-after-three-rows")
    ann.context.close()  # mid-review: the tab is gone
    ann = _open(browser, address, "ann")
    assert ann.get_by_text("3 of 8 rows reviewed by you").count() == 1
    for _ in range(QUEUE - 3):
        _answer_row(ann, store, rid, "ann", "4", "0")
    for k in range(3, QUEUE):
        _answer_row(bob, store, rid, "bob", str(int(coherence(rows[k]))), "1")
    settle(bob, "8 of 8 rows reviewed by you")
    settle(bob, "You have reviewed every row of this queue")
    got = store.reviews(rid)
    assert len(got) == 2 * 2 * QUEUE  # every verdict once: 8 rows x 2 metrics x 2 reviewers
    assert {(r["row_idx"], r["metric"], r["reviewer"]) for r in got} == {
        (i, m, who) for i in rows for m in ("coherence", "violence") for who in ("ann", "bob")}
    assert {r["value"] for r in got if r["reviewer"] == "ann" and r["metric"] == "coherence"} == {4.0}
    assert all(r["value"] == coherence(r["row_idx"]) for r in got if r["reviewer"] == "bob" and r["metric"] == "coherence")
    assert all(r["queue_id"] == qid and r["judge_value"] is not None for r in got)
    screenshot(bob, SHOTS, "3-queue-done")

    bob.goto(f"{url}/review?run={rid}&view=Agreement")
    settle(bob, "corrected by 8 reviews")
    settle(bob, "Krippendorff's α (between reviewers)")  # the agreement table, with the two reviewers' alpha
    screenshot(bob, SHOTS, "4-agreement")

    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(f"{url}/results?run={rid}&view=Rows")
    settle(page, "corrected by 8 reviews")
    page.locator("[data-testid='stDataFrame']").first.wait_for()
    screenshot(page, SHOTS, "5-results")
    page.goto(f"{url}/review?run={rid}&row={rows[2] + 1}")  # a shared link to one row
    settle(page, "Your name")
    page.get_by_label("Your name", exact=True).and_(page.get_by_test_id("stTextInputField")).fill("carol")
    page.keyboard.press("Enter")
    settle(page, f"Row {rows[2] + 1}")
    page.get_by_role("button", name="Agree with the judge").wait_for()
    settle(page)
    screenshot(page, SHOTS, "6-link-to-a-row")


def test_the_end_of_a_queue_offers_what_was_skipped_and_no_key_changes_a_verdict_it_was_not_aimed_at(
        reviewed_run, browser):
    """Issue 35: at the end of a queue further digits re-answered the last row (a 31st key overwrote row
    16's verdict), a skipped row was never offered again, and "A" in a blind queue did nothing, silently."""
    url, store, rid, qid = reviewed_run
    rows = store.get_queue(qid)["rows"]
    page = _open(browser, f"{url}/review?run={rid}&queue={qid}", "ann")
    page.keyboard.press("a")  # blind, not yet answered: refused, with why
    settle(page, "Blind review: give your own verdict first")
    assert _count(store, rid, "ann") == 0
    _answer_row(page, store, rid, "ann", "4", "0")
    page.keyboard.press("s")  # skip the queue's second row
    settle(page, f"Row {rows[2] + 1}")
    for _ in range(QUEUE - 2):
        _answer_row(page, store, rid, "ann", "4", "0")
    settle(page, f"All done here except row {rows[1] + 1} (skipped)")
    before = {(r["row_idx"], r["metric"]): r["value"] for r in store.reviews(rid, reviewer="ann")}
    assert len(before) == 2 * (QUEUE - 1)
    for key in ("2", "1", "a"):  # aimed at nothing: the last row is done, no metric is being answered
        page.keyboard.press(key)
    settle(page, f"All done here except row {rows[1] + 1} (skipped)")
    assert {(r["row_idx"], r["metric"]): r["value"] for r in store.reviews(rid, reviewer="ann")} == before
    page.get_by_role("button", name=f"Go to row {rows[1] + 1}").click()
    settle(page, "coherence · passes at ≥ 3 · answering")
    _answer_row(page, store, rid, "ann", "5", "1")
    settle(page, "You have reviewed every row of this queue")
    got = {(r["row_idx"], r["metric"]): r["value"] for r in store.reviews(rid, reviewer="ann")}
    assert got == {**before, (rows[1], "coherence"): 5.0, (rows[1], "violence"): 1.0}
