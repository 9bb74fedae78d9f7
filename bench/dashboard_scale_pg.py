"""The dashboard on a 1,000,000-row run stored in PostgreSQL (issue 19), against the 100,000-row targets.

    python bench/dashboard_scale_pg.py [--rows 1000000] [--runs 1000] [--reps 3]

The same store as bench/dashboard_scale.py (one finished run of ``--rows`` rows x 6 metrics, real WildBench
text, 1% of judge results errored, and ``--runs`` - 1 small runs), written into Debian's PostgreSQL started
in a temporary folder (tests/pg.py) with COPY. Then, as there: the run's first open in this process (its
columns built from PostgreSQL and written to ``$EVAL_HOME/views/<database>/``, then the dataset's search
text), and the dashboard (``streamlit run app.py`` with ``EVAL_DATABASE_URL``) measured in headless
Chromium by dashboard_scale.measure: Results page new tab (target 2 s), filter (0.5 s), row selection
(0.5 s), server RSS (< 1 GB), Runs page (1 s). Exits with SKIPPED when ../shared is absent.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import dashboard_scale as ds  # noqa: E402  (the same data, browser measurements and report)


def build(url: str, rows: int, runs: int) -> str:
    """The store of dashboard_scale.build_store, in PostgreSQL through COPY; returns the big run's id."""
    import psycopg

    from evaluators.store.store import Store

    Store(url).engine.dispose()  # the schema
    pool = ds.answers()
    rng = random.Random(10)
    now = dt.datetime(2026, 1, 1, 12)
    mapping = {"query": "query", "response": "response", "ground_truth": "ground_truth"}
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as con, con.cursor() as cur:
        def copy(table: str, cols: str, items) -> None:
            with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as cp:
                for item in items:
                    cp.write_row(item)

        def dataset(did: str, name: str, n: int, make) -> None:
            copy("datasets", "id, name, source, content_hash, shape, detected, n_rows, columns, mapping, row_numbers, "
                 "created_at", [(did, name, name, did * 4, "single", "custom", n, json.dumps(list(mapping)),
                                 json.dumps(mapping), json.dumps(list(range(2, n + 2))), now)])
            copy("dataset_records", "dataset_id, idx, data", ((did, i, json.dumps(make(i))) for i in range(n)))

        def run_rows():
            def one(rid, did, name, metrics, n, created):
                spec = {"metrics": metrics, "thresholds": {}, "templates": {}, "options": {}, "template_texts": {},
                        "judge": {"model": "gpt-4o-mini"} if set(metrics) & set(ds.JUDGE) else None}
                return (rid, did, name, "completed", json.dumps(spec), "h", created, created, created, False,
                        n * len(metrics), n * len(metrics), 0, 0, 0, 0, 0)
            yield one("bigrun000000", "bigdata00000", f"big run · {rows:,} rows x 6 metrics", [*ds.JUDGE, *ds.CLASSIC],
                      rows, now)
            for k in range(runs - 1):
                yield one(f"small{k:07d}", "smalldata000", f"small run {k}", ["f1_score"], 5,
                          now - dt.timedelta(minutes=k + 1))

        def record(i: int) -> dict:
            a, b = pool[i % len(pool)], pool[(i * 7 + 3) % len(pool)]
            return {"query": b["text"][:300], "response": a["text"], "ground_truth": b["text"][:600]}

        def results():
            for i in range(rows):
                a = pool[i % len(pool)]
                base = max(1, min(5, (a["score"] + 1) // 2))
                for m, k in zip(ds.JUDGE, range(3)):
                    if rng.random() < 0.01:
                        yield ("bigrun000000", i, m, 0, "error", None, "null", None, None, "judge timed out after 60 s",
                               None, None, None, False, "null", now)
                        continue
                    score = float(max(1, min(5, base + rng.choice((-1, 0, 0, 1)))))
                    reason = a["strengths"] if k != 1 else a["weaknesses"]
                    yield ("bigrun000000", i, m, 0, "ok", score, json.dumps({m: score}), reason,
                           json.dumps({"reason": reason, "score": score}), None, 900, 60, 850.0, False,
                           json.dumps({"model": "gpt-4o-mini"}), now)
                for m, key, hi in (("f1_score", "f1_score", 0.6), ("bleu", "bleu_score", 0.4)):
                    v = round(rng.random() * hi, 4)
                    yield ("bigrun000000", i, m, 0, "ok", v, json.dumps({key: v}), None, None, None, None, None, None,
                           False, "null", now)
                r = {"rouge_f1_score": round(rng.random() * 0.5, 4), "rouge_precision": round(rng.random(), 4),
                     "rouge_recall": round(rng.random(), 4)}
                yield ("bigrun000000", i, "rouge", 0, "ok", r["rouge_f1_score"], json.dumps(r), None, None, None, None,
                       None, None, False, "null", now)

        dataset("bigdata00000", f"wildbench-answers-{rows}.jsonl", rows, record)
        dataset("smalldata000", "small.jsonl", 5, lambda i: {"query": f"q{i}", "response": f"r{i}", "ground_truth": f"g{i}"})
        copy("runs", "id, dataset_id, name, status, spec, spec_hash, created_at, started_at, finished_at, "
             "cancel_requested, tasks_total, tasks_done, tasks_errored, judge_calls, cache_hits, prompt_tokens, "
             "completion_tokens", run_rows())
        copy("results", "run_id, row_idx, metric, turn, status, value, outputs, reason, raw, error, prompt_tokens, "
             "completion_tokens, latency_ms, cached, meta, created_at", results())
        con.commit()
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.execute("VACUUM ANALYZE")  # as a long-lived database would be (autovacuum)
    return "bigrun000000"


def expected(url: str, run_id: str) -> dict:
    """What each view must show, from the engine; prints the first open's build times."""
    from evaluators import Store
    from evaluators.read.columns import views_dir
    from evaluators.read.view import open_view

    store = Store(url)
    folder = views_dir(store)
    for old in folder.glob("*") if folder.exists() else ():
        old.unlink()  # measure the first build
    t = time.perf_counter()
    res = open_view(store, run_id)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    res._cols.search.ensure()
    search_s = time.perf_counter() - t
    expect = {"all": len(res), "fail": res.query(verdict="fail", limit=0)[0],
              "python": res.query(verdict="fail", search="python", limit=0)[0],
              "function": res.query(verdict="fail", search="function", limit=0)[0],
              "charts": 2, "ref_charts": 2, "runs_text": f"{len(store.run_rows()):,} runs"}
    print(f"first open of the run (columns built from PostgreSQL, written to {folder}): {build_s:.1f} s; "
          f"search text of the dataset built and written: {search_s:.1f} s")
    return expect


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if not ds.WILDBENCH.is_dir():
        print(f"SKIPPED: WildBench answers not found at {ds.WILDBENCH} (../shared is absent); nothing measured.")
        return
    from tests.pg import PostgresServer

    with PostgresServer() as pg, tempfile.TemporaryDirectory(prefix="evaldash-pg-") as home:
        url = pg.new_database()
        os.environ["EVAL_HOME"] = home  # the views this process builds are the ones the server then reads
        t = time.perf_counter()
        run_id = build(url, args.rows, args.runs)
        print(f"store: {args.rows:,} rows x 6 metrics + {args.runs - 1} small runs written to PostgreSQL with COPY "
              f"in {time.perf_counter() - t:.0f} s")
        expect = expected(url, run_id)
        proc, web = ds.serve(ROOT, Path(home), database_url=url)
        try:
            got = ds.measure(web, run_id, proc.pid, expect, args.reps)
            with open(f"/proc/{proc.pid}/status") as f:  # VmRSS counts the memory-mapped search text's pages too
                mem = {k: int(v.split()[0]) // 1024 for k, v in (line.split(":", 1) for line in f)
                       if k in ("VmRSS", "RssAnon", "RssFile")}
        finally:
            proc.terminate()
            proc.wait(10)
        ds._report(got, args.runs)
        print(f"server memory after it all (MB): {mem} (RssFile: pages of files mapped, e.g. the search text)")


if __name__ == "__main__":
    main()
