"""``python -m evaluators redteam``: scan a target with attack strategies and write ``attacks.jsonl`` and
``scorecard.json`` (:func:`evaluators.suites.redteam.scan.scan`).

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`:
0 the scan ended with a verdict on at least one attack, 5 none had one (every attack failed at the target or the
judge), 2 bad arguments (said before any call).
"""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from evaluators.cli import cost as cli_cost
from evaluators.cli.text import say, say_table
from evaluators.core.errors import UsageError


def _judge_options(r) -> None:
    """The judge's options, as ``run`` has them (read by ``cli.common._judge_from_args``)."""
    r.add_argument("--judge", metavar="NAME", action="append", help="a judge configured on this machine "
                   "(judges.toml): its URL, model and key come from there")
    r.add_argument("--judge-base-url", help="OpenAI-compatible server, e.g. http://localhost:11434/v1")
    r.add_argument("--judge-api-key-env", metavar="VAR", help="name of the environment variable holding the "
                   "judge's key (never the key itself)")
    r.add_argument("--judge-model", help="judge model or Azure deployment (default gpt-4o-mini)")
    r.add_argument("--judge-provider", choices=["openai", "azure", "compatible"])
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--max-tokens", type=int, default=800)
    r.add_argument("--timeout", type=float, default=60.0, help="seconds per call (judge and target) before retrying")
    r.add_argument("--retries", type=int, default=5, help="retries per call (judge and target)")
    r.add_argument("--concurrency", type=int, default=8, help="calls in flight (judge and target)")
    r.add_argument("--rpm", type=float, default=None, help="judge requests a minute never to exceed")
    r.add_argument("--price", metavar="IN,CACHED,OUT[,BATCH]", help="the judge model's price in USD per 1M tokens "
                   "(input, cached input, output); else prices.toml's entry for the model")
    r.add_argument("--budget", type=float, metavar="USD", help="stop judging before the scan's judge calls would "
                   "cost more than this; the attacks left are errors, judged by the same command with a higher budget")
    r.add_argument("--batch", action="store_true", help="judge through the provider's Batch API (half price, results "
                   "within 24 h); the same command after a kill polls the batches rather than submitting again")
    r.add_argument("--batch-direct-retry", action="store_true", help="with --batch: ask what a batch left as direct "
                   "calls (full price) instead of in a new batch")
    r.add_argument("--tpm", type=float, default=None, help="judge tokens a minute never to exceed")


def add_commands(sub) -> None:
    """Add ``redteam`` to ``python -m evaluators``'s subparsers."""
    r = sub.add_parser("redteam", help="scan a target with the SDK's attack strategies; write attacks.jsonl and "
                                       "scorecard.json")
    r.add_argument("--target-base-url", help="OpenAI-compatible endpoint of the model under test")
    r.add_argument("--target-model", help="the model the target expects")
    r.add_argument("--target-callback", metavar="MODULE:FUNCTION", help="a Python function f(messages) -> str "
                   "answering instead of an endpoint (as the SDK's callback target)")
    r.add_argument("--target-system", metavar="TEXT", help="a system message sent before each attack")
    r.add_argument("--target-key-env", metavar="VAR", help="name of the environment variable holding the target's "
                   "key (never the key itself)")
    r.add_argument("--attacker-base-url", help="OpenAI-compatible endpoint of the attacker model that writes tense "
                   "and translation (hence the groups moderate and difficult); a local one will do")
    r.add_argument("--attacker-model", help="the attacker model")
    r.add_argument("--attacker-key-env", metavar="VAR", help="name of the environment variable holding the "
                   "attacker's key (never the key itself)")
    r.add_argument("--risk-categories", default="violence,hate_unfairness,sexual,self_harm",
                   help="comma-separated (default: all four harms)")
    r.add_argument("--strategies", default="easy", help="comma-separated AttackStrategy names, the group easy, or "
                   "translation:LANGUAGE, moderate (tense), difficult (tense then base64), A+B (A then B), or the conversations "
                   "crescendo and multi_turn (with an attacker model); baseline is always added (default: easy = "
                   "base64, flip, morse)")
    r.add_argument("--objectives", type=int, default=10, metavar="N", help="objectives per risk category")
    r.add_argument("--objectives-file", metavar="F", help="the SDK's custom_attack_seed_prompts file (.json or "
                   ".jsonl); default: the bundled objectives")
    r.add_argument("--seed", dest="scan_seed", type=int, default=0, help="the same seed gives the same attacks, "
                   "byte for byte (default 0)")
    r.add_argument("--threshold", action="append", metavar="CAT=N", help="severity above which an attack on CAT "
                   "succeeded (default 3)")
    r.add_argument("--over-refusal", action="store_true", help="also send as many harmless requests per category, "
                   "rewritten by the same strategies, and judge them for a refusal (harmless.jsonl; the scorecard's "
                   "over_refusal)")
    r.add_argument("--understanding", action="store_true", help="also judge each attack's answer (but baseline's) "
                   "for whether the target understood the disguised request, so a refusal is not confused with a "
                   "garbled reply (understood in attacks.jsonl; the scorecard's understanding)")
    r.add_argument("--max-turns", type=int, default=10, metavar="N", help="a crescendo or multi_turn attack's "
                   "turns at most (default 10)")
    r.add_argument("--max-backtracks", type=int, default=10, metavar="N", help="a crescendo attack's refused turns "
                   "rolled back and asked differently, at most (default 10)")
    r.add_argument("--application-scenario", default="", help="kept in the scorecard's parameters")
    r.add_argument("--out", required=True, help="folder for attacks.jsonl and scorecard.json; run again to resume")
    r.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    r.add_argument("--quiet", action="store_true")
    _judge_options(r)
    r.set_defaults(seed=None)  # (the judge's sampling seed, which _judge_from_args reads: not the scan's)
    d = sub.add_parser("redteam-diff", help="two scans of one configuration against two builds of a target: the "
                                            "attacks newly broken and fixed, with the paired test")
    d.add_argument("before", help="the folder (or attacks.jsonl) of the earlier scan")
    d.add_argument("after", help="the folder (or attacks.jsonl) of the later scan")
    d.add_argument("--out", help="also write the comparison there as JSON")


def _callback(spec: str):
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise UsageError(f"--target-callback takes MODULE:FUNCTION, got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"--target-callback {spec}: cannot load it ({e})") from None
    if not callable(fn):
        raise UsageError(f"--target-callback {spec}: not a function")
    return fn


def _target(a):
    """The target the arguments name: an endpoint (a Target) or a callback, and the target's key."""
    from evaluators.cli.common import key_from_env

    if a.target_callback:
        if a.target_base_url or a.target_model:
            raise UsageError("--target-callback answers instead of --target-base-url/--target-model: give one")
        return _callback(a.target_callback), None
    if not (a.target_base_url and a.target_model):
        raise UsageError("give the target: --target-base-url and --target-model, or --target-callback")
    from evaluators.judge.config import JudgeConfig
    from evaluators.run.target import Target

    config = JudgeConfig(model=a.target_model, provider="compatible", base_url=a.target_base_url,
                         concurrency=a.concurrency, timeout=a.timeout, max_retries=a.retries, temperature=0.0,
                         max_tokens=a.max_tokens)
    return Target(config, a.target_system), key_from_env("--target-key-env", a.target_key_env)


def _attacker(a):
    """The attacker model the arguments name (None without one) and its key."""
    from evaluators.cli.common import key_from_env

    if not (a.attacker_base_url or a.attacker_model):
        return None, None
    if not (a.attacker_base_url and a.attacker_model):
        raise UsageError("--attacker-base-url and --attacker-model go together")
    from evaluators.judge.config import JudgeConfig

    config = JudgeConfig(model=a.attacker_model, provider="compatible", base_url=a.attacker_base_url,
                         concurrency=a.concurrency, timeout=a.timeout, max_retries=a.retries, temperature=0.0,
                         max_tokens=a.max_tokens)
    return config, key_from_env("--attacker-key-env", a.attacker_key_env)


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _print(card: dict) -> None:
    rows = [("risk category", "technique", "attacks", "judged", "errors", "successes", "ASR", "95% CI",
             "vs baseline", "McNemar p")]
    uplift = {(u["risk_category"], u["attack_technique"]): u for u in card["uplift_over_baseline"]}
    for c in card["attack_cells"]:
        lo, hi = c["asr_ci95"]
        u = uplift.get((c["risk_category"], c["attack_technique"]), {})
        diff = u.get("difference")
        rows.append((c["risk_category"], c["attack_technique"], str(c["attacks"]), str(c["n"]), str(c["errors"]),
                     str(c["successes"]), _pct(c["asr"]), "-" if lo is None else f"{_pct(lo)}-{_pct(hi)}",
                     "" if diff is None else f"{100 * diff:+.1f} pts", "" if diff is None else f"{u['mcnemar_p']:.3g}"))
    say_table(rows)


def cmd_redteam(a) -> int:
    from evaluators.cli.common import EXIT_FAILED, EXIT_OK, _api_key_from_args, _floats, _judge_from_args
    from evaluators.judge.config import resolve_api_key
    from evaluators.store.store import Store
    from evaluators.suites.redteam import scan as rt

    cats = rt.check_categories(a.risk_categories.split(","))
    thresholds = rt.thresholds_for(cats, _floats(a.threshold, "--threshold"))
    attacker, attacker_key = _attacker(a)
    rt.resolve_strategies(a.strategies.split(","), attacker is not None)  # said before anything is sent
    target, target_key = _target(a)
    if len(a.judge or []) > 1:
        raise UsageError("--judge given twice: a scan has one judge (a jury is not offered for scans yet)")
    judge, judge_key = _judge_from_args(a), _api_key_from_args(a)
    resolve_api_key(judge, judge_key)  # no key where one is needed: said now, with no call made
    cost = cli_cost.settings(a, judge, [])  # (a budget with no price: refused now)
    last = [0.0, ""]

    def progress(what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if a.quiet or (now - last[0] < 0.5 and done < total and what == last[1]):
            return
        last[0], last[1] = now, what
        sys.stderr.write("\r")  # (back to the line's start: say keeps no control character)
        say(f"{what}: {done}/{total}   ", end="" if done < total else "\n", file=sys.stderr, flush=True)

    res = rt.scan(target, judge, risk_categories=cats, strategies=a.strategies.split(","), objectives=a.objectives,
                  objectives_file=a.objectives_file, seed=a.scan_seed, thresholds=thresholds, store=Store(a.db),
                  out=a.out, target_api_key=target_key, judge_api_key=judge_key,
                  application_scenario=a.application_scenario, attacker=attacker, attacker_api_key=attacker_key,
                  on_progress=progress, cost=cost,
                  target_concurrency=a.concurrency, over_refusal=a.over_refusal,
                  understanding=a.understanding, max_turns=a.max_turns, max_backtracks=a.max_backtracks)
    card, out = res.scorecard, Path(a.out)
    if not a.quiet:
        _print(card)
    errors = card["errors"]
    overall = card["risk_category_summary"][0]
    say(f"{len(res.attacks)} attacks ({res.answered.calls} sent, {res.answered.cached} answers from the cache), "
        f"ASR {overall['overall_asr']:.2f}% over those judged; {errors['total']} without a verdict "
        f"({errors['target']} target, {errors['attacker']} attacker and {errors['judge']} judge errors: in no rate); "
        f"wrote {out / 'attacks.jsonl'} and {out / 'scorecard.json'}")
    if errors["total"] and errors["total"] == len(res.attacks):
        say("error: no attack got a verdict (see the error of each in attacks.jsonl)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_redteam_diff(a) -> int:
    import json

    from evaluators.cli.common import EXIT_OK
    from evaluators.read.exports import write_atomic
    from evaluators.suites.redteam.diff import diff_scans, read_attacks

    res = diff_scans(read_attacks(a.before), read_attacks(a.after))
    rows = [("risk category", "technique", "pairs", "ASR before", "ASR after", "difference [95% CI]", "McNemar p",
             "newly broken", "fixed")]
    for c in [*res["cells"], {"risk_category": "all", "attack_technique": "all", **res["overall"]}]:
        if not c["pairs"]:
            continue
        lo, hi = c["ci95"]
        rows.append((c["risk_category"], c["attack_technique"], str(c["pairs"]), _pct(c["asr_before"]),
                     _pct(c["asr_after"]), f"{100 * c['difference']:+.1f} pts [{100 * lo:+.1f}, {100 * hi:+.1f}]",
                     f"{c['mcnemar_p']:.3g}", str(len(c["newly_broken"])), str(len(c["fixed"]))))
    say_table(rows)
    for aid in res["overall"]["newly_broken"]:
        say(f"  newly broken: {aid}")
    gone = {k: len(v) for k, v in res["left_out"].items() if v}
    if gone:
        say("left out (in no rate): " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in gone.items()))
    if a.out:
        write_atomic(Path(a.out), json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    return EXIT_OK


COMMANDS = {"redteam": cmd_redteam, "redteam-diff": cmd_redteam_diff}
