"""Agents and ranked retrieval, side by side with the Azure AI Evaluation SDK 1.18: same rows, keys, values?

    python bench/azure_sdk_agent_keys.py [--sdk-venv bench/.sdk-venv] [--dump DIR]

The sibling of ``bench/azure_sdk_keys.py`` (whose throwaway SDK virtualenv, ``diff`` and ``same`` it reuses)
for the agent and retrieval evaluators. Rows are made up here (``ROWS``, each case saying what it exercises)
and written to JSON lines in the SDK's input format; the SDK's ``evaluate()`` and ours run on the same files,
one run per (metric, setting), and every SDK row and metrics.json key is compared with ours:

- computed metrics (``document_retrieval``, ``task_navigation_efficiency`` in each matching mode): every key
  present and every value equal (numbers to 1e-9 relative);
- judge metrics: both sides ask the loopback judge (``tests/judge_server.py``), which answers each metric in
  the SDK's output format with a verdict that depends on the metric and on which row is judged (found by a
  marker text in the prompt), never on the prompt's wording; every key present and every value equal except
  the judge-call properties that cannot be (token counts of our own prompts, the prompt itself), which are
  compared for presence and type.

Exit code 1 on any unexpected difference.
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
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from azure_sdk_keys import _plain, diff, dump, ensure_sdk  # noqa: E402  the sibling's SDK venv and comparison

from agent_rows import JUDGE_METRICS, RUNS, judge_reply, write_files  # noqa: E402

JUDGE_MODEL = "bench-judge"


# ============================================================== the SDK side (runs in the SDK venv)

def sdk_side(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    import azure.ai.evaluation as ev
    from azure.ai.evaluation import OpenAIModelConfiguration, evaluate
    from importlib.metadata import version

    def make(cls_path: str, kwargs: dict, url: str | None):
        mod, _, name = cls_path.rpartition(".")
        cls = getattr(__import__(mod, fromlist=[name]) if mod else ev, name)
        if url:
            cfg = OpenAIModelConfiguration(type="openai", base_url=url, api_key="bench-key", model=JUDGE_MODEL)
            return cls(cfg, **kwargs)
        return cls(**kwargs)

    out = {"version": version("azure-ai-evaluation"), "runs": {}}
    for run in spec["runs"]:
        t = time.perf_counter()
        evaluator = make(run["sdk_class"], run.get("sdk_kwargs", {}), spec["judge_urls"].get(run["metric"]))
        res = evaluate(data=run["file"], evaluators={run["metric"]: evaluator},
                       output_path=str(Path(spec["out"]).with_suffix(f".{run['name']}.json")))
        out["runs"][run["name"]] = {"rows": _plain(res["rows"]), "metrics": _plain(res["metrics"]),
                                    "seconds": time.perf_counter() - t}
    Path(spec["out"]).write_text(json.dumps(out, default=str))


# ============================================================== ours and the comparison

def run_ours(runs: list[dict], urls: dict, tmp: Path) -> dict:
    from evaluators import JudgeConfig, Store, evaluate

    out = {}
    for run in runs:
        t = time.perf_counter()
        store = Store(f"sqlite:///{tmp / ('ours-' + run['name'] + '.db')}")
        judge = (JudgeConfig(model=JUDGE_MODEL, provider="compatible", base_url=urls[run["metric"]])
                 if run["metric"] in urls else None)
        res = evaluate(run["file"], [run["metric"]], judge=judge, store=store, options=run.get("options"))
        out[run["name"]] = {"rows": json.loads(json.dumps(res.results.rows(), default=str)), "metrics": res.metrics,
                            "seconds": time.perf_counter() - t}
    return out


# judge-call properties that count or quote our own prompt (ours are our words): presence and type only
PROMPT_BOUND = {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int, "sample_input": str,
                "finish_reason": str}


def classify(metric: str, key: str, what: str, sdk_v, ours_v) -> str:
    leaf = key.rsplit(".", 1)[-1]
    if what != "missing" and metric in JUDGE_METRICS and leaf in PROMPT_BOUND:
        t = PROMPT_BOUND[leaf]
        if isinstance(sdk_v, t) and isinstance(ours_v, t):
            return f"judge call properties quoting or counting our own prompt ({leaf}): presence and type compared"
    return "UNEXPECTED"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk-venv", default=str(ROOT / "bench" / ".sdk-venv"))
    ap.add_argument("--dump", metavar="DIR", help="also write both sides' rows and metrics there")
    ap.add_argument("--only", help="comma-separated metric names (default: every one)")
    ap.add_argument("--sdk-side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sdk_side:
        return sdk_side(args.sdk_side)
    from tests.judge_server import JudgeServer

    started = time.perf_counter()
    py = ensure_sdk(Path(args.sdk_venv))
    only = set(args.only.split(",")) if args.only else None
    runs = [r for r in RUNS if only is None or r["metric"] in only]
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        write_files(runs, tmp)
        judged = sorted({r["metric"] for r in runs if r["metric"] in JUDGE_METRICS})
        servers = {m: JudgeServer(lambda prompt, req, m=m: judge_reply(m, prompt)).__enter__() for m in judged}
        try:
            urls = {m: s.url for m, s in servers.items()}
            spec = {"runs": runs, "judge_urls": urls, "out": str(tmp / "sdk.json")}
            (tmp / "spec.json").write_text(json.dumps(spec))
            env = {**os.environ, "PF_DISABLE_TRACING": "true", "AZURE_EVALUATION_DISABLE_TELEMETRY": "true"}
            p = subprocess.run([str(py), __file__, "--sdk-side", str(tmp / "spec.json")], env=env, cwd=tmp,
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"the SDK run failed:\n{p.stderr[-4000:]}")
            sdk = json.loads((tmp / "sdk.json").read_text())
            os.environ.setdefault("EVAL_HOME", str(tmp / "home"))
            ours = run_ours(runs, urls, tmp)
        finally:
            for s in servers.values():
                s.__exit__(None, None, None)
    if args.dump:
        dump(Path(args.dump), sdk, ours)
    sys.exit(report(runs, sdk, ours, time.perf_counter() - started))


def report(runs, sdk, ours, seconds) -> int:
    print(f"azure-ai-evaluation {sdk['version']} vs evaldash: agents and retrieval")
    unexpected = checked = 0
    for run in runs:
        s, o = sdk["runs"][run["name"]], ours[run["name"]]
        found: list = []
        for i, (a, b) in enumerate(zip(s["rows"], o["rows"])):
            a = {k: v for k, v in a.items() if k.startswith("outputs.")}
            checked += len(a) + sum(len(v) for v in a.values() if isinstance(v, dict))
            diff(f"row{i}", a, b, found)
        diff("metrics", s["metrics"], o["metrics"], found)
        checked += len(s["metrics"])
        buckets: dict[str, list] = {}
        for path, what, sv, ov in found:
            buckets.setdefault(classify(run["metric"], path, what, sv, ov), []).append((path, what))
        bad = buckets.get("UNEXPECTED", [])
        unexpected += len(bad)
        print(f"\n{run['name']}: {len(s['rows'])} rows; SDK {s['seconds']:.1f} s, ours {o['seconds']:.1f} s; "
              f"SDK row keys {len({k for r in s['rows'] for k in r if k.startswith('outputs.')})}, "
              f"metrics.json keys {len(s['metrics'])}; unexpected differences: {len(bad)}")
        for name, items in sorted(buckets.items()):
            print(f"  [{name}] {len(items)}")
            for path, what in items[:8] if name == "UNEXPECTED" else []:
                print(f"    {path}: {what}")
    print(f"\nSDK keys and values checked (row keys, their properties' keys, metrics.json): {checked}")
    print(f"unexpected differences: {unexpected}; took {seconds:.0f} s")
    return 1 if unexpected else 0


if __name__ == "__main__":
    main()
