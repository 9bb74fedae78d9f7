"""Judge throughput against the loopback server (its own process, as a real judge is).

    python bench/judge_throughput.py [--quick] [--baseline DIR] [--only cpu|grid|cli] [--code DIR]
                                     [--grid 0.05:256,0.5:64]

Three measurements, each printing its ratios:

1. CPU per call of the judge client alone: 2,000 chat completions (``--quick``: 500) at 64 in
   flight against a zero-latency server; CPU time of the client's process divided by the calls.
   With ``--baseline DIR`` the same script runs on another checkout's ``evaluators`` (e.g. a
   ``git worktree`` of main, whose client went through the ``openai`` package), side by side.
2. The grid: ``evaluate()`` end to end (dataset save, planning, calls, result writes) at
   concurrency 8 / 64 / 256 and latency 50 / 500 ms; limit = calls x latency / concurrency,
   ratio = limit / achieved (1.0 is perfect), calls/s.
3. The CLI target (issue 11): ``python -m evaluators run`` with 2,000 rows, concurrency 64, 500 ms:
   the whole process, start-up and the judge check included, within 1/0.9 of the limit (ratio
   >= 0.9), and the first call arriving at the server within 0.3 s of the process starting.
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

CPU_SNIPPET = r"""
import asyncio, json, sys, time
from evaluators.judge.client import JudgeClient, JudgeConfig

async def main(url, n, conc):
    c = JudgeClient(JudgeConfig(model="bench", provider="compatible", base_url=url, concurrency=conc))
    sem = asyncio.Semaphore(conc)

    async def one(i):
        async with sem:
            await c.complete([{"role": "system", "content": "You grade answers for fluency on a 1-5 scale."},
                              {"role": "user", "content": f"Answer {i}: the report on item {i} concludes it is fine."}])

    await asyncio.gather(*(one(-k - 1) for k in range(conc)))  # connections opened, first-call work done
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await c.aclose()
    print(json.dumps({"cpu_ms": cpu * 1000 / n, "calls_s": n / wall}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def cpu_per_call(url: str, code_root: Path, n: int, conc: int = 64) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code_root))
    out = subprocess.run([sys.executable, "-c", CPU_SNIPPET, url, str(n), str(conc)], env=env, cwd=code_root,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cpu(args) -> None:
    from tests.judge_server import JudgeServerProcess
    n = 500 if args.quick else 2000
    print(f"1. judge client CPU per call: {n} calls, 64 in flight, zero-latency loopback server (own process)")
    print(f"{'code':<28} {'CPU ms/call':>11} {'calls/s':>8}")
    with JudgeServerProcess() as server:
        roots = [("this checkout", ROOT)]
        if args.baseline:
            roots.append((f"baseline {args.baseline}", Path(args.baseline)))
        got = {}
        for label, root in roots:
            m = cpu_per_call(server.url, root, n)
            got[label] = m
            print(f"{label[:28]:<28} {m['cpu_ms']:>11.2f} {m['calls_s']:>8.0f}", flush=True)
        if args.baseline:
            a, b = got["this checkout"], got[roots[1][0]]
            print(f"baseline / this: CPU per call {b['cpu_ms'] / a['cpu_ms']:.2f}x, "
                  f"calls/s {a['calls_s'] / b['calls_s']:.2f}x")


def run_grid(args) -> None:
    from evaluators import JudgeConfig, Store, evaluate
    from tests.judge_server import JudgeServerProcess

    n = 400 if args.quick else 2000
    print(f"2. evaluate() end to end, {n} judged rows (fluency), unique rows so the cache never answers")
    print(f"{'latency ms':>10} {'concurrency':>11} {'limit s':>8} {'achieved s':>11} {'ratio':>6} {'calls/s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        wanted = [tuple(map(float, x.split(":"))) for x in args.grid.split(",")] if args.grid else None
        for latency in (0.05, 0.5):
            with JudgeServerProcess(latency=latency) as server:
                for conc in (8, 64, 256):
                    if wanted and (latency, conc) not in wanted:
                        continue
                    calls = n if not (latency == 0.5 and conc == 8) else max(80, n // 10)  # 125 s otherwise
                    data = [{"query": f"Question {latency}-{conc}-{i}?",
                             "response": f"Answer number {i} for setting {conc} at {latency}."} for i in range(calls)]
                    store = Store(f"sqlite:///{tmp}/b{conc}-{latency}.db")
                    judge = JudgeConfig(model="bench", provider="compatible", base_url=server.url, concurrency=conc)
                    t = time.perf_counter()
                    res = evaluate(data, ["fluency"], judge=judge, store=store)
                    took = time.perf_counter() - t
                    assert res.metrics["fluency.scored_rows"] == calls, res.metrics
                    limit = calls * latency / conc
                    print(f"{latency * 1000:>10.0f} {conc:>11} {limit:>8.2f} {took:>11.2f} {limit / took:>6.2f} "
                          f"{calls / took:>8.1f}", flush=True)


def run_cli(args) -> None:
    from tests.judge_server import JudgeServerProcess
    n, conc, latency = 2000, 64, 0.5
    limit = n * latency / conc
    print(f"3. CLI process, {n} rows (fluency), concurrency {conc}, latency {latency * 1000:.0f} ms: "
          f"limit {limit:.2f} s")
    with JudgeServerProcess(latency=latency) as server, tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "rows.jsonl"
        with open(data, "w", encoding="utf-8") as f:
            for i in range(n):
                f.write(json.dumps({"query": f"Question {i}: what does the report on item {i} conclude?",
                                    "response": f"Answer {i}: the report concludes that item {i} is fine."}) + "\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT), EVAL_HOME=str(Path(tmp) / "home"))
        # the package's bytecode compiled beforehand, as an installed package has it (a checkout run with
        # PYTHONDONTWRITEBYTECODE would otherwise compile every module at every start)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "evaluators")], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
        cmd = [sys.executable, "-m", "evaluators", "run", str(data), "--metrics", "fluency",
               "--out", str(Path(tmp) / "out"), "--judge-base-url", server.url, "--judge-model", "m", "--concurrency", str(conc), "--quiet"]
        t0 = time.time()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.time() - t0
        if os.waitstatus_to_exitcode(status):
            sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
        cpu = usage.ru_utime + usage.ru_stime
        stats = server.stats()
        first_at = stats.get("first_at")  # (a server from an older checkout does not say)
        first = None if first_at is None else first_at - t0
        arrivals = stats.get("arrivals")
    ratio = limit / took
    print(f"CPU time of the CLI process {cpu:.2f} s ({cpu * 1000 / n:.2f} ms a call, start-up included)")
    verdict = "PASS" if ratio >= 0.9 else "FAIL"
    print(f"whole process {took:.2f} s; limit / achieved {ratio:.2f} (target >= 0.90: {verdict})")
    if first is not None:
        print(f"first call reached the server {first:.2f} s after the process started "
              f"(target <= 0.30 s: {'PASS' if first <= 0.3 else 'FAIL'})")
    if arrivals and any(not probe for _, probe in arrivals):
        print(timeline(arrivals, t0, took, latency, conc))


def timeline(arrivals: list, t0: float, took: float, latency: float, conc: int) -> str:
    """Where the time went, from the server's arrival times: the check, the first row calls, how many
    calls arrived in each latency window (a full window is ``conc``), and the tail after the last."""
    checks = [at - t0 for at, probe in arrivals if probe]
    calls = sorted(at - t0 for at, probe in arrivals if not probe)
    lines = [f"timeline (s after the process started): check arrived {', '.join(f'{c:.3f}' for c in checks)}; "
             f"first row call {calls[0]:.3f}; last row call {calls[-1]:.3f}; its answer due {calls[-1] + latency:.3f}; "
             f"process exited {took:.3f} (tail {took - calls[-1] - latency:.3f})"]
    start, counts = calls[0], []
    for c in calls:
        k = int((c - start) / latency)
        counts.extend([0] * (k + 1 - len(counts)))
        counts[k] += 1
    lines.append(f"row calls arriving in each {latency * 1000:.0f} ms window from the first (full = {conc}): "
                 + " ".join(map(str, counts)))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer calls (a minute or so)")
    ap.add_argument("--baseline", help="another checkout whose judge client to measure side by side (part 1)")
    ap.add_argument("--only", choices=["cpu", "grid", "cli"])
    ap.add_argument("--code", help="run parts 2 and 3 on another checkout's evaluators (e.g. main, for before/after)")
    ap.add_argument("--grid", help="parts of the grid, e.g. 0.05:256,0.5:64 (latency:concurrency)")
    args = ap.parse_args()
    if args.code:
        global ROOT
        ROOT = Path(args.code).resolve()
        sys.path.insert(0, str(ROOT))
        print(f"evaluators from {ROOT}")
    for part, fn in (("cpu", run_cpu), ("grid", run_grid), ("cli", run_cli)):
        if args.only in (None, part):
            fn(args)
            print(flush=True)


if __name__ == "__main__":
    main()
