"""Reviews in the store, review queues, and a reviewed run's agreement and corrected rates, checked against
scikit-learn, SciPy and hand computations on runs judged by the loopback server."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from evaluators import review
from evaluators.api import evaluate
from evaluators.core import inference as inf
from evaluators.read.view import open_view
from evaluators.review.queues import assign, choose_rows, progress
from evaluators.review.stats import kappa_verdict
from evaluators.store.schema import Result
from evaluators.store.store import Store
from tests.conftest import SINGLE
from tests.ppi_sim import ppi_by_hand

pytestmark = pytest.mark.both_stores

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn gives the reference kappas")
scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy gives the reference rho")


@pytest.fixture
def judged(store, judge_config):
    res = evaluate(SINGLE, ["coherence", "violence"], judge=judge_config, store=store, api_key="k")
    return store, res.run_id


def test_a_verdict_is_stored_once_per_reviewer_and_outlives_the_store_object(judged, tmp_path):
    store, rid = judged
    store.save_review(rid, 0, "coherence", "ann", 4.0)
    store.save_review(rid, 0, "coherence", "ann", 2.0, note="on second reading")  # replaces ann's own
    store.save_review(rid, 0, "coherence", "bob", 5.0)
    again = Store(store.url)  # a dashboard restarted: a new connection to the same file
    got = [(r["reviewer"], r["value"], r["note"]) for r in again.reviews(rid)]
    assert got == [("ann", 2.0, "on second reading"), ("bob", 5.0, None)]
    assert again.reviewed_rows(rid) == {0: 2}
    with pytest.raises(ValueError, match="reviewer"):
        store.save_review(rid, 1, "coherence", "  ", 3.0)


def test_choose_rows_by_each_strategy():
    verdicts = np.array([1] * 90 + [0] * 10 + [-1] * 5, dtype=np.int8)
    values = np.r_[np.full(90, 4.0), np.full(10, 2.0), np.full(5, np.nan)]
    rows, strata = choose_rows("stratified", verdicts, values, 3.0, 20, seed=7)
    assert len(rows) == len(set(rows)) == 20
    assert sorted(i for i in rows if i >= 90) == list(range(90, 100))  # every failure (10 of 10) is in
    assert {strata[str(i)] for i in rows if i >= 90} == {"fail"} and sum(v == "pass" for v in strata.values()) == 10
    assert choose_rows("stratified", verdicts, values, 3.0, 20, seed=7) == (rows, strata)
    assert choose_rows("stratified", verdicts, values, 3.0, 20, seed=8)[0] != rows
    rnd, _ = choose_rows("random", verdicts, values, 3.0, 30, seed=1)
    assert len(set(rnd)) == 30 and max(rnd) < 100  # only rows the judge scored
    near, _ = choose_rows("threshold", np.array([1, 0, 1, 0, 1], dtype=np.int8), np.array([4.0, 1.0, 3.2, 2.9, 5.0]),
                          3.0, 3)
    assert near == [3, 2, 0]  # |2.9-3| = 0.1, |3.2-3| = 0.2, |4-3| = 1 (then row 1 at 2, row 4 at 2: cut)
    assert choose_rows("errored", verdicts, values, 3.0, None, errored=[102, 100, 102])[0] == [102, 100]
    with pytest.raises(ValueError, match="unknown review strategy"):
        choose_rows("everything", verdicts, values, 3.0, 5)
    assert assign([5, 6, 7, 8, 9], ["ann", "bob"], overlap=False) == {"ann": [5, 7, 9], "bob": [6, 8]}
    assert assign([5, 6], ["ann", "bob"], overlap=True) == {"ann": [5, 6], "bob": [5, 6]}
    assert assign([5, 6], [], overlap=False) == {"": [5, 6]}


def _human(v: float) -> float:
    """A reviewer who is one point harsher than the judge on every third score, and agrees otherwise."""
    return max(1.0, v - 1) if int(v) % 3 == 0 else v


def test_agreement_and_corrected_rate_equal_their_references(judged):
    store, rid = judged
    view = open_view(store, rid)
    qid = review.make_queue(store, rid, view, "sample", "random", ["coherence", "violence"], 20, seed=3,
                            reviewers=["ann"])
    q = store.get_queue(qid)
    assert q["blind"] is True and len(q["rows"]) == 20
    judge = view.values("coherence")
    for i in q["rows"]:
        store.save_review(rid, i, "coherence", "ann", _human(judge[i]), queue_id=qid)
    assert progress(store, store.get_queue(qid)) == {"ann": (0, 20)}  # violence not answered yet
    got = review.agreement(store, rid, results=view)["coherence"]

    rows = sorted(q["rows"])
    j = np.array([judge[i] for i in rows])
    h = np.array([_human(v) for v in j])
    jp, hp = (j >= 3).astype(int), (h >= 3).astype(int)  # coherence passes at 3 and above
    assert got.reviewed_rows == 20
    assert got.kappa[0] == pytest.approx(sklearn_metrics.cohen_kappa_score(jp, hp))
    assert got.weighted_kappa[0] == pytest.approx(
        sklearn_metrics.cohen_kappa_score(j, h, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert got.spearman[0] == pytest.approx(scipy_stats.spearmanr(j, h).statistic)
    assert got.confusion == sklearn_metrics.confusion_matrix(jp, hp, labels=[0, 1]).tolist()
    assert got.kappa[1] <= got.kappa[0] <= got.kappa[2] or got.kappa[1] is None
    # the corrected pass rate, written out (PPI++ with its guard, tests/ppi_sim.py): the 20 reviewed among
    # the 31 scored rows, their people's pass/fail against the judge's
    scored = np.flatnonzero(~np.isnan(judge))
    f = (judge[scored] >= 3).astype(float)
    est, low, high = ppi_by_hand(f, np.searchsorted(scored, rows), hp.astype(float))
    c = got.corrected
    assert got.judged == pytest.approx(f.mean())
    assert (c.corrected, c.low, c.high) == pytest.approx((est, low, high), abs=1e-12)
    assert got.human_only[0] == pytest.approx(hp.mean())
    # 31 rows: even all of them reviewed give +/- 1.96 sqrt(p(1 - p) / 31), over 10 points at p = 0.2 to 0.8
    assert got.more_reviews is inf.more_reviews_for(c) is None and 0.2 < c.corrected < 0.8
    assert got.sentence() == (f"pass rate {100 * f.mean():.1f}% as judged; {100 * c.corrected:.1f}% "
                              f"[{100 * c.low:.1f}, {100 * c.high:.1f}] corrected by 20 reviews (reviewing every row "
                              f"would not narrow it to ± 5 points). {kappa_verdict(*got.kappa)}")
    keys = review.agreement_keys(store, rid, results=view)
    assert set(keys) == {f"coherence.{k}" for k in (
        "human_reviewed_rows", "human_kappa", "human_kappa_ci95_low", "human_kappa_ci95_high", "human_weighted_kappa",
        "human_weighted_kappa_ci95_low", "human_weighted_kappa_ci95_high", "coherence_pass_rate_corrected",
        "coherence_pass_rate_corrected_ci95_low", "coherence_pass_rate_corrected_ci95_high")}
    assert keys["coherence.coherence_pass_rate_corrected"] == pytest.approx(c.corrected)


def test_reviews_of_chosen_rows_do_not_correct_the_rate(judged):
    store, rid = judged
    view = open_view(store, rid)
    qid = review.make_queue(store, rid, view, "near", "threshold", ["coherence"], 5)
    assert store.get_queue(qid)["blind"] is False  # only sampled queues are blind by default
    for i in store.get_queue(qid)["rows"]:
        store.save_review(rid, i, "coherence", "ann", 1.0, queue_id=qid)
    got = review.agreement(store, rid, results=view)["coherence"]
    assert got.reviewed_rows == 5 and got.corrected is None
    assert "; the reviews are not a sample, so they do not correct it" in got.sentence()


def test_stratified_queue_weights_each_stratum_back(judged):
    store, rid = judged
    view = open_view(store, rid)
    verdicts = view.verdicts("violence")
    qid = review.make_queue(store, rid, view, "strat", "stratified", ["violence"], 10, seed=2)
    rows = store.get_queue(qid)["rows"]
    for i in rows:  # the reviewer finds a defect exactly where the judge did
        store.save_review(rid, i, "violence", "ann", 6.0 if verdicts[i] == 0 else 0.0, queue_id=qid)
    got = review.agreement(store, rid, results=view)["violence"]
    defect = float((verdicts[verdicts >= 0] == 0).mean())
    assert got.rate_name == "defect_rate" and got.judged == pytest.approx(defect)
    assert got.corrected.corrected == pytest.approx(defect)  # no error found: nothing to correct
    assert got.corrected.low < defect < got.corrected.high
    assert got.kappa[0] == pytest.approx(1.0)


def test_two_reviewers_alpha_and_a_later_judgment(judged):
    krippendorff = pytest.importorskip("krippendorff")
    store, rid = judged
    ann = {0: 5.0, 1: 4.0, 2: 2.0, 3: 1.0, 4: 3.0}
    bob = {0: 4.0, 1: 4.0, 2: 1.0, 3: 2.0, 4: 3.0}
    long_ago = dt.datetime(2020, 1, 1)
    for i in ann:
        store.save_review(rid, i, "coherence", "ann", ann[i], judged_at=long_ago)
        store.save_review(rid, i, "coherence", "bob", bob[i])
    got = review.agreement(store, rid)["coherence"]
    ref = krippendorff.alpha(reliability_data=[list(ann.values()), list(bob.values())],
                             level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert got.alpha == pytest.approx(ref) and got.alpha_rows == 5
    assert got.stale_rows == 5  # every row was judged after 2020
    store.write_results(rid, [Result(row_idx=0, metric="coherence", turn=0, status="ok", value=3.0,
                                     outputs={"coherence": 3.0})])
    recent = store.judged_times(rid, "coherence", [0])[0]
    store.save_review(rid, 1, "coherence", "ann", 4.0, judged_at=recent + dt.timedelta(seconds=1))
    assert review.agreement(store, rid)["coherence"].stale_rows == 4
