"""Start-up of the command line, this checkout against another (e.g. main before a change), interleaved.

    python bench/startup.py --other DIR [--reps 15]

Three commands, each a fresh process, timed wall clock from spawn to exit, alternating between the two
checkouts run after run so that machine load falls on both alike:

1. ``python -m evaluators metrics``: the package, the registry and every built-in metric loaded, listed.
2. ``python -m evaluators run data/rag_single_turn.jsonl --metrics f1_score,bleu``: a small classic run
   end to end (load, check, store in a fresh SQLite file, compute, write rows.jsonl and metrics.json).
3. The same run with a judge metric (``coherence``) against the loopback judge server
   (tests/judge_server.py, in its own process, zero latency): start-up, the judge check and 31 calls.

One untimed run of each command on each side first (byte-code written, files in the page cache).
Prints each command's median and spread for both checkouts and the ratio other / this (above 1: this
checkout starts faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _time(code_root: Path, args: list[str], home: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "OPENAI_", "AZURE_"))}
    env.update(PYTHONPATH=str(code_root), EVAL_HOME=str(home))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "evaluators", *args], cwd=code_root, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{code_root}: {' '.join(args)} failed: {p.stderr[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", required=True, help="another checkout of the project (its evaluators/ is timed)")
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    other = Path(a.other).resolve()
    data = str(ROOT / "data" / "rag_single_turn.jsonl")
    from tests.judge_server import JudgeServerProcess

    with JudgeServerProcess() as server, tempfile.TemporaryDirectory() as tmp:
        commands = {
            "metrics (list)": ["metrics"],
            "run: f1_score,bleu (31 rows)": ["run", data, "--metrics", "f1_score,bleu", "--quiet"],
            "run: coherence, loopback judge": ["run", data, "--metrics", "coherence", "--quiet",
                                               "--judge-base-url", server.url, "--judge-model", "loopback"],
        }
        times: dict[tuple[str, str], list[float]] = {}
        for side, root in (("this", ROOT), ("other", other)):  # untimed: byte-code written, files cached
            for label, args in commands.items():
                home = Path(tmp) / f"warm-{side}-{label[:3]}"
                _time(root, args + (["--out", str(home / "out")] if args[0] == "run" else []), home)
        for rep in range(a.reps):
            for label, args in commands.items():
                for side, root in (("this", ROOT), ("other", other)):
                    home = Path(tmp) / f"{side}-{rep}-{len(times)}"
                    out = ["--out", str(home / "out")] if args[0] == "run" else []
                    times.setdefault((label, side), []).append(_time(root, args + out, home))
    print(f"this: {ROOT}\nother: {other}\n{a.reps} runs each, interleaved; wall clock from spawn to exit\n")
    print(f"{'command':<34} {'this (median, min-max)':>24} {'other (median, min-max)':>25} {'other/this':>10}")
    for label in commands:
        this, oth = times[(label, "this")], times[(label, "other")]
        fmt = lambda xs: f"{statistics.median(xs):.3f} s ({min(xs):.2f}-{max(xs):.2f})"  # noqa: E731
        print(f"{label:<34} {fmt(this):>24} {fmt(oth):>25} {statistics.median(oth) / statistics.median(this):>9.2f}x")


if __name__ == "__main__":
    main()
