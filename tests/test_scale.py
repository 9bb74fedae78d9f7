"""The engine at scale: memory flat in the rows, adaptive to a judge's rate limit.

Real parts only: the loopback OpenAI-compatible judge runs in its own process (so its bookkeeping
is not traced here), SQLite holds the results.
"""
from __future__ import annotations

import json
import tracemalloc

from evaluators import prepare_run
from evaluators.judge import JudgeConfig
from evaluators import runner as runner_mod
from evaluators.runner import Runner
from evaluators.store import Store
from tests.judge_server import JudgeServerProcess


def write_rows(path, n: int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"query": f"Question {i}: what does the report on item {i} conclude?",
                                "response": f"Answer {i}: the report concludes that item {i} is " + "fine " * 20}) + "\n")
    return str(path)


def traced_peak(tmp_path, server_url: str, n: int) -> int:
    """Peak memory traced while one judged run of ``n`` rows runs (the dataset, loaded before, excluded)."""
    store = Store(f"sqlite:///{tmp_path}/m{n}.db")
    cfg = JudgeConfig(model="m", provider="compatible", base_url=server_url, concurrency=16, timeout=10)
    rid = prepare_run(store, write_rows(tmp_path / f"rows{n}.jsonl", n), ["fluency"], judge=cfg)
    runner = Runner(store, rid)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert runner.run() == "completed"
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    run = store.get_run(rid)
    assert run["tasks_done"] == n and run["tasks_errored"] == 0
    return peak


def test_a_judged_runs_memory_stays_flat_as_rows_grow(tmp_path, monkeypatch):
    """4x the rows: all tasks planned, rendered and in flight at once grew memory with the rows
    (100,000 rows x 6 metrics peaked at 3.6 GB); workers pulling from a bounded queue fed chunk
    by chunk keep it flat. Chunks of 100 tasks, so both runs span several (tracing is slow)."""
    monkeypatch.setattr(runner_mod, "CHUNK", 100, raising=False)
    with JudgeServerProcess() as server:
        traced_peak(tmp_path, server.url, 20)  # first call's one-off imports and pools, not the rows' cost
        small = traced_peak(tmp_path, server.url, 300)
        large = traced_peak(tmp_path, server.url, 1200)
    assert large < 1.3 * small, (small, large)
