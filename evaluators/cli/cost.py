"""The run command's cost options (``--price``, ``--budget``, ``--batch``) and its cost summary: the
estimate said before the first call, ``cost.*`` keys in ``metrics.json`` and cost lines after the run."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from evaluators.cli.text import say

def add_run_options(r) -> None:
    """The cost options of ``run`` (registered by evaluators.cli.main)."""
    r.add_argument("--price", metavar="IN,CACHED,OUT[,BATCH]",
                   help="the judge model's price in USD per 1M tokens: input, cached input (may be empty: as input), "
                   "output, and the share the Batch API charges (default 0.5); else prices.toml's entry for the model")
    r.add_argument("--budget", type=float, metavar="USD", help="stop before the run's judge calls would cost more "
                   "than this (calls in flight counted at their estimate); the run ends 'stopped: budget' and the "
                   "same command with a higher --budget goes on without asking again what was answered")
    r.add_argument("--batch", action="store_true", help="send the judge calls through the provider's Batch API "
                   "(half price, results within 24 h); the batches are stored with the run, so the same command "
                   "after a kill polls them rather than submitting again")
    r.add_argument("--batch-direct-retry", action="store_true", help="with --batch: ask failed or expired batch "
                   "requests again as direct calls (full price) instead of in a new batch")


def settings(a, judge, jury: list, judged: bool = True) -> dict[str, Any]:
    """``prepare_run``'s ``cost`` argument from the options: the prices of the judge (and jurors) snapshotted
    from ``--price`` or the operator's prices.toml, the budget and batch mode.

    Raises:
        UsageError: a bad ``--price`` or prices.toml, or a ``--budget`` with no price for the judge model.
    """
    from evaluators.core.errors import UsageError
    from evaluators.judge.prices import Price, configured_prices

    table = configured_prices()
    prices = {j.model: table[j.model].to_dict() for j in [judge, *jury] if j is not None and j.model in table}
    if a.price:
        prices[judge.model] = Price.parse(a.price).to_dict()
    if a.budget is not None and judged and judge.model not in prices:
        raise UsageError(f"--budget needs the price of the judge model '{judge.model}': give --price "
                         "INPUT,CACHED,OUTPUT or list it in prices.toml")
    return {"prices": prices, "budget": a.budget, "batch": a.batch, "batch_direct_retry": a.batch_direct_retry,
            # the answers' model and cost when a target wrote them (cli.target), kept with the run: its budget covers them
            "target": getattr(a, "target_facts", None)}


def estimate_before(store, rid: str, quiet: bool) -> None:
    """The run's estimate (remaining calls, tokens with the model's tokenizer, USD), kept in its spec and said
    on stderr, when the judge has a price or the run a budget (else not worked out: it renders every prompt)."""
    from evaluators.api import estimate_run
    from evaluators.judge.prices import price_for
    from evaluators.run.spec import RunSpec

    run = store.get_run(rid)
    spec = RunSpec.from_dict(run["spec"])
    if spec.judge is None or (price_for(spec.judge.model, spec.prices) is None and spec.budget is None):
        return
    est = estimate_run(store, store.open_dataset(run["dataset_id"]), spec)
    times = spec.repeat * max(1, len(spec.jurors()))
    kept = {k: est[k] * (times if k in ("judge_calls", "prompt_tokens", "completion_tokens") else 1)
            for k in ("judge_calls", "prompt_tokens", "completion_tokens", "tokenizer")}
    kept["usd"] = None if est["usd"] is None else est["usd"] * times
    kept["by_metric"] = {m: {**v, "usd": None if v["usd"] is None else v["usd"] * times}
                         for m, v in est["by_metric"].items()}
    spec.estimate = kept
    store.update_run(rid, spec=spec.to_dict())
    if not quiet:
        usd = "no price given" if kept["usd"] is None else f"${kept['usd']:,.4f}"
        say(f"estimate: {kept['judge_calls']:,} judge calls, {kept['prompt_tokens']:,} prompt tokens "
              f"({kept['tokenizer']}), {usd}" + (" at Batch API prices" if spec.batch else ""), file=sys.stderr)


def add_cost_keys(store, rid: str, out_dir: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics.json`` with the run's ``cost.*`` keys added (written again in place), and the cost lines
    printed under the summary. Unchanged for a run with no judge."""
    from evaluators.read.cost import cost_lines, run_cost
    from evaluators.read.exports import write_atomic

    cost = run_cost(store, rid)
    if not cost:
        return metrics
    merged = {**metrics, **cost}
    write_atomic(Path(out_dir) / "metrics.json", json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    for line in cost_lines(cost, store.get_run(rid)["spec"]["metrics"]):
        say(line)
    return merged
