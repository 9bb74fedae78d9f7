"""Judge throughput side by side with the Azure AI Evaluation SDK's ``evaluate()``.

    python bench/sdk_throughput.py [--rows 500] [--latency 0.5] [--concurrency 64] [--quick]
                                   [--sdk-venv /tmp/evaldash-sdk-venv]

The same rows (unique synthetic question/answer pairs, so no cache answers) judged for fluency,
one call a row, against the loopback OpenAI-compatible server (``tests/judge_server.py``, its own
process, a fixed latency): by the SDK's ``evaluate()`` with ``FluencyEvaluator`` pointed at the
server through ``OpenAIModelConfiguration(base_url=...)``, at its default concurrency (10 rows at
once) and with ``PF_WORKER_COUNT`` set to ours; and by ``python -m evaluators run`` at
``--concurrency``. Each side is one fresh process, timed from start to exit (imports included).

``azure-ai-evaluation==1.18.*`` is installed by this script into a throwaway virtualenv (default
``/tmp/evaldash-sdk-venv``; about 90 s the first time); the product never imports the SDK.
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

from bench.azure_sdk_keys import ensure_sdk  # noqa: E402
from tests.judge_server import JudgeServerProcess  # noqa: E402

SDK_SNIPPET = r"""
import sys, time
from azure.ai.evaluation import FluencyEvaluator, OpenAIModelConfiguration, evaluate

data, url, out = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = OpenAIModelConfiguration(type="openai", base_url=url, api_key="bench-key", model="bench-judge")
res = evaluate(data=data, evaluators={"fluency": FluencyEvaluator(cfg)}, output_path=out)
rows = res["rows"]
ok = sum(1 for r in rows if r.get("outputs.fluency.fluency") is not None)
print("SCORED", ok, flush=True)
"""


def write_rows(path: Path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"query": f"Question {i}: what does the report on item {i} conclude?",
                                "response": f"Answer {i}: the report concludes that item {i} is fine, "
                                            f"with {i % 7} open points left for the next review."}) + "\n")


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if p.returncode:
        sys.stderr.write(p.stdout[-1500:] + p.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd[:3]))} ... (exit {p.returncode})")
    return took, p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="100 rows")
    ap.add_argument("--sdk-venv", default="/tmp/evaldash-sdk-venv")
    args = ap.parse_args()
    n = 100 if args.quick else args.rows
    py = ensure_sdk(Path(args.sdk_venv))
    version = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('azure-ai-evaluation'))"],
                             capture_output=True, text=True).stdout.strip()
    print(f"{n} rows judged for fluency (one call a row), loopback judge in its own process, "
          f"{args.latency * 1000:.0f} ms a call; azure-ai-evaluation {version}; whole processes, start-up included")
    print(f"{'side':<40} {'seconds':>8} {'calls/s':>8} {'limit s':>8} {'limit/achieved':>15}")
    results = {}
    with JudgeServerProcess(latency=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "rows.jsonl"
        write_rows(data, n)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_", "PF_"))}
        sides = [(f"SDK evaluate(), default concurrency (10)", 10, None),
                 (f"SDK evaluate(), PF_WORKER_COUNT={args.concurrency}", args.concurrency, str(args.concurrency)),
                 (f"evaldash CLI, --concurrency {args.concurrency}", args.concurrency, "ours")]
        for label, conc, how in sides:
            calls_before = server.stats()["calls"]
            if how == "ours":
                env = dict(base_env, PYTHONPATH=str(ROOT), EVAL_HOME=str(tmp / "home"))
                cmd = [sys.executable, "-m", "evaluators", "run", str(data), "--metrics", "fluency", "--out",
                       str(tmp / "ours"), "--judge-base-url", server.url, "--judge-model", "bench-judge",
                       "--concurrency", str(conc), "--quiet"]
                took, _ = timed(cmd, env, ROOT)
                scored = sum(1 for line in (tmp / "ours" / "rows.jsonl").open(encoding="utf-8")
                             if json.loads(line).get("outputs.fluency.fluency") is not None)
            else:
                env = dict(base_env, PF_WORKER_COUNT=how) if how else dict(base_env)
                took, p = timed([str(py), "-c", SDK_SNIPPET, str(data), server.url, str(tmp / f"sdk{conc}.json")],
                                env, tmp)
                scored = int(next(line.split()[1] for line in p.stdout.splitlines() if line.startswith("SCORED")))
            calls = server.stats()["calls"] - calls_before
            limit = n * args.latency / conc
            results[label] = took
            print(f"{label:<40} {took:>8.1f} {n / took:>8.1f} {limit:>8.2f} {limit / took:>15.2f}"
                  + ("" if scored == n else f"  (only {scored} of {n} rows scored)")
                  + ("" if calls == n else f"  ({calls} judging calls)"), flush=True)
    ours = results[sides[2][0]]
    for label, _, _ in sides[:2]:
        print(f"evaldash vs {label}: {results[label] / ours:.1f}x the calls/s")


if __name__ == "__main__":
    main()
