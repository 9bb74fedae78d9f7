"""The monitor's receiver under load (issue 31, Scale): 8 senders POST protobuf batches of 512 spans as fast as
they are answered, first to a bare receiver on the same stack (Starlette + uvicorn, the same decoder) that only
parses and appends each span to a file, then to `python -m evaluators monitor serve` on a store; each for
--seconds, or (--spans N) until N spans have been acknowledged. Prints spans/s acknowledged by each and their
ratio (goal >= 0.5), the receiver's RSS after 100,000 spans and at the end (after N spans; goal: within 1.2x), and
how many acknowledged spans the store lacks (goal 0), checked span by span; then one JSON line of the figures.

    python bench/monitor_receiver.py [--seconds 60 | --spans 1000000] [--senders 8] [--batch 512]
                                     [--store sqlite|postgresql] [--db URL] [--keep]

--store postgresql without --db starts a throwaway PostgreSQL (tests/pg.py) on disk with PostgreSQL's own
durability (fsync, synchronous commit), as a team runs it; the tests' servers turn both off.
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARE = """
import json, sys
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
import uvicorn
from evaluators.monitor import otlp
from evaluators.monitor.serve import listen
out = open(sys.argv[1], "a", encoding="utf-8")
async def traces(request):
    spans, refused = otlp.decode_traces(await request.body(), otlp.PROTOBUF)
    out.write("".join(json.dumps(s) + "\\n" for s in spans)); out.flush()
    return Response(otlp.encode_response("traces", len(refused), "", otlp.PROTOBUF), media_type=otlp.PROTOBUF)
sock = listen("127.0.0.1", 0)
print(f"receiving OTLP/HTTP on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]),
                              log_level="warning", access_log=False, lifespan="off")).run(sockets=[sock])
"""
RSS_FIRST = 100_000  # spans acknowledged when the first RSS is read


def span_int(sender: int, batch: int, i: int) -> int:
    """Span ids say which sender and batch sent them (so the store can be checked against what was acknowledged)."""
    return (sender << 40) + (batch << 16) + i + 1


def body(sender: int, batch: int, size: int) -> bytes:
    from tests.monitor_procs import pb_span, traces_request

    base = span_int(sender, batch, 0) - 1
    return traces_request([pb_span(base + i // 4 + 1, base + i + 1, parent=0 if i % 4 == 0 else base + i - i % 4 + 1,
                                   name="chat gpt-4o", attributes={"gen_ai.request.model": "gpt-4o",
                                                                   "gen_ai.usage.input_tokens": 120})
                           for i in range(size)])


def sender(port: int, token: str, k: int, size: int, until: float, target: float, acked, batches) -> None:
    """Send batch after batch until the time is up or ``target`` spans are acknowledged (by all senders); a batch
    answered 429/503 is sent again, as an OTLP exporter does; any other answer ends the bench."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
    batch = 0
    while time.time() < until and acked.value < target:
        conn.request("POST", "/v1/traces", body=body(k, batch, size), headers=headers)
        r = conn.getresponse()
        text = r.read()
        if r.status == 200:
            with acked.get_lock():
                acked.value += size
            batch += 1
            batches[k] = batch
        elif r.status in (429, 503):
            time.sleep(float(r.getheader("Retry-After", "1")) / 10)  # a bench sender: retry soon, same batch
        else:
            raise SystemExit(f"sender {k}: HTTP {r.status}: {text[:300]!r}")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def drive(argv: list[str], token: str, a: argparse.Namespace) -> dict:
    """Start the receiver ``argv``, send to it with ``a.senders`` processes, stop it; the figures."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(proc.stdout.readline().split("http://127.0.0.1:")[1].split()[0])
        acked, batches = mp.Value("q", 0), mp.Array("q", a.senders)
        until = time.time() + a.seconds if a.spans is None else float("inf")
        target = float("inf") if a.spans is None else a.spans
        procs = [mp.Process(target=sender, args=(port, token, k, a.batch, until, target, acked, batches))
                 for k in range(a.senders)]
        load0, start = os.getloadavg()[0], time.time()
        for p in procs:
            p.start()
        rss_first = rss_target = None
        peak = 0.0
        while any(p.is_alive() for p in procs):
            rss = rss_mb(proc.pid)
            peak = max(peak, rss)
            if rss_first is None and acked.value >= RSS_FIRST:
                rss_first = rss
            if rss_target is None and acked.value >= target:
                rss_target = rss
            time.sleep(0.2)
        elapsed = time.time() - start
        if any(p.exitcode for p in procs):
            raise SystemExit(f"a sender failed ({[p.exitcode for p in procs]})")
        rss_end = rss_mb(proc.pid)
        return {"spans": acked.value, "seconds": round(elapsed, 1), "per_s": round(acked.value / elapsed),
                "rss_100k_mb": rss_first and round(rss_first, 1), "rss_end_mb": round(rss_target or rss_end, 1),
                "rss_peak_mb": round(max(peak, rss_end), 1), "load_1min": [round(load0, 1),
                                                                           round(os.getloadavg()[0], 1)],
                "batches": list(batches)}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def missing_spans(store, batches: list[int], size: int) -> int:
    """How many spans of the acknowledged batches (sender k's first ``batches[k]``, of ``size`` spans) the store
    lacks, read span by span (a span stored but never acknowledged, its 200 lost, does not hide one lost)."""
    from sqlalchemy import text

    want = {k: n for k, n in enumerate(batches)}
    found = 0
    with store.engine.connect() as c:
        rows = c.execution_options(stream_results=True, yield_per=50_000).execute(
            text("SELECT span_id FROM monitor_spans WHERE project = 'bench'"))
        for (sid,) in rows:
            s = int(sid, 16)
            found += ((s >> 16) & 0xFFFFFF) < want.get(s >> 40, 0)
    return sum(batches) * size - found


def report(a: argparse.Namespace, dialect: str, bare: dict, real: dict, missing: int) -> None:
    how = f"{a.seconds:g} s" if a.spans is None else f"until {a.spans:,} spans"
    ratio = real["per_s"] / bare["per_s"]
    print(f"bare receiver (parse + append): {bare['per_s']:,} spans/s ({bare['spans']:,} in {bare['seconds']} s, "
          f"{how}; load {bare['load_1min']})")
    print(f"monitor serve ({dialect}): {real['per_s']:,} spans/s ({real['spans']:,} in {real['seconds']} s; load "
          f"{real['load_1min']}); ratio {ratio:.2f}")
    print(f"receiver RSS: {real['rss_100k_mb'] or float('nan'):.0f} MB after {RSS_FIRST:,} spans, "
          f"{real['rss_end_mb']:.0f} MB after {real['spans'] if a.spans is None else a.spans:,} "
          f"(peak {real['rss_peak_mb']:.0f}); acknowledged spans missing from the store: {missing}")
    print(json.dumps({"store": dialect, "mode": how, "senders": a.senders, "batch": a.batch, "bare": bare,
                      "serve": real, "ratio": round(ratio, 2), "missing": missing}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--spans", type=int, help="send until this many spans are acknowledged (instead of --seconds)")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--db", help="the store's URL (default: a new SQLite file, or a throwaway PostgreSQL)")
    ap.add_argument("--keep", action="store_true", help="keep the bench's folder (the bare receiver's spans)")
    a = ap.parse_args()
    from evaluators.store.store import Store
    from tests.pg import PostgresServer

    tmp = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    with ExitStack() as stack:
        if not a.keep:
            stack.callback(shutil.rmtree, tmp, True)
        url = a.db
        if url is None:
            url = (f"sqlite:///{tmp / 'evals.db'}" if a.store == "sqlite"
                   else stack.enter_context(PostgresServer(durable=True)).new_database())
        store = Store(url)
        _, token = store.create_ingest_token("bench")
        bare = drive([sys.executable, "-c", BARE, str(tmp / "spans.jsonl")], token, a)
        (tmp / "spans.jsonl").unlink()
        real = drive([sys.executable, "-m", "evaluators", "monitor", "serve", "--port", "0", "--db", url,
                      "--assemble-every", "3600"], token, a)
        bare.pop("batches")
        report(a, store.engine.dialect.name, bare, real, missing_spans(store, real.pop("batches"), a.batch))
        store.engine.dispose()


if __name__ == "__main__":
    main()
