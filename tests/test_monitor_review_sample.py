"""A review sample of production (issue 32): k judged traces drawn at random in each window, seeded, put in review
queues (one a run the traces were judged in) that the Review page opens as any other; their verdicts then correct
each window's rate. Expected counts and rows are the planted ones."""
from __future__ import annotations

import hashlib

import pytest

from evaluators.store.schema import Result

pytestmark = pytest.mark.both_stores
HOUR = 3600 * 10**9
T0 = 1_764_000_000 * 10**9
# (window, run) of each judged trace: window 0 has 12 in run a, window 1 three in run b, window 2 four in each
PLANTED = [(0, "a")] * 12 + [(1, "b")] * 3 + [(2, "a")] * 4 + [(2, "b")] * 4


def _plant(store, tmp_path) -> dict[tuple[str, int], int]:
    """Returns (run_id, row) -> window of every judged trace (a sampled-out one and an older version's left out)."""
    from evaluators import load_dataset

    store.ensure_monitor_project("shop")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(len(PLANTED))))
    ds = store.save_dataset(load_dataset(data))
    runs = {name: store.create_run(ds, {"metrics": ["coherence"]}, "h", "monitor") for name in ("a", "b")}
    for rid in runs.values():
        store.write_results(rid, [Result(row_idx=i, metric="coherence", turn=0, status="ok", value=4.0 - (i % 3),
                                         outputs={"coherence": 4.0 - (i % 3)}) for i in range(len(PLANTED))])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, None)
    decisions, where = [], {}
    for i, (w, run) in enumerate(PLANTED + [(0, "a")]):
        tid = hashlib.md5(f"t{i}".encode()).hexdigest()
        start = T0 + w * HOUR + i * 10**9
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": "a" * 16, "parent_span_id": "", "name": "chat",
                                          "start_ns": start, "end_ns": start + 10**9}])
        if i < len(PLANTED):
            decisions.append({"trace_id": tid, "decision": "judged", "run_id": runs[run], "row_idx": i})
            where[(runs[run], i)] = w
        else:
            decisions.append({"trace_id": tid, "decision": "sampled_out"})
    store.save_decisions("shop", "quality", 1, decisions)
    return where


def test_k_traces_a_window_in_a_queue_a_run_whose_reviews_correct_each_window(store, tmp_path, capsys):
    from evaluators.cli.main import main
    from evaluators.core.errors import UsageError
    from evaluators.read.monitor_reviewed import reviewed_series
    from evaluators.review.production import sample_production

    where = _plant(store, tmp_path)
    made = sample_production(store, "shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600, 5, seed=7)
    again = sample_production(store, "shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600, 5, seed=7)
    assert [(q["run_id"], q["rows"]) for q in again] == [(q["run_id"], q["rows"]) for q in made]  # seeded
    picked = [(q["run_id"], i) for q in made for i in q["rows"]]
    assert len(set(picked)) == len(picked) and set(picked) <= set(where)
    per_window = {w: sum(where[p] == w for p in picked) for w in range(3)}
    assert per_window == {0: 5, 1: 3, 2: 5}  # k a window; all of a window holding fewer
    for q in made:
        got = store.get_queue(q["queue_id"])
        assert (got["run_id"], got["strategy"], got["metrics"], got["rows"], got["blind"]) == \
            (q["run_id"], "random", ["coherence"], q["rows"], True)
    # a person reviews every trace of the sample: each window gets kappa and a corrected rate
    for q in made:
        for i in q["rows"]:
            store.save_review(q["run_id"], i, "coherence", "ann", 4.0, queue_id=q["queue_id"])
    series = reviewed_series(store, "shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600)
    assert {w: p["reviews"] for w, p in series.items()} == {T0: 5, T0 + HOUR: 3, T0 + 2 * HOUR: 5}
    assert all(p["corrected"] is not None for p in series.values())
    # monitor series --json carries each window's corrected rate (the same reading: tested against ppi-python in
    # test_monitor_review_series), and its judge's rate beside it
    import json
    capsys.readouterr()
    assert main(["monitor", "series", "--project", "shop", "--rule", "quality", "--metric", "coherence", "--json",
                 "--window", "1h", "--since", "2025-11-24T16:00:00Z", "--until", "2025-11-24T19:00:00Z",
                 "--db", store.url]) == 0
    windows = json.loads(capsys.readouterr().out)
    assert [w["corrected"] for w in windows] == [series[T0 + k * HOUR]["corrected"] for k in range(3)]
    with pytest.raises(UsageError, match="does not judge 'fluency'"):
        sample_production(store, "shop", "quality", "fluency", T0, T0 + HOUR, 3600, 5)
    with pytest.raises(UsageError, match="judged no trace"):
        sample_production(store, "shop", "quality", "coherence", T0 + 5 * HOUR, T0 + 6 * HOUR, 3600, 5)
    capsys.readouterr()
    assert main(["monitor", "review-sample", "--project", "shop", "--rule", "quality", "--metric", "coherence",
                 "--per-window", "2", "--window", "1h", "--since", "2025-11-24T16:00:00Z",
                 "--until", "2025-11-24T19:00:00", "--db", store.url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("6 traces to review in ")
    for line in out.splitlines()[1:]:
        qid = line.split()[1].rstrip(":")
        assert store.get_queue(qid)["params"]["per_window"] == 2 and f"&queue={qid})" in line


def _page(project, rule, metric, since_ns, until_ns, window_s):
    from ui.monitor_review import review_sample

    review_sample(project, rule, metric, since_ns, until_ns, window_s)


def test_the_monitoring_control_makes_the_queues_and_links_each(home_store, tmp_path, fresh_caches):
    from streamlit.testing.v1 import AppTest

    from tests.apptest import shown_text

    where = _plant(home_store, tmp_path)
    at = AppTest.from_function(_page, args=("shop", "quality", "coherence", T0, T0 + 3 * HOUR, 3600),
                               default_timeout=60)
    at.run()
    at.number_input(key="monitor.review_sample.k").set_value(4)
    at.button(key="monitor.review_sample.go").click()
    at.run()
    assert not at.exception and not at.error
    assert "11 traces to review in 2 queue(s)." in shown_text(at)  # 4 + 3 + 4
    made = [q for rid in sorted({r for r, _ in where}) for q in home_store.queues(rid)]
    picked = [where[(q["run_id"], i)] for q in made for i in q["rows"]]
    assert len(made) == 2 and {w: picked.count(w) for w in range(3)} == {0: 4, 1: 3, 2: 4}
    links = [e.value for e in at.markdown if "queue" in e.value]
    assert sorted(links) == sorted(f"[Review {len(q['rows'])} traces (queue {q['id']})](review?run={q['run_id']}"
                                   f"&queue={q['id']})" for q in made)
    at2 = AppTest.from_function(_page, args=("shop", "quality", "coherence", T0 + 5 * HOUR, T0 + 6 * HOUR, 3600),
                                default_timeout=60)
    at2.run()
    at2.button(key="monitor.review_sample.go").click()
    at2.run()
    assert not at2.exception and "No sample was made: rule 'quality' judged no trace" in shown_text(at2)
