"""The engine at scale: memory flat in the rows, adaptive to a judge's rate limit.

Real parts only: the loopback OpenAI-compatible judge runs in its own process (so its bookkeeping
is not traced here), SQLite holds the results.
"""
from __future__ import annotations

import json
import tracemalloc

import pytest

from evaluators import prepare_run
from evaluators.judge.config import JudgeConfig
from evaluators.run import runner as runner_mod
from evaluators.run import writes as writes_mod
from evaluators.run.runner import Runner
from evaluators.store.store import Store
from tests.judge_server import JudgeServerProcess
from tests.conftest import default_store, store_url_in


def write_rows(path, n: int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"query": f"Question {i}: what does the report on item {i} conclude?",
                                "response": f"Answer {i}: the report concludes that item {i} is " + "fine " * 20}) + "\n")
    return str(path)


def traced_peak(tmp_path, server_url: str, n: int) -> int:
    """Peak memory traced while a judged run of ``n`` rows is stored, run and written out as the CLI
    does (dataset saved, run, rows.jsonl and metrics.json); the dataset, parsed before, is excluded."""
    from evaluators.data.loading import load_dataset
    from evaluators.read.outputs import write_run_outputs

    store = Store(store_url_in(tmp_path, f"m{n}"))
    cfg = JudgeConfig(model="m", provider="compatible", base_url=server_url, concurrency=16, timeout=10)
    ds = load_dataset(write_rows(tmp_path / f"rows{n}.jsonl", n))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        rid = prepare_run(store, ds, ["fluency"], judge=cfg)
        assert Runner(store, rid).run() == "completed"
        summary = write_run_outputs(store, rid, tmp_path / f"out{n}")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    run = store.get_run(rid)
    assert run["tasks_done"] == n and run["tasks_errored"] == 0
    assert summary.metrics()["fluency.scored_rows"] == n
    assert sum(1 for _ in open(tmp_path / f"out{n}" / "rows.jsonl", encoding="utf-8")) == n
    return peak


def test_a_judged_runs_memory_stays_flat_as_rows_grow(tmp_path, monkeypatch):
    """4x the rows: all tasks planned, rendered and in flight at once grew memory with the rows
    (100,000 rows x 6 metrics peaked at 3.6 GB); workers pulling from a bounded queue fed chunk
    by chunk keep it flat. The whole path the CLI takes after parsing is traced: the dataset is saved
    in batches, read back from the store a chunk at a time, settled keys are a bitmap, and the
    outputs are streamed from the store (one shared cell per distinct outcome for the aggregates).
    Chunks of 100 tasks, 100 records, at most 50 results held before a write and one write queued to the
    store's thread, so both runs span several (tracing is slow).

    The peak also holds what is in flight at that instant (a socket's 256 KiB read buffer, results waiting
    for a store slowed by a loaded machine, a batch being bound for a write), and a run of 300 rows ends
    before it reaches its plateau: 300, 2,400 and 9,600 rows peaked at 1.7-1.8, 2.0-2.5 and 2.0-2.1 MB here,
    and CI's PostgreSQL pass, beside the SQLite pass, saw 1.76 and 2.84 MB (513 bytes a row). So the bound
    is on the growth per row over 8x the rows, 1,000 bytes a row (2.1 MB): every task planned at once cost
    3.5 KB a row, a result kept a row ~2 KB."""
    from evaluators.store import store as store_mod

    monkeypatch.setattr(runner_mod, "CHUNK", 100, raising=False)
    monkeypatch.setattr(store_mod, "RECORD_CHUNK", 100)
    monkeypatch.setattr(runner_mod, "PENDING_MAX", 50)
    monkeypatch.setattr(writes_mod, "WRITES_QUEUED", 1)
    with JudgeServerProcess() as server:
        traced_peak(tmp_path, server.url, 20)  # first call's one-off imports and pools, not the rows' cost
        small = traced_peak(tmp_path, server.url, 300)
        large = traced_peak(tmp_path, server.url, 2400)
    assert (large - small) / (2400 - 300) < 1000, (small, large)


# ---------------------------------------------------------------------------- rate limits
@pytest.mark.timing
def test_a_run_sustains_a_rate_limited_judge_without_drowning_in_429s(tmp_path):
    """A server allowing R = 40 calls/s (token bucket of 10, 429 + Retry-After beyond), 50 ms a call:
    concurrency 32 is 16x what R needs. A fixed pool retrying on Retry-After had most of its calls
    answered 429; the adaptive limiter sustains >= 0.9 R with under 5% of calls answered 429."""
    from bench.rate_limits import measure

    m = measure(40, 10, 600, 0.05, 32, str(tmp_path))
    assert m["status"] == "completed" and m["ok"] == 600, m
    assert m["sustained"] >= 0.9 * 40, m
    assert m["share_429"] < 0.05, m


@pytest.mark.timing
def test_rpm_alone_keeps_a_run_under_its_budget(tmp_path):
    """--rpm 1200 (20/s) against a judge that would answer 100 calls in a fraction of a second:
    after the bucket's one second of saving, calls leave at 20/s. Counted where they arrive: in any one
    second the judge gets at most the 20 saved up and 20 more (39 here unloaded), plus 10 for calls a busy
    machine held up half a second and delivered bunched. Without the limit all 101 arrive within moments;
    at twice the limit, 80 in a second."""
    from bench.rate_limits import measure

    m = measure(0, 0, 100, 0.0, 16, str(tmp_path), rpm=1200, server_rate=False)
    assert m["status"] == "completed" and m["ok"] == 100, {k: v for k, v in m.items() if k != "arrivals"}
    at = m["arrivals"]
    assert len(at) == 100 + 1  # the judge check and 100 rows
    most = max(sum(1 for b in at if a <= b < a + 1.0) for a in at)
    assert most <= 20 + 20 + 10, most
    assert m["elapsed"] >= (100 + 1 - 20) / 20  # (a lower bound: a busy machine only adds to it)
    assert m["limited"] == 0


def test_reset_headers_follow_openais_documented_forms():
    """x-ratelimit-reset-* as OpenAI documents them ("1s", "6m0s", "20ms"); garbage is ignored."""
    from evaluators.judge.ratelimit import parse_reset

    assert parse_reset("1s") == 1.0
    assert parse_reset("6m0s") == 360.0
    assert parse_reset("20ms") == 0.02
    assert parse_reset("1h2m3.5s") == 3723.5
    assert parse_reset("0.75") == 0.75
    for bad in ("soon", "", None, "-1", "5x"):
        assert parse_reset(bad) is None


def test_remaining_headers_slow_calls_down_before_a_429():
    """The last request of the window taken (remaining 0, reset in 1.5 s): new calls wait until
    then; with requests left, they do not."""
    from evaluators.judge.ratelimit import RateLimiter

    now = [100.0]
    lim = RateLimiter(8, clock=lambda: now[0])
    lim.inflight = 1
    lim.release(200, {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1.5s"})
    assert lim.waiting_for() == 0.0
    lim.inflight = 1
    lim.release(200, {"X-RateLimit-Remaining-Requests": "0", "X-RateLimit-Reset-Requests": "1.5s"})
    assert lim.waiting_for() == 1.5
    lim.inflight = 1
    lim.release(200, {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"})
    assert lim.waiting_for() == 360.0


def test_a_run_says_until_when_it_is_rate_limited(tmp_path, new_store_url):
    """A 429 asking for 3 s: while the run waits, the store says until when (for the dashboard)."""
    import datetime as dt
    import threading
    import time

    from tests.judge_server import Action, JudgeServer

    with JudgeServer() as server:
        server.queue.append(Action(status=429, headers={"Retry-After": "3"}))
        store = Store(new_store_url("rl"))
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, concurrency=4, timeout=10)
        rid = prepare_run(store, write_rows(tmp_path / "rows.jsonl", 5), ["fluency"], judge=cfg)
        out: dict = {}
        th = threading.Thread(target=lambda: out.setdefault("status", Runner(store, rid).run()))
        th.start()
        seen = None
        deadline = time.monotonic() + 10
        while th.is_alive() and time.monotonic() < deadline and seen is None:
            seen, at = store.get_run(rid)["rate_limited_until"], dt.datetime.now(dt.timezone.utc)
            time.sleep(0.1)
        th.join(30)
    assert out["status"] == "completed"
    assert seen is not None
    left = (seen.replace(tzinfo=dt.timezone.utc) if seen.tzinfo is None else seen) - at
    assert dt.timedelta(seconds=0) < left <= dt.timedelta(seconds=3), left
    assert store.get_run(rid)["rate_limited_until"] is None  # not waiting any more


def test_the_dashboard_says_a_run_is_rate_limited_and_for_how_long(tmp_path):
    """A running run whose judge asked it to wait 20 s: its progress line says so (not a frozen count)."""
    import datetime as dt

    import streamlit as st
    from streamlit.testing import v1 as st_testing

    from evaluators.store.schema import utcnow
    from tests.conftest import ROOT, SINGLE

    st.cache_resource.clear()  # the dashboard's store is cached per process: not an earlier test's
    st.cache_data.clear()

    store = default_store(tmp_path / "evalhome")  # the dashboard's (EVAL_HOME per test)
    cfg = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1")
    rid = prepare_run(store, str(SINGLE), ["fluency"], judge=cfg)
    now = utcnow()
    store.update_run(rid, status="running", started_at=now, heartbeat_at=now, tasks_total=31, tasks_done=4,
                     rate_limited_until=now + dt.timedelta(seconds=20))
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/results.py")
    at.query_params.update(run=rid)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [str(p.proto.text) for p in at.get("progress")]
    assert any("4/31 scored" in t and "rate limited, waiting" in t for t in texts), texts
    wait = int(next(t for t in texts if "waiting" in t).split("waiting ")[1].split(" s")[0])
    assert 15 <= wait <= 20, texts


# ---------------------------------------------------------------------------- streamed outputs
def _reference(store, rid, thresholds=None):
    """rows.jsonl lines and metrics.json as RunResults (everything in memory) makes them."""
    from evaluators import open_results
    from evaluators.read.exports import jsonl_text

    res = open_results(store, rid, thresholds)
    rows = [json.loads(line) for line in jsonl_text(res.rows()).splitlines()]
    return rows, json.loads(json.dumps(res.metrics()))


def _streamed(store, rid, out, thresholds=None):
    from evaluators.read.outputs import write_run_outputs

    summary = write_run_outputs(store, rid, out, thresholds)
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics == json.loads(json.dumps(summary.metrics()))
    return rows, metrics


def test_streamed_rows_and_metrics_equal_the_in_memory_results(tmp_path, monkeypatch, judge_server, judge_config, new_store_url):
    """write_run_outputs reads records and results a chunk at a time (7 rows here, so the 31 rows
    and 20 conversations span several) and keeps one slim cell per row for the aggregates; its files
    must equal what RunResults builds from every result in memory: judged and classic metrics,
    errored rows, skipped turns, pending rows and a threshold override."""
    from evaluators import evaluate, prepare_run
    from evaluators.store import store as store_mod
    from evaluators.data.loading import load_dataset
    from tests.conftest import CONVERSATIONS, SINGLE
    from tests.judge_server import Action

    monkeypatch.setattr(store_mod, "RECORD_CHUNK", 7)
    store = Store(new_store_url("s"))
    ds = load_dataset(SINGLE)
    judge_server.on_prompt(ds.records[3]["response"], *[Action(status=500)] * 10)  # errors for good
    judge_server.on_prompt(ds.records[9]["response"], Action(content="no verdict here"))  # unusable reply
    single = evaluate(SINGLE, ["coherence", "f1_score", "rouge"], judge=judge_config, store=store).run_id
    conv = evaluate(CONVERSATIONS, ["coherence", "groundedness"], judge=judge_config, store=store).run_id
    # a run stopped part-way: rows 0-11 stored, the rest pending
    part = prepare_run(store, SINGLE, ["f1_score", "coherence"], judge=judge_config, name="part")
    store.write_results(part, [r for r in store.load_results(single)
                               if r.row_idx < 12 and r.metric in ("f1_score", "coherence")])
    for rid, thresholds in ((single, None), (single, {"coherence": 5, "rouge": 0.9}), (conv, None), (part, None)):
        want_rows, want_metrics = _reference(store, rid, thresholds)
        got_rows, got_metrics = _streamed(store, rid, tmp_path / f"out-{rid}-{bool(thresholds)}", thresholds)
        assert got_rows == want_rows and got_metrics == want_metrics
    # the cases above are really there
    rows, metrics = _streamed(store, single, tmp_path / "again")
    assert rows[3]["outputs.coherence.coherence_error"] and rows[9]["outputs.coherence.coherence_error"]
    assert metrics["coherence.errored_rows"] == 2 and metrics["coherence.scored_rows"] == 29
    assert _streamed(store, part, tmp_path / "part")[1]["coherence.pending_rows"] == 19
    assert _streamed(store, conv, tmp_path / "conv")[1]["groundedness.scored_rows"] == 20


def test_a_stored_datasets_records_are_read_in_chunks_and_equal_the_loaded_ones(tmp_path, monkeypatch, new_store_url):
    from evaluators.store import store as store_mod
    from evaluators.data.loading import load_dataset
    from evaluators.store.records import KeySet
    from tests.conftest import CONVERSATIONS

    monkeypatch.setattr(store_mod, "RECORD_CHUNK", 6)
    store = Store(new_store_url("s"))
    ds = load_dataset(CONVERSATIONS)
    did = store.save_dataset(ds)
    lazy = store.open_dataset(did)
    assert len(lazy) == len(ds) == 20
    assert list(lazy.records) == ds.records and lazy.records[19] == ds.records[19] and lazy.records[-1] == ds.records[-1]
    assert [lazy.turns(i) for i in range(20)] == [ds.turns(i) for i in range(20)]
    assert lazy.fields() == ds.fields() and lazy.row_no(7) == ds.row_no(7) == 8
    assert store.get_dataset(did).records == ds.records  # the whole-in-memory read still works
    keys = {(0, "a", 0), (7, "a", 0), (8, "a", 0), (1_000_000, "b", 3), (5, "b", 3)}
    ks = KeySet(keys)
    assert ks == keys and set(ks) == keys and len(ks) == 5
    assert (6, "a", 0) not in ks and (7, "a", 1) not in ks and (999_999, "b", 3) not in ks


# ---------------------------------------------------------------------------- streamed loading
def _jsonl_cases(tmp_path):
    from tests.conftest import CONVERSATIONS, ROOT, SINGLE

    cases = [(SINGLE, None), (CONVERSATIONS, None), (SINGLE, {"ground_truth": "context"})]
    cases += [(p, None) for p in sorted((ROOT / "tests" / "hostile").glob("*.jsonl"))]
    made = {  # conversions (a number where text belongs, JSON text in a context), blank lines, a BOM
        "convert.jsonl": b'\xef\xbb\xbf{"question": 6, "answer": 42, "context": "[\\"a\\", \\"b\\"]"}\n\n'
                         b'{"question": "q2", "answer": "r2", "extra": 1}\n',
        "missing.jsonl": b'{"query": "q", "response": ""}\n{"query": "q"}\n',
        "no_newline_at_end.jsonl": b'{"query": "q", "response": "r"}\n{"query": "q2", "response": "r2"}',
    }
    for name, raw in made.items():
        (tmp_path / name).write_bytes(raw)
        cases.append((tmp_path / name, None))
    cases.append((tmp_path / "nowhere.jsonl", None))
    return cases


@pytest.mark.parametrize("keep", [True, False], ids=["small-file-kept", "streamed"])
def test_a_jsonl_file_loaded_streaming_is_the_dataset_load_dataset_makes(tmp_path, monkeypatch, keep):
    """Streaming (two passes over the file, rows never held) must give the same records, columns,
    mapping, row numbers, hash and fields as load_dataset, and the same error, word for word, on
    every hostile file; so must a small file parsed once, its checked records kept."""
    from evaluators.data import loading as data
    from evaluators.data.loading import FileDataset, load_dataset, load_dataset_streaming

    monkeypatch.setattr(data, "KEEP_BYTES", data.KEEP_BYTES if keep else -1)

    streamed_ok = 0
    for path, mapping in _jsonl_cases(tmp_path):
        try:
            want = load_dataset(path, mapping)
        except Exception as e:  # noqa: BLE001
            try:
                load_dataset_streaming(path, mapping)
            except Exception as got:  # noqa: BLE001
                assert (type(got), str(got)) == (type(e), str(e)), path
            else:
                raise AssertionError(f"{path}: streaming accepted what load_dataset refuses: {e}")
            continue
        got = load_dataset_streaming(path, mapping)
        streamed_ok += isinstance(got, FileDataset)
        if isinstance(got, FileDataset):
            assert (got.records.kept is not None) == keep, path
            first = list(got.records)
            for rec in first:
                rec.clear()  # what a reader does to the records it is given stays with it
            assert list(got.records) == want.records, path
        assert list(got.records) == want.records and len(got) == len(want), path
        assert (got.columns, got.mapping, got.shape, got.detected, got.source, got.name) == \
               (want.columns, want.mapping, want.shape, want.detected, want.source, want.name), path
        assert list(got.row_numbers) == want.row_numbers and got.content_hash == want.content_hash, path
        assert got.fields() == want.fields(), path
    assert streamed_ok >= 5  # the good files really went the streaming way


def test_a_rows_jsonl_line_is_what_jsonl_text_writes_nan_and_infinities_included():
    """rows.jsonl's writer skips the per-value clean-up when a row has no NaN or infinity; with one
    (top level or nested) the line must still be exports.jsonl_text's: top-level ones as null."""
    from evaluators.read.exports import jsonl_text
    from evaluators.read.outputs import _row_line

    rows = [{"inputs.q": "é “q” \u2028", "outputs.x.v": 0.5, "outputs.x.ok": True, "outputs.x.n": None,
             "outputs.x.props": {"a": [1, 2.5]}},
            {"outputs.x.v": float("nan"), "outputs.x.w": float("inf"), "outputs.x.z": -float("inf"), "i": 3},
            {"outputs.x.props": {"a": float("nan")}, "outputs.x.v": 1.0}]
    for row in rows:
        assert _row_line(row) == jsonl_text([row])
    assert json.loads(_row_line(rows[1]))["outputs.x.v"] is None
