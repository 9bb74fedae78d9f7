"""Alignment's splits in the store (evaluators/store/align_splits.py): each reviewed row of a metric assigned once to
train / dev / test, stratified by the human verdict, deterministic for a seed, never reassigned; and the count of
the test split's uses. On SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from evaluators.data.loading import load_dataset
from evaluators.store.align_splits import AlignSplitRow
from evaluators.store.store import Store

pytestmark = pytest.mark.both_stores


def _run(store: Store, n: int, tag: str = "a") -> str:
    did = store.save_dataset(load_dataset([{"query": f"q{tag}{i}", "response": f"r{tag}{i}"} for i in range(n)]))
    return store.create_run(did, {"metrics": ["coherence"]}, "h", f"run {tag}")


def _verdicts(rid: str, n: int, fail_every: int = 4) -> dict:
    return {(rid, i): "fail" if i % fail_every == 0 else "pass" for i in range(n)}


def test_each_verdict_is_split_20_40_40_by_a_seeded_hash(store):
    rid = _run(store, 200)
    verdicts = _verdicts(rid, 200)
    splits = store.assign_splits("coherence", verdicts, seed=7)
    assert set(splits) == set(verdicts)
    for stratum, size in (("fail", 50), ("pass", 150)):  # counted here, from what was returned
        got = [splits[k] for k, v in verdicts.items() if v == stratum]
        assert (got.count("train"), got.count("dev"), got.count("test")) == (size // 5, 2 * size // 5, 2 * size // 5)
    other = Store(store.url)  # the same rows and seed in a store where none was assigned: the same splits
    with other.session() as s:
        s.query(AlignSplitRow).delete()
        s.commit()
    assert other.assign_splits("coherence", verdicts, seed=7) == splits
    with other.session() as s:
        s.query(AlignSplitRow).delete()
        s.commit()
    reseeded = other.assign_splits("coherence", verdicts, seed=8)
    assert reseeded != splits  # the seed decides which rows go where


def test_a_row_keeps_its_split_when_more_rows_are_reviewed_or_the_verdict_or_seed_change(store):
    rid = _run(store, 100)
    first = store.assign_splits("coherence", _verdicts(rid, 40), seed=1)
    flipped = {k: ("pass" if v == "fail" else "fail") for k, v in _verdicts(rid, 100).items()}
    later = store.assign_splits("coherence", flipped, seed=99)
    assert {k: later[k] for k in first} == first  # never reassigned
    assert len(later) == 100 and store.align_splits("coherence") == later
    rid2 = _run(store, 30, "b")  # another run of the metric: its rows join the same splits
    both = store.assign_splits("coherence", {**flipped, **_verdicts(rid2, 30)}, seed=1)
    assert {k: both[k] for k in later} == later and len(both) == 130
    assert store.align_splits("other_metric") == {}


def test_the_test_split_uses_are_counted_per_metric(store):
    assert store.test_split_uses("coherence") == 0
    assert store.count_test_use("coherence") == 1
    assert store.count_test_use("coherence") == 2
    assert store.count_test_use("fluency") == 1
    assert Store(store.url).test_split_uses("coherence") == 2


def test_deleting_a_run_deletes_its_splits(store):
    rid = _run(store, 10)
    store.assign_splits("coherence", _verdicts(rid, 10))
    store.delete_run(rid)
    assert store.align_splits("coherence") == {}
