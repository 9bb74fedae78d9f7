"""Judge cost per 1,000 judged rows, direct against the Batch API, and the share of prompt tokens a provider's
prefix cache serves with the templates' fixed text first (now) against last (before issue 23).

    python bench/cost.py [--price 0.15,0.075,0.60,0.5] [--model gpt-4o-mini] [--data data/rag_single_turn.jsonl]

Runs against the loopback judge (tests/judge_server.py), which answers chat completions and the Batch API and
reports usage counted with the model's tokenizer (tiktoken o200k_base for gpt-4o-mini) instead of its usual
characters / 4. Its verdicts are scripted and short (a sentence and a score), so the completion tokens are far
fewer than a real judge's; the table gives the cost both as billed (the loopback's replies) and as estimated
(120 completion tokens a verdict, the estimate's own figure). Prices are the user's, per 1M tokens.

Two prefix caches are simulated (the longest prefix shared with an earlier prompt, in whole blocks):
OpenAI's rule (128-token blocks, prompts of at least 1,024 tokens) and a vLLM-style automatic prefix cache
(16-token blocks, no minimum).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METRICS = ["coherence", "fluency", "groundedness", "relevance", "retrieval", "similarity"]
BEFORE = "826eb69"  # the commit before issue 23's templates put their fixed text first


def run_once(server, data: str, metrics: list[str], model: str, price: dict, batch: bool = False,
             templates: dict[str, str] | None = None) -> dict:
    from evaluators.api import prepare_run
    from evaluators.judge.config import JudgeConfig
    from evaluators.read.cost import run_cost
    from evaluators.run.runner import Runner
    from evaluators.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/evals.db")
        judge = JudgeConfig(model=model, provider="compatible", base_url=server.url, concurrency=8)
        from evaluators.api import estimate_run
        from evaluators.run.spec import RunSpec

        rid = prepare_run(store, data, metrics, judge, templates=templates,
                          cost={"prices": {model: price}, "batch": batch})
        run = store.get_run(rid)
        est = estimate_run(store, store.open_dataset(run["dataset_id"]), RunSpec.from_dict(run["spec"]))
        calls_before = len(server.calls)
        status = Runner(store, rid).run()
        cost = run_cost(store, rid)
        rows = len(store.open_dataset(run["dataset_id"]))
        return {"status": status, "rows": rows, "cost": cost, "estimate": est,
                "chat_calls": len(server.calls) - calls_before}


def old_templates(metrics: list[str], where: Path) -> dict[str, str]:
    """The built-in templates as they were before issue 23 (fields before the answer format), as user files."""
    out = {}
    for m in metrics:
        text = subprocess.run(["git", "show", f"{BEFORE}:evaluators/metrics/prompts/{m}.md"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
        (where / f"{m}.md").write_text(text)
        out[m] = str(where / f"{m}.md")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--price", default="0.15,0.075,0.60,0.5", help="IN,CACHED,OUT,BATCH_SHARE (USD per 1M tokens)")
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--data", default=str(ROOT / "data" / "rag_single_turn.jsonl"))
    a = ap.parse_args()
    os.environ.setdefault("EVAL_HOME", tempfile.mkdtemp())
    os.environ["EVAL_BATCH_POLL"] = "0.02"
    from evaluators.judge.prices import Price
    from evaluators.judge.tokens import tokenizer_for
    from tests.judge_server import JudgeServer

    price = Price.parse(a.price).to_dict()
    tok = tokenizer_for(a.model)
    print(f"data: {a.data}; metrics: {', '.join(METRICS)}; model {a.model} ({tok.describe()}); prices per 1M: "
          f"input ${price['input']}, cached ${price.get('cached_input', price['input'])}, output ${price['output']}, "
          f"batch x{price['batch']}\n")
    print("Per 1,000 judged rows: a row judged on one metric (one judge call); a dataset row judged on all six "
          "metrics costs six times that.\n")
    print("| mode | judged rows (rows x metrics) | chat calls | batch requests | billed USD / 1,000 judged rows "
          "| estimated USD / 1,000 judged rows |")
    print("|---|---|---|---|---|---|")
    for batch in (False, True):
        with JudgeServer() as server:
            server.token_count = tok.count
            r = run_once(server, a.data, METRICS, a.model, price, batch=batch)
            judged = r["rows"] * len(METRICS)
            per = 1000 / judged
            print(f"| {'Batch API' if batch else 'direct'} | {judged} | {r['chat_calls']} | "
                  f"{server.batch_api.requests} | ${r['cost']['cost.usd'] * per:.4f} | ${r['estimate']['usd'] * per:.4f} |")
    print("\n| templates | prefix cache | prompt tokens | cached tokens | cached share | billed USD / 1,000 judged rows |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        old = old_templates(METRICS, Path(tmp))
        for label, templates in (("fields last (now)", None), ("fields first (before)", old)):
            for cache_label, rule in (("OpenAI (128-token blocks, >= 1,024 tokens)", (128, 1024)),
                                      ("vLLM-style (16-token blocks)", (16, 0))):
                with JudgeServer() as server:
                    server.token_count, server.prefix_cache = tok.count, rule
                    r = run_once(server, a.data, METRICS, a.model, price, templates=templates)
                c = r["cost"]
                per = 1000 / (r["rows"] * len(METRICS))
                share = c["cost.cached_share"] or 0.0
                print(f"| {label} | {cache_label} | {c['cost.prompt_tokens']:,} | {c['cost.cached_prompt_tokens']:,} | "
                      f"{share:.1%} | ${c['cost.usd'] * per:.4f} |")


if __name__ == "__main__":
    main()
