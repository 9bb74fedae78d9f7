"""The monitor's receiver under load (issue 31, Scale): 8 senders POST protobuf batches of 512 spans as fast as
they are answered, for --seconds, first to a bare receiver on the same stack (Starlette + uvicorn, the same decoder)
that only parses and appends each span to a file, then to `python -m evaluators monitor serve` on a store.
Prints spans/s acknowledged by each and their ratio (goal >= 0.5), the receiver's RSS after 100,000 spans and at
the end, and how many acknowledged spans the store lacks (goal 0).

    python bench/monitor_receiver.py [--seconds 60] [--senders 8] [--db URL]
"""
from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
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


def body(sender: int, batch: int, size: int) -> bytes:
    from tests.monitor_procs import pb_span, traces_request

    base = (sender << 40) + (batch << 16)
    return traces_request([pb_span(base + i // 4 + 1, base + i + 1, parent=0 if i % 4 == 0 else base + i - i % 4 + 1,
                                   name="chat gpt-4o", attributes={"gen_ai.request.model": "gpt-4o",
                                                                   "gen_ai.usage.input_tokens": 120})
                           for i in range(size)])


def sender(port: int, token: str, k: int, size: int, until: float, acked: mp.Value) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
    batch = 0
    while time.time() < until:
        conn.request("POST", "/v1/traces", body=body(k, batch, size), headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status == 200:
            with acked.get_lock():
                acked.value += size
            batch += 1
        elif r.status in (429, 503):
            time.sleep(float(r.getheader("Retry-After", "1")) / 10)  # a bench sender: retry soon, same batch


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def drive(argv: list[str], token: str, seconds: float, senders: int, size: int) -> dict:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    port = int(proc.stdout.readline().split("http://127.0.0.1:")[1].split()[0])
    acked = mp.Value("q", 0)
    until = time.time() + seconds
    procs = [mp.Process(target=sender, args=(port, token, k, size, until, acked)) for k in range(senders)]
    start = time.time()
    for p in procs:
        p.start()
    rss_at_100k = None
    while any(p.is_alive() for p in procs):
        if rss_at_100k is None and acked.value >= 100_000:
            rss_at_100k = rss_mb(proc.pid)
        time.sleep(0.2)
    elapsed = time.time() - start
    rss_end = rss_mb(proc.pid)
    proc.terminate()
    proc.wait(timeout=60)
    return {"spans": acked.value, "per_s": acked.value / elapsed, "rss_100k": rss_at_100k, "rss_end": rss_end}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--db", help="the store (default: a new SQLite file)")
    a = ap.parse_args()
    from evaluators.store.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    url = a.db or f"sqlite:///{tmp / 'evals.db'}"
    store = Store(url)
    _, token = store.create_ingest_token("bench")
    bare = drive([sys.executable, "-c", BARE, str(tmp / "spans.jsonl")], token, a.seconds, a.senders, a.batch)
    real = drive([sys.executable, "-m", "evaluators", "monitor", "serve", "--port", "0", "--db", url,
                  "--assemble-every", "3600"], token, a.seconds, a.senders, a.batch)
    stored = store.trace_counts("bench")["spans"]
    print(f"bare receiver (parse + append): {bare['per_s']:,.0f} spans/s ({bare['spans']:,} in {a.seconds:g} s)")
    print(f"monitor serve ({store.engine.dialect.name}): {real['per_s']:,.0f} spans/s ({real['spans']:,}); "
          f"ratio {real['per_s'] / bare['per_s']:.2f}")
    print(f"receiver RSS: {real['rss_100k'] or float('nan'):.0f} MB after 100,000 spans, {real['rss_end']:.0f} MB at "
          f"the end; acknowledged spans missing from the store: {real['spans'] - stored}")


if __name__ == "__main__":
    main()
