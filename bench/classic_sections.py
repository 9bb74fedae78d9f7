"""Where one CLI run of the classic metrics spends its time, per section and per process.

    python bench/classic_sections.py [--quick | --pairs 10000] [--runs 1] [--workers 0|1]

Runs ``python -m evaluators run PAIRS --metrics f1_score,bleu,gleu,rouge,meteor`` in a fresh
process (on ``bench/classic.py``'s WildBench paragraph pairs, a fresh SQLite store), with timers
around the CLI's own functions: start-up imports, loading and checking the file, storing it
(``prepare_run``), the run (up to the worker's fork, then until its last batch is back), and what
follows (the files, the summary). Prints each section's wall and CPU time, the worker's CPU time,
and the run's **critical path in CPU seconds**: the runner's CPU before the fork + the larger of the
runner's and the worker's CPU from the fork to the worker's end + the runner's CPU after it. On a
quiet 2-core machine that is about the wall time; on a shared one, wall time measures the others'
load, CPU time much less (it still inflates under load: compare A/B runs made back to back).
The CLI forks its worker right after start-up (``parallel.start_early``: it computes rows ahead
while the runner loads, checks and stores the file), so "before the fork" is the imports; the run
line also says how many batches each process computed and how many of the worker's outcomes came
from the rows it computed ahead.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the child: the CLI's main() with timers wrapped around its sections (our code, unchanged otherwise)
CHILD = r'''
import gc, os, resource, sys, time
T0w, T0c = time.perf_counter(), time.process_time()
gc.disable()  # as python -m evaluators starts (evaluators/__main__.py)
from evaluators import api
from evaluators.cli import main as cli
from evaluators.read import outputs as run_outputs
from evaluators.run import classic_worker as parallel, runner
cli.GC_HELD = True
marks = []

def mark(name):
    marks.append((name, time.perf_counter(), time.process_time()))

def wrap(owner, attr, name, is_async=False):
    f = getattr(owner, attr)
    if is_async:
        async def g(*a, **k):
            mark(name + " start")
            try:
                return await f(*a, **k)
            finally:
                mark(name + " end")
    else:
        def g(*a, **k):
            mark(name + " start")
            try:
                return f(*a, **k)
            finally:
                mark(name + " end")
    setattr(owner, attr, g)

mark("imports")
wrap(cli, "_checked_dataset", "load+check")
wrap(api, "prepare_run", "prepare_run")
wrap(run_outputs, "write_run_outputs", "files read back from the store")
wrap(runner.Runner, "run", "run")
wrap(runner.Runner, "_outcome", "outcome")
wrap(runner.Runner, "_classic_finish", "wait for the worker's last batches", is_async=True)
# (the first "until wait..." section is the run on both processes)
split = {}
close = runner.Runner._classic_close
def closing(self):
    if self._classic_worker is not None:
        split.update(batches=[self._classic_batches, self._classic_worker.batches_done],
                     kept=self._classic_worker.kept)
    close(self)
runner.Runner._classic_close = closing
init = parallel.ClassicWorker.__init__
def forked(self, *a, **k):
    mark("fork")
    init(self, *a, **k)
parallel.ClassicWorker.__init__ = forked
code = cli.main(sys.argv[1:])
mark("end")
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
out = {"marks": [(n, w - T0w, c - T0c) for n, w, c in marks], "worker_cpu": ch.ru_utime + ch.ru_stime,
       "code": code, "split": split}
print("SECTIONS " + __import__("json").dumps(out), file=sys.stderr)
sys.stdout.flush()
os._exit(code)
'''


def one_run(data: Path, work: Path, workers: str | None) -> dict:
    out, db = work / "out", work / "bench.db"
    db.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    if workers is not None:
        env["EVALDASH_CLASSIC_WORKERS"] = workers
    p = subprocess.run([sys.executable, "-c", CHILD, "run", str(data), "--metrics", "f1_score,bleu,gleu,rouge,meteor",
                        "--out", str(out), "--db", f"sqlite:///{db}", "--fresh", "--quiet"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    line = next((x for x in p.stderr.splitlines() if x.startswith("SECTIONS ")), None)
    if p.returncode != 0 or line is None:
        sys.exit(f"the run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(line[len("SECTIONS "):])


def report(res: dict) -> float:
    """Print the sections; return the critical path in CPU seconds."""
    marks = res["marks"]
    prev_w = prev_c = 0.0
    print(f"  {'section (runner process)':<44} {'wall s':>7} {'CPU s':>7}")
    for name, w, c in marks:
        label = {"imports": "start-up imports", "fork": "until the worker's fork",
                 "end": "until the end (summary printed)"}.get(name)
        if label is None:
            label = "until " + name[:-6] if name.endswith(" start") else name[:-4] if name.endswith(" end") else name
        print(f"  {label:<44} {w - prev_w:>7.2f} {c - prev_c:>7.2f}")
        prev_w, prev_c = w, c
    cpu = {}
    for name, _, c in marks:
        cpu.setdefault(name, c)
    end = marks[-1][2]
    worker = res["worker_cpu"]
    if "fork" not in cpu:
        print(f"  no worker; runner CPU {end:.2f} s")
        return end
    fork = cpu["fork"]
    done = next(c for n, _, c in marks if n == "wait for the worker's last batches end")
    here = done - fork
    path = fork + max(here, worker) + (end - done)
    print(f"  runner CPU: {fork:.2f} before the fork, {here:.2f} while the worker ran, {end - done:.2f} after; "
          f"worker CPU {worker:.2f}")
    split = res.get("split") or {}
    if split:
        print(f"  batches computed by the runner / the worker: {split['batches'][0]} / {split['batches'][1]}; "
              f"worker outcomes computed ahead (an early worker) and used: {split['kept']}")
    print(f"  critical path (CPU s): {fork:.2f} + max({here:.2f}, {worker:.2f}) + {end - done:.2f} = {path:.2f}; "
          f"wall {marks[-1][1]:.2f} s; load average before: {res['load']:.1f}")
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="1,000 pairs")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--workers", choices=["0", "1"], help="EVALDASH_CLASSIC_WORKERS (default: unset)")
    args = ap.parse_args()
    import classic  # bench/classic.py: the same WildBench paragraph pairs

    if not classic.WILDBENCH.is_dir():
        print(f"SKIPPED: WildBench answers not found at {classic.WILDBENCH} (../shared is absent); nothing measured.")
        return
    n = 1_000 if args.quick else args.pairs
    with tempfile.TemporaryDirectory(prefix="evaldash-sections-") as tmp:
        work = Path(tmp)
        data = work / "pairs.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in classic.make_pairs(n, unit="paragraph")))
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "evaluators")], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
        print(f"== {n} WildBench paragraph pairs (bench/classic.py's), the CLI's five classic metrics")
        paths = []
        for k in range(args.runs):
            load = os.getloadavg()[0]
            res = one_run(data, work, args.workers)
            res["load"] = load
            print(f"run {k + 1}:")
            paths.append(report(res))
        print("critical paths (CPU s): " + ", ".join(f"{p:.2f}" for p in paths))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
