"""Workers of the job queue sharing one run (issue 19): PostgreSQL store, the loopback judge at 300 ms.

    python bench/queue_workers.py [--rows 3000] [--latency 0.3] [--concurrency 16] [--chunk-rows N]

Without --chunk-rows, submit sizes the jobs itself (a few for each live worker: run.chunked.default_chunk_rows),
as a team's runs are.

One run of ROWS rows x 1 judge metric (fluency), each scenario on a fresh database (so no judge cache):

1. one worker;
2. three workers: wall time from submit (the workers already up and waiting, as a team's are) to the run's
   end, and the speed-up over one (target >= 2.5x);
3. three workers, one killed with SIGKILL once a third of the rows are stored: every row scored exactly
   once (one result per row, the judge asked again at most the calls that were in flight), and every
   row's value equal to the single worker's.

The judge server runs in its own process (as a real judge is); PostgreSQL is Debian's, started in a
temporary folder (tests/pg.py). Workers are ``python -m evaluators worker`` processes.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_data(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"r{i}", "query": f"What does item {i} say?",
                                "response": f"Item {i} says the shipment {i * 7 % 1000} arrived on time."}) + "\n")


def env(url: str) -> dict[str, str]:
    return dict(os.environ, EVAL_DATABASE_URL=url, PYTHONPATH=str(ROOT))


def scenario(pg, judge, data: Path, args, workers: int, kill: bool = False) -> dict:
    from evaluators.store.store import Store

    url = pg.new_database()
    store = Store(url)
    before = judge.stats()["calls"]
    # the team's workers are up before the run is submitted (as in a deployment): started, then waited for
    procs = [subprocess.Popen([sys.executable, "-m", "evaluators", "worker"], env=env(url), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    while True:
        with store.engine.connect() as c:
            try:
                if c.exec_driver_sql("SELECT count(*) FROM procrastinate_workers").scalar() >= workers:
                    break
            except Exception:  # noqa: BLE001 — the queue's tables are not made yet
                c.rollback()
        time.sleep(0.1)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "evaluators", "submit", str(data), "--metrics", "fluency",
                        "--judge-base-url", judge.url, "--concurrency", str(args.concurrency),
                        *(["--chunk-rows", str(args.chunk_rows)] if args.chunk_rows else [])], env=env(url), capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(p.stderr)
    rid = p.stdout.split()[-1]
    killed_at = None
    try:
        while True:
            run = store.get_run(rid)
            if run["status"] in ("completed", "failed", "cancelled"):
                break
            if kill and killed_at is None and store.result_count(rid) >= args.rows // 3:
                procs[0].send_signal(signal.SIGKILL)
                killed_at = time.perf_counter() - t0
            time.sleep(0.1)
        wall = time.perf_counter() - t0
    finally:
        for q in procs:
            q.terminate()
        for q in procs:
            q.wait()
    results = store.load_results(rid)
    rows = [r.row_idx for r in results]
    with store.engine.connect() as c:
        chunks = c.exec_driver_sql("SELECT worker, attempts, stop - start FROM run_chunks").all()
    return {"workers": workers, "killed_at_s": killed_at, "status": run["status"], "wall_s": round(wall, 2),
            "results": len(results), "distinct_rows": len(set(rows)), "ok": sum(r.status == "ok" for r in results),
            "judge_calls": judge.stats()["calls"] - before, "workers_used": len({w.rsplit(':', 1)[1] for w, _, _ in chunks}),
            "chunks": len(chunks), "largest_chunk": max(n for _, _, n in chunks),
            "chunks_taken_twice": sum(a > 1 for _, a, _ in chunks),
            "values": {r.row_idx: r.value for r in results}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--chunk-rows", type=int, help="rows a job (default: submit's own sizing)")
    args = ap.parse_args()
    from tests.judge_server import JudgeServerProcess
    from tests.pg import PostgresServer

    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as pg, JudgeServerProcess(latency=args.latency) as judge:
        data = Path(tmp) / "data.jsonl"
        make_data(data, args.rows)
        one = scenario(pg, judge, data, args, 1)
        three = scenario(pg, judge, data, args, 3)
        killed = scenario(pg, judge, data, args, 3, kill=True)
    for s in (one, three, killed):
        values = s.pop("values")
        s["values_equal_single_worker"] = values == one_values if s is not one else True
        if s is one:
            one_values = values
        print(json.dumps(s))
    print(json.dumps({"speedup_3_over_1": round(one["wall_s"] / three["wall_s"], 2), "target": 2.5,
                      "limit_1_worker_s": round(args.rows * args.latency / args.concurrency, 1),
                      "load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
