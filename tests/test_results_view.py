"""The read API the dashboard uses (values, errors, threshold curve, paged query), against hand counts."""
import math

import pytest

from evaluators import load_dataset
from evaluators.core.registry import get_metric
from evaluators.read.results import RunResults
from evaluators.store.schema import Result


@pytest.fixture
def res():
    ds = load_dataset([{"query": f"q{i}", "response": f"answer {i}"} for i in range(6)])
    coh, f1 = get_metric("coherence"), get_metric("f1_score")
    scores = [5, 4, 3, 2, None, 1]  # row 4 errors
    results = [Result(i, "coherence", 0, "ok", value=float(v), outputs={coh.primary: float(v)})
               if v is not None else Result(i, "coherence", 0, "error", error="judge said nothing")
               for i, v in enumerate(scores)]
    results += [Result(i, "f1_score", 0, "ok", value=v, outputs={f1.primary: v})
                for i, v in enumerate([1.0, 0.5, 0.25, 0.0, 0.75])]  # row 5 pending
    return RunResults(ds, results, [coh, f1])


def test_values_and_errors(res):
    v = res.values("coherence")
    assert list(v[:4]) == [5, 4, 3, 2] and math.isnan(v[4]) and v[5] == 1
    assert math.isnan(res.values("f1_score")[5])
    assert res.errored_rows() == 1
    assert res.errors() == [(4, "coherence", "judge said nothing")]
    assert len(res) == 6 and res.cell("f1_score", 5) is None


def test_threshold_curve_counts_by_hand(res):
    curve = res.threshold_curve("coherence")
    # scored values 5, 4, 3, 2, 1: at threshold t, pass = values >= t
    assert list(curve["threshold"]) == [1, 2, 3, 4, 5]
    assert list(curve["passed"]) == [5, 4, 3, 2, 1]
    assert list(curve["pass_rate"]) == [1.0, 0.8, 0.6, 0.4, 0.2]
    f1 = res.threshold_curve("f1_score", [0.3, 0.5])
    assert list(f1["passed"]) == [3, 3] and list(f1["scored"]) == [5, 5]  # 1.0, 0.5, 0.75 pass at both (0.25, 0.0 fail)


def test_query_pages_and_counts(res):
    total, page = res.query(sort="coherence", descending=True, offset=1, limit=2)
    assert total == 6
    assert list(page.index) == [1, 2]  # coherence 5, 4, 3, ...: the 2nd and 3rd
    total, page = res.query(metric="coherence", verdict="fail")  # default threshold 3: 2 and 1 fail
    assert total == 2 and list(page.index) == [3, 5]


def test_two_builders_of_one_datasets_search_text_at_once_both_succeed(tmp_path, monkeypatch, new_store_url):
    """Two servers (or two runs of one dataset) building the same search files at the same moment: each
    writes its own temporary files, so neither loses its file to the other's rename."""
    import threading

    import numpy as np

    from evaluators import Store
    from evaluators.read.columns import SearchText

    store = Store(new_store_url("evals"))
    ds = load_dataset([{"query": f"Question {i}", "response": f"Answer {i} about PYTHON"} for i in range(50)])
    did = store.save_dataset(ds)
    both_saved = threading.Barrier(2, timeout=30)
    real_save = np.save

    def save_then_wait(*a, **k):  # each builder has written its offsets before either moves them in place
        real_save(*a, **k)
        both_saved.wait()

    monkeypatch.setattr(np, "save", save_then_wait)
    texts = [SearchText(store, did, store.get_dataset(did), tmp_path / "views") for _ in range(2)]
    failed = []
    threads = [threading.Thread(target=lambda t=t: _build(t, failed)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failed == []
    for t in texts:  # both answer a search, by hand: every row's answer names Python
        assert list(np.nonzero(t.contains("python"))[0]) == list(range(50))
    assert sorted(p.name for p in (tmp_path / "views").iterdir()) == [f"ds-{did}.offsets.npy", f"ds-{did}.search"]


def _build(text, failed: list) -> None:
    try:
        text.ensure()
    except Exception as e:  # noqa: BLE001 — the test reports it
        failed.append(repr(e))
