"""A run against a rate-limited judge: sustained rate against the limit, and the share of 429s.

    python bench/rate_limits.py [--rate 40] [--burst 10] [--calls 600] [--latency 0.05] [--concurrency 16 64]
                                [--rpm N]

The loopback OpenAI-compatible server (tests/judge_server.py, in its own process) allows ``rate``
calls a second (a token bucket holding ``burst``) and answers 429 with Retry-After beyond it.
"sustained / R" is the judged rows a second, from the first results written to the last, divided
by the limit: 1.0 uses all the judge allows; "overall / R" counts the run's start-up too (the
judge check, planning). "429 share" is the calls answered 429 over all calls. The server sends no
``x-ratelimit-*`` headers, so only its 429s tell the run to slow down: at concurrency 64 the run
opens past 16 calls after the check (the ramp of ``RateLimiter.start_ramp``) until the first 429.
With ``--rpm`` the run's own budget applies too.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluators import JudgeConfig, Store, prepare_run  # noqa: E402
from evaluators.run.runner import Runner  # noqa: E402
from tests.judge_server import JudgeServerProcess  # noqa: E402


def write_rows(path: Path, n: int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"query": f"Question {i}: what does the report on item {i} conclude?",
                                "response": f"Answer {i}: the report concludes that item {i} is fine."}) + "\n")
    return str(path)


def measure(rate: float, burst: float, calls: int, latency: float, concurrency: int, tmp: str,
            rpm: float | None = None, server_rate: bool = True) -> dict:
    """One judged run of ``calls`` rows against a server allowing ``rate``/s; what it sustained."""
    with JudgeServerProcess(latency=latency, rate_limit=(rate, burst) if server_rate else None) as server:
        store = Store(f"sqlite:///{tmp}/rl-{rate}-{concurrency}-{rpm}-{time.time_ns()}.db")
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, concurrency=concurrency,
                          timeout=10, max_retries=8, rpm=rpm)
        rid = prepare_run(store, write_rows(Path(tmp) / f"rows-{calls}.jsonl", calls), ["fluency"], judge=cfg)
        ticks: list[tuple[float, int]] = []  # (time, rows settled) at each batch written
        runner = Runner(store, rid, on_progress=lambda p: ticks.append((time.perf_counter(), p.done + p.errored)))
        start = time.perf_counter()
        status = runner.run()
        elapsed = time.perf_counter() - start
        stats = server.stats()
    run = store.get_run(rid)
    attempts = stats["calls"] + stats["probes"]
    limited = stats["served"].get("rate_limited", 0)
    # judging rate from the first batch of results written to the last (start-up excluded)
    t0, t1, n1 = ticks[0][0], ticks[-1][0], ticks[-1][1]
    n0 = max(n for t, n in ticks if t - t0 < 0.01)  # the first write's rows (ticked microseconds apart)
    return {"status": status, "ok": run["tasks_done"], "errored": run["tasks_errored"], "elapsed": elapsed,
            "overall": run["tasks_done"] / elapsed, "sustained": (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0,
            "attempts": attempts, "limited": limited,
            "share_429": limited / attempts if attempts else 0.0,
            # when each request (the check included) reached the judge, its wall clock, in order
            "arrivals": sorted(at for at, _probe in stats["arrivals"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=40)
    ap.add_argument("--burst", type=float, default=10)
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--rpm", type=float, default=None)
    args = ap.parse_args()
    print(f"{args.calls} judged rows, server allows R = {args.rate:g}/s (burst {args.burst:g}), "
          f"latency {args.latency * 1000:.0f} ms" + (f", --rpm {args.rpm:g}" if args.rpm else ""))
    print(f"{'concurrency':>11} {'elapsed s':>9} {'sustained/R':>11} {'overall/R':>9} {'429s':>5} {'429 share':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.concurrency:
            m = measure(args.rate, args.burst, args.calls, args.latency, c, tmp, rpm=args.rpm)
            print(f"{c:>11} {m['elapsed']:>9.1f} {m['sustained'] / args.rate:>11.2f} {m['overall'] / args.rate:>9.2f} "
                  f"{m['limited']:>5} {m['share_429']:>9.1%}   ({m['status']}, {m['errored']} errored)")


if __name__ == "__main__":
    main()
