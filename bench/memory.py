"""Peak memory of a CLI run as rows grow: one judge metric against the loopback judge.

    python bench/memory.py [--rows 10000 100000 1000000] [--concurrency 32] [--quick]

Targets (issue 11): 100,000 rows under 500 MB, 1,000,000 rows under 1 GB; each size's line says
PASS/FAIL where a target applies. ``--quick``: 2,000 and 20,000 rows (a minute or two), to check
that the peak stays flat (MB per 1,000 rows above the first run's).

Each size is one fresh `python -m evaluators run ... --metrics fluency` in its own process, against
the loopback OpenAI-compatible server (tests/judge_server.py, its own process, zero latency); the
peak resident set of the CLI process (ru_maxrss from wait4) is printed, with MB per 1,000 rows
above the smallest run's. Rows are short synthetic question/answer pairs (~150 characters).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.judge_server import JudgeServerProcess  # noqa: E402


TARGETS_MB = {100_000: 500, 1_000_000: 1000}  # issue 11: peak RSS of the CLI process


def write_rows(path: Path, n: int, ground_truth: bool = False) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            row = {"query": f"Question {i}: what does the report on item {i} conclude?",
                   "response": f"Answer {i}: the report concludes that item {i} is fine."}
            if ground_truth:
                row["ground_truth"] = f"The report finds item {i} fine."
            f.write(json.dumps(row) + "\n")


def cli_peak(url: str, n: int, concurrency: int, tmp: Path, metric: str = "fluency") -> tuple[float, float, int]:
    """(peak RSS in MB, seconds, exit code) of one CLI run over ``n`` rows."""
    data = tmp / f"rows{n}.jsonl"
    write_rows(data, n, ground_truth=metric != "fluency")
    env = dict(os.environ, PYTHONPATH=str(ROOT), EVAL_HOME=str(tmp / f"home{n}"))
    cmd = [sys.executable, "-m", "evaluators", "run", str(data), "--metrics", metric, "--out", str(tmp / f"out{n}"),
           "--judge-base-url", url, "--judge-model", "m", "--concurrency", str(concurrency)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return usage.ru_maxrss / 1024, elapsed, proc.returncode  # ru_maxrss is in KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="2,000 and 20,000 rows")
    ap.add_argument("--metric", default="fluency",
                    help="another metric, e.g. f1_score: a classic metric walks the same store, dataset and "
                         "output paths without a judge call a row, so 1,000,000 rows take minutes, not hours")
    args = ap.parse_args()
    if args.quick:
        args.rows = [2_000, 20_000]
    kind = "judge metric, loopback judge in its own process, zero latency" if args.metric == "fluency" else "metric"
    print(f"CLI run, one {kind} ({args.metric}), concurrency {args.concurrency}")
    print(f"{'rows':>9} {'peak RSS MB':>11} {'seconds':>8} {'rows/s':>7} {'MB / 1k rows over first':>24}")
    with JudgeServerProcess() as server, tempfile.TemporaryDirectory() as tmp:
        first = None
        for n in args.rows:
            mb, secs, code = cli_peak(server.url, n, args.concurrency, Path(tmp), args.metric)
            slope = "" if first is None else f"{(mb - first[1]) / ((n - first[0]) / 1000):.2f}"
            first = first or (n, mb)
            target = TARGETS_MB.get(n)
            verdict = f"  target < {target} MB: {'PASS' if mb < target and not code else 'FAIL'}" if target else ""
            print(f"{n:>9} {mb:>11.0f} {secs:>8.1f} {n / secs:>7.0f} {slope:>24}" + (f"  (exit {code})" if code else "")
                  + verdict, flush=True)


if __name__ == "__main__":
    main()
