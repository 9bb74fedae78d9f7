"""The dashboard's columnar read path (evaluators.read.view) gives what the in-memory RunResults gives.

Runs with every kind (score with a note and three outputs, severity, label with categories, wb_score,
pairwise), errored, skipped and pending rows, and conversations whose turns are combined, are stored in
a real SQLite store (and PostgreSQL, for the tests marked both_stores); every read method is compared with the in-memory path (whose numbers the other
tests check by hand), at the run's thresholds and at others.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from evaluators import Store, load_dataset
from evaluators.read.results import open_results
from evaluators.core.registry import get_metric
from evaluators.read.view import open_view
from evaluators.store.schema import Result
from tests.conftest import default_store

SINGLE_METRICS = ["coherence", "rouge", "violence", "indirect_attack", "wildbench_score", "wildbench_pairwise"]
CONV_METRICS = ["coherence", "violence", "protected_material"]


def _outputs(name: str, rnd: random.Random, i: int) -> dict:
    spec = get_metric(name)
    if name == "coherence":
        out = {"coherence": float(rnd.randint(1, 5))}
        if i % 7 == 3:
            out["_note"] = f"note on row {i}"
        return out
    if name == "rouge":
        return {k: round(rnd.random(), 3) for k in spec.outputs}
    if name in ("violence",):
        return {"violence_score": rnd.randint(0, 7)}
    if name == "protected_material":
        return {"protected_material_label": rnd.random() < 0.3}
    if name == "indirect_attack":
        label = rnd.random() < 0.4
        return {"indirect_attack_label": label,
                **{k: label and rnd.random() < 0.5 for k in spec.outputs[1:]}}
    if name == "wildbench_score":
        return {"wildbench_score": float(rnd.randint(1, 10)), "wildbench_score_strengths": "clear",
                "wildbench_score_weaknesses": "short", "model": "m", "length": rnd.randint(10, 900),
                "excluded": False, "groups": rnd.choice([["Coding & Debugging"], ["Math & Data Analysis"], ["Creative Tasks"]])}
    if name == "wildbench_pairwise":
        return {"choice": rnd.choice(["A++", "A+", "A=B", "B+", "B++"]), "len_A": rnd.randint(10, 900),
                "len_B": rnd.randint(10, 900), "model_A": "a", "model_B": rnd.choice(["ref1", "ref2"]),
                "excluded": False, "groups": ["Creative Tasks"]}
    raise AssertionError(name)


def _result(name: str, i: int, turn: int, rnd: random.Random) -> Result | None:
    roll = rnd.random()
    if roll < 0.08:
        return None  # pending
    if roll < 0.16:
        return Result(i, name, turn, "error", error=f"judge timed out on {name} row {i} turn {turn}")
    if roll < 0.22:
        return Result(i, name, turn, "skipped", error="no context")
    out = _outputs(name, rnd, i)
    primary = get_metric(name).primary
    v = out.get(primary, 0.0)
    return Result(i, name, turn, "ok", value=float(v) if not isinstance(v, str) else None, outputs=out,
                  reason=f"because {i}.{turn}", raw='{"score": 1}', prompt_tokens=10, completion_tokens=5,
                  latency_ms=12.0, meta={"model": "judge-x"})


def _store_run(url, records, metrics, turns_of, seed: int):
    store = Store(url)
    did = store.save_dataset(load_dataset(records))
    rid = store.create_run(did, {"metrics": metrics, "thresholds": {"coherence": 4}}, "h", "scale-test")
    rnd = random.Random(seed)
    results = []
    for i in range(len(records)):
        for name in metrics:
            if name == "wildbench_pairwise":
                nturns = rnd.choice([1, 2])  # one order or both (the position-bias check)
            else:
                nturns = turns_of(i)
            for t in range(nturns):
                r = _result(name, i, t, rnd)
                if r is not None:
                    results.append(r)
    store.write_results(rid, results)
    return store, rid


@pytest.fixture
def single_run(store_url):
    words = ["alpha", "Beta", "gamma", "DELTA", "epsilon", "Zeta"]
    records = [{"query": f"Question {i} about {words[i % 6]}", "response": f"Answer {i}: {words[(i * 5) % 6]} ÉLAN",
                "ground_truth": "x", "context": "c", "model_A": "a"} for i in range(60)]
    return _store_run(store_url, records, SINGLE_METRICS, lambda i: 1, seed=7)


@pytest.fixture
def conv_run(store_url):
    records = []
    for i in range(24):
        msgs = []
        for t in range(1 + i % 3):
            msgs += [{"role": "user", "content": f"user {i}.{t} Gamma"}, {"role": "assistant", "content": f"bot {i}.{t}"}]
        records.append({"messages": msgs})
    return _store_run(store_url, records, CONV_METRICS, lambda i: 1 + i % 3, seed=11)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


FILTERS = [dict(), dict(verdict="pass"), dict(verdict="fail"), dict(verdict="error"),
           dict(metric="violence", verdict="fail", sort="coherence", descending=True),
           dict(sort="coherence"), dict(sort="coherence", descending=True), dict(descending=True),
           dict(metric="coherence", low=2.0, high=4.0), dict(search="gamma"), dict(search="élan", sort="violence"),
           dict(search="turns] user 5"), dict(metric="protected_material", verdict="pass")]


@pytest.mark.both_stores
@pytest.mark.parametrize("which", ["single_run", "conv_run"])
def test_columnar_reads_equal_in_memory(which, request, store_url):
    store, rid = request.getfixturevalue(which)
    for th in ({}, {"coherence": 2, "violence": 5, "rouge": 0.3, "wildbench_score": 7, "wildbench_pairwise": 10}):
        ref = open_results(store, rid, th)
        fast = open_view(store, rid, th)
        assert len(fast) == len(ref)
        for s in ref.specs:
            assert fast.summary(s) == ref.summary(s), s.name
            np.testing.assert_array_equal(fast.values(s.name), ref.values(s.name))
            assert fast.first_note(s.name) == ref.first_note(s.name)
            pd.testing.assert_frame_equal(fast.threshold_curve(s.name), ref.threshold_curve(s.name))
        assert fast.metrics() == ref.metrics()
        assert fast.errored_rows() == ref.errored_rows() > 0
        assert fast.errors() == ref.errors() and fast.errors(3) == ref.errors(3)
        for i in range(len(ref)):
            for s in ref.specs:
                assert fast.cell(s.name, i) == ref.cell(s.name, i)
            assert fast.row(i).keys() == ref.row(i).keys()
            assert all(_same(fast.row(i)[k], ref.row(i)[k]) for k in ref.row(i))
        names = [s.name for s in ref.specs]
        for f in FILTERS:
            f = dict(f)
            if f.get("metric") not in (None, *names) or f.get("sort", "row") not in ("row", *names):
                continue
            n_ref, page_ref = ref.query(**f, offset=5, limit=7)
            n_fast, page_fast = fast.query(**f, offset=5, limit=7)
            assert n_fast == n_ref, f
            pd.testing.assert_frame_equal(page_fast, page_ref, check_dtype=False, check_index_type=False), f
            pd.testing.assert_frame_equal(fast.table(**f), ref.table(**f), check_dtype=False, check_index_type=False)


def test_by_hand_counts(tmp_path, store_url):
    """Four rows of coherence, counted by hand: scored 5, 2 (passes at 4: one), one error, one pending."""
    store = Store(store_url)
    did = store.save_dataset(load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(4)]))
    rid = store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 4}}, "h", "hand")
    store.write_results(rid, [Result(0, "coherence", 0, "ok", 5.0, {"coherence": 5.0}),
                              Result(1, "coherence", 0, "ok", 2.0, {"coherence": 2.0}),
                              Result(2, "coherence", 0, "error", error="boom")])
    fast = open_view(store, rid)
    sm = fast.summary(fast.specs[0])
    assert (sm["scored_rows"], sm["errored_rows"], sm["pending_rows"]) == (2, 1, 1)
    assert sm["coherence"] == 3.5 and sm["pass_rate"] == 0.5 and sm["binary_aggregate"] == 0.25
    n, page = fast.query(sort="coherence")
    assert n == 4 and list(page.index) == [1, 0, 2, 3] and list(page["#"]) == [2, 1, 3, 4]
    assert list(page["coherence verdict"]) == ["fail", "pass", "error", "pending"]
    assert fast.errors() == [(2, "coherence", "boom")]


@pytest.mark.both_stores
def test_columns_are_kept_per_state_of_a_finished_run(conv_run, store_url):
    """A finished run's columns are written beside the store and read back; a new result makes a new state."""
    store, rid = conv_run
    store.update_run(rid, status="completed")
    first = open_view(store, rid)
    views = list(views_dir(store).glob(f"{rid}-*.npz"))  # beside the SQLite file; a PostgreSQL one's in EVAL_HOME
    assert len(views) == 1
    again = open_view(store, rid)  # from the file
    for s in again.specs:
        assert again.summary(s) == first.summary(s) == open_results(store, rid).summary(s)
    assert again.query(search="gamma")[0] == open_results(store, rid).query(search="gamma")[0] > 0
    # a result for a turn still pending arrives (a resume): the next open sees it
    have = store.result_keys(rid)
    row, turn = next((i, t) for i in range(len(first)) for t in range(1 + i % 3) if (i, "coherence", t) not in have)
    before = first.cell("coherence", row)
    store.write_results(rid, [Result(row, "coherence", turn, "ok", 5.0, {"coherence": 5.0})])
    # another server writing the same run's columns at this moment: its file, half written, is not an old state
    writing = views_dir(store) / f"{rid}-{'0' * 20}.tmp999.1.npz"
    writing.write_bytes(b"half")
    fresh, ref = open_view(store, rid), open_results(store, rid)
    assert writing.exists()
    writing.unlink()
    assert fresh.cell("coherence", row) == ref.cell("coherence", row) != before
    assert fresh.summary(fresh.specs[0]) == ref.summary(fresh.specs[0]) != first.summary(first.specs[0])
    assert len(list(views_dir(store).glob(f"{rid}-*.npz"))) == 1  # the old state is removed
    if store.engine.dialect.name == "postgresql":  # a second dashboard server (another EVAL_HOME) rebuilds them
        import os

        os.environ["EVAL_HOME"] = os.environ["EVAL_HOME"] + "-other-server"
        assert not list(views_dir(store).glob("*.npz"))
        other = open_view(store, rid)
        assert other.summary(other.specs[0]) == ref.summary(other.specs[0])
        assert len(list(views_dir(store).glob(f"{rid}-*.npz"))) == 1


def views_dir(store):
    from evaluators.read.columns import views_dir

    return views_dir(store)


def test_rows_tab_puts_scores_and_verdicts_first_coloured(tmp_path, monkeypatch):
    """AppTest: the Rows tab's columns are row number (1-based), score, verdict, then the text; a passing
    row's score and verdict are green, a failing row's red."""
    import re

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    from ui.rows import FAIL_STYLE, PASS_STYLE

    home = tmp_path / "evalhome"
    monkeypatch.setenv("EVAL_HOME", str(home))
    st.cache_resource.clear()
    st.cache_data.clear()
    store = default_store(home)
    did = store.save_dataset(load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(5)]))
    rid = store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 3}}, "h", "colours")
    store.write_results(rid, [Result(i, "coherence", 0, "ok", float(i + 1), {"coherence": float(i + 1)}) for i in range(5)])
    store.update_run(rid, status="completed")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/results.py")
    at.query_params.update({"run": rid, "view": "Rows"})
    at.run()
    assert not at.exception
    table = at.dataframe[0]
    assert list(table.value.columns) == ["#", "coherence", "coherence verdict", "query", "response"]
    assert list(table.value["#"]) == [1, 2, 3, 4, 5]
    css = table.proto.arrow_data.styler.styles
    styled = {}
    for selectors, style in re.findall(r"([^{}]+)\{\s*([^}]*?)\s*\}", css):
        for sel in selectors.split(","):
            row, col = map(int, re.search(r"row(\d+)_col(\d+)", sel).groups())
            styled[(row, col)] = style.strip()
    # scores 1 and 2 fail at threshold 3 (red); 3, 4 and 5 pass (green); columns 1 and 2 are score and verdict
    assert {k: v for k, v in styled.items()} == {(r, c): FAIL_STYLE if r < 2 else PASS_STYLE for r in range(5) for c in (1, 2)}
    st.cache_resource.clear()
