"""The Results page read as a user reads it (issue 10): AppTest on runs stored with known scores.

Expected numbers are counted by hand from the stored scores, intervals from scipy's Wilson interval.
"""
from __future__ import annotations

import json

import pytest

from evaluators import Store, load_dataset
from evaluators.runner import RunSpec
from evaluators.store import Result, utcnow
from tests.conftest import ROOT

st_testing = pytest.importorskip("streamlit.testing.v1")

# 10 rows: coherence 6 of 10 at or above 3 (60%); f1 scores 3 of 10 at or above 0.5 (30%);
# violence severities, 2 of 10 above 3 (defect rate 20%); protected material true on 1 row (10%).
COHERENCE = [5, 4, 3, 2, 1, 5, 4, 2, 1, 3]
F1 = [0.421348, 0.9, 0.1, 0.55, 0.2, 0.3, 0.5, 0.0, 0.25, 0.05]
VIOLENCE = [0, 1, 4, 0, 2, 7, 0, 3, 1, 0]
PROTECTED = [False] * 9 + [True]
ROWS = [{"query": f"question {i}", "response": f"answer {i}", "ground_truth": f"truth {i}", "context": f"doc {i}"}
        for i in range(10)]


@pytest.fixture(autouse=True)
def _fresh_caches():
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    yield


@pytest.fixture
def home_store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'evalhome' / 'evals.db'}")


def app(page: str | None = None, **params):
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    if page:
        at.switch_page(page)
        at.query_params.update(params)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def judged(i: int, metric: str, value, outputs: dict, reason: str, turn: int = 0) -> Result:
    return Result(i, metric, turn, "ok", value=float(value), outputs=outputs, reason=reason,
                  raw=json.dumps({"reason": reason, "score": value}), prompt_tokens=100, completion_tokens=20,
                  latency_ms=12.0, meta={"model": "loopback"})


def known_results(rows=range(10)) -> list[Result]:
    out = []
    for i in rows:
        out.append(judged(i, "coherence", COHERENCE[i], {"coherence": float(COHERENCE[i])}, f"coherence reason {i}"))
        out.append(Result(i, "f1_score", 0, "ok", value=F1[i], outputs={"f1_score": F1[i]}, reason="ok"))
        out.append(judged(i, "violence", VIOLENCE[i], {"violence_score": float(VIOLENCE[i])}, f"violence reason {i}"))
        out.append(judged(i, "protected_material", float(PROTECTED[i]), {"protected_material_label": PROTECTED[i]},
                          f"protected reason {i}"))
    return out


METRICS = ["coherence", "f1_score", "violence", "protected_material"]


def stored_run(store: Store, results: list[Result], metrics=METRICS, rows=ROWS, status="completed",
               total: int | None = None, thresholds: dict | None = None) -> str:
    """A run stored the way the runner leaves one: dataset, spec, results, progress counters."""
    did = store.save_dataset(load_dataset(rows))
    rid = store.create_run(did, RunSpec(list(metrics), dict(thresholds or {})).to_dict(), "h", "known scores")
    store.write_results(rid, results)
    now = utcnow()
    store.update_run(rid, status=status, started_at=now, heartbeat_at=now,
                     finished_at=None if status == "running" else now,
                     tasks_total=total if total is not None else len(results), tasks_done=len(results))
    return rid


def cards(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def figure(at, key: str) -> dict:
    el = next(e for e in at.get("plotly_chart") if e.proto.id and key in e.proto.id or
              getattr(e.proto, "spec", "") and False)
    return json.loads(el.proto.spec)
