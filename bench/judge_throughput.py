"""Judge throughput against the loopback server at a fixed latency.

    python bench/judge_throughput.py [--calls 400] [--latency 0.05]

Ideal time = calls x latency / concurrency. The ratio achieved/ideal shows the
runner's overhead (store writes, prompt rendering, parsing, the openai client):
1.0 is perfect. The server runs in its own process, as a real judge would.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluators import JudgeConfig, Store, evaluate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--latency", type=float, default=0.05)
    args = ap.parse_args()
    print(f"{args.calls} judge calls, server latency {args.latency * 1000:.0f} ms")
    print(f"{'concurrency':>11} {'ideal s':>8} {'achieved s':>11} {'ratio':>6} {'calls/s':>8}")
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judge_server.py"), str(args.latency)],
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run_all(url, args, tmp)
    finally:
        server.terminate()
        server.wait()


def run_all(url: str, args, tmp: str) -> None:
    for conc in (1, 8, 16, 32, 64):
        n = args.calls if conc > 1 else max(40, args.calls // 10)
        # unique rows per setting, so the cache never answers
        data = [{"query": f"Question {conc}-{i}?", "response": f"Answer number {i} for setting {conc}."}
                for i in range(n)]
        store = Store(f"sqlite:///{tmp}/b{conc}.db")
        judge = JudgeConfig(model="bench", provider="compatible", base_url=url, concurrency=conc)
        t = time.perf_counter()
        res = evaluate(data, ["fluency"], judge=judge, store=store)
        took = time.perf_counter() - t
        assert res.metrics["fluency.scored_rows"] == n
        ideal = n * args.latency / conc
        print(f"{conc:>11} {ideal:>8.2f} {took:>11.2f} {took / ideal:>6.2f} {n / took:>8.1f}")


if __name__ == "__main__":
    main()
