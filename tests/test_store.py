"""The store on real SQLite: idempotent writes, datasets kept once, one worker per run."""
from __future__ import annotations

import pytest

from evaluators.data import load_dataset
from evaluators.errors import EvalError
from evaluators.runner import Runner
from evaluators.store import Result
from tests.conftest import SINGLE


def test_dataset_is_stored_once_per_content(store):
    a = store.save_dataset(load_dataset(SINGLE))
    b = store.save_dataset(load_dataset(SINGLE))
    assert a == b and len(store.list_datasets()) == 1
    back = store.get_dataset(a)
    assert back.records == load_dataset(SINGLE).records and back.row_no(30) == 31


def test_results_are_idempotent_per_row_metric_turn(store):
    did = store.save_dataset(load_dataset(SINGLE))
    rid = store.create_run(did, {"metrics": ["bleu"]}, "h", "n")
    store.write_results(rid, [Result(0, "bleu", 0, "error", error="boom")])
    store.write_results(rid, [Result(0, "bleu", 0, "ok", value=0.5, outputs={"bleu_score": 0.5})])
    got = store.load_results(rid)
    assert len(got) == 1 and (got[0].status, got[0].value, got[0].error) == ("ok", 0.5, None)
    assert store.done_keys(rid) == {(0, "bleu", 0)}


def test_one_worker_holds_a_run(store):
    did = store.save_dataset(load_dataset(SINGLE))
    rid = store.create_run(did, {"metrics": ["bleu"], "thresholds": {}, "judge": None, "templates": {}}, "h", "n")
    assert store.claim_run(rid) is True
    assert store.claim_run(rid) is False  # a fresh heartbeat: another worker must not start it
    with pytest.raises(EvalError, match="another worker"):
        Runner(store, rid).run()
    assert store.claim_run(rid, force=True) is True  # the CLI's take-over after a killed process
    store.update_run(rid, status="completed")
    assert Runner(store, rid).run() == "completed"
