"""``python -m evaluators align RUN_ID --metric M``: align a judge with its reviewers (issue 34) and write
``alignment.json``: the baseline card, the candidates with their dev numbers, and the one gate on test.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluators.cli.text import say
from evaluators.core.errors import UsageError

JUDGE_FLAGS = ("judge", "judge_base_url", "judge_model", "judge_provider", "judge_api_key_env")


def add_commands(sub) -> None:
    a = sub.add_parser("align", help="make a run's judge agree with its reviewers: candidates from train rows, "
                                     "chosen on dev, one gate on held-out test rows")
    a.add_argument("run_id")
    a.add_argument("--metric", required=True, help="the reviewed judge metric to align")
    a.add_argument("--method", choices=["rules", "examples", "both"], default="both",
                   help="rules distilled from reviewers' notes, worked examples, or both (all three tried on dev)")
    a.add_argument("--out", required=True, type=Path, help="folder for alignment.json")
    a.add_argument("--also", metavar="RUN_ID", action="append", default=[], help="another run of the metric (same "
                   "version, settings and threshold) whose reviewed rows join the splits (repeatable)")
    a.add_argument("--promote", action="store_true", help="when the gate calls the candidate better, save it as the "
                   "metric's next version (a metric file in our template form), its provenance kept in the store, and "
                   "give the run's corrected rate with it beside the current judge's (every row judged with it)")
    a.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    a.add_argument("--judge", metavar="NAME", action="append", help="a judge configured on this machine "
                   "(judges.toml); default: the run's own judge")
    a.add_argument("--judge-base-url", help="OpenAI-compatible server, e.g. http://localhost:11434/v1")
    a.add_argument("--judge-api-key-env", metavar="VAR", help="name of the environment variable holding the key")
    a.add_argument("--judge-model", help="judge model or Azure deployment (default gpt-4o-mini)")
    a.add_argument("--judge-provider", choices=["openai", "azure", "compatible"])
    a.add_argument("--temperature", type=float, default=0.0)
    a.add_argument("--max-tokens", type=int, default=800)
    a.add_argument("--seed", type=int, help="the judge's sampling seed")
    a.add_argument("--timeout", type=float, default=60.0, help="seconds per judge call before retrying")
    a.add_argument("--retries", type=int, default=5, help="retries per judge call")
    a.add_argument("--concurrency", type=int, default=8, help="judge calls in flight (at most)")
    a.add_argument("--rpm", type=float, default=None, help="judge requests a minute never to exceed")
    a.add_argument("--tpm", type=float, default=None, help="judge tokens a minute never to exceed")
    a.add_argument("--split-seed", type=int, default=0, help="deals newly reviewed rows into train/dev/test (rows "
                   "assigned before keep their split), orders examples and seeds the intervals")


def _judge(a) -> Any:
    """The judge the flags name; None (the run's own) without any."""
    from evaluators.cli.common import _judge_from_args

    if not any(getattr(a, f) for f in JUDGE_FLAGS):
        return None
    if a.judge and len(a.judge) > 1:
        raise UsageError("align takes one --judge (a jury's judges are aligned one at a time)")
    return _judge_from_args(a)


def _promote(store, out: dict[str, Any]) -> dict[str, Any] | None:
    """The promoted version's name and version, or None (why is put in ``out["not_promoted"]``)."""
    from evaluators.review.align import promote

    try:
        saved = promote(store, out)
    except UsageError as e:
        out["not_promoted"] = str(e)
        return None
    return {"name": saved["name"], "version": saved["version"]}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _say_rates(r: dict[str, Any]) -> None:
    """The run's corrected rate with the current and the promoted judge, on the same reviews."""
    what = r["rate"].replace("_", " ")
    for who, x in (("current judge", r["current"]), ("promoted judge", r["candidate"])):
        say(f"{what} corrected by {x['reviewed_rows']} reviews, {who}: {_pct(x['corrected'])} "
            f"[{_pct(x['ci95_low'])}, {_pct(x['ci95_high'])}]")


def _kappa(card: dict[str, Any]) -> str:
    k = card.get("kappa") or [None, None, None]
    if k[0] is None:
        return "κ undefined"
    return f"κ {k[0]:.2f}" + ("" if k[1] is None else f" [{k[1]:.2f}, {k[2]:.2f}]") + f" on {card['rows']} rows"


def cmd_align(a) -> int:
    from evaluators.cli.common import EXIT_OK, _api_key_from_args
    from evaluators.review.align import align
    from evaluators.store.store import Store

    store = Store(a.db)
    try:
        store.get_run(a.run_id)
    except KeyError:
        raise UsageError(f"no run {a.run_id!r} in this store (a run's id is what `run` prints)") from None
    judge = _judge(a)
    out = align(store, a.run_id, a.metric, judge, api_key=_api_key_from_args(a), method=a.method, seed=a.split_seed,
                rates=a.promote, runs=a.also)
    if a.promote:
        out["promoted"] = _promote(store, out)
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "alignment.json"
    path.write_text(json.dumps(out, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    b, s = out["baseline"], out["splits"]
    say(f"{a.metric}: {s['train']} train, {s['dev']} dev, {s['test']} test rows")
    say(f"current judge: dev {_kappa(b['dev'])}; test {_kappa(b['test'])}")
    for c in out["candidates"]:
        say(f"candidate {c['method']}: dev {_kappa(c['dev'])}")
    g = out["gate"]
    if g is None:
        say(out.get("note", "no candidate"))
    else:
        say(f"chosen on dev: {out['selected']}")
        say(g["sentence"])
        say(f"test split used {g['test_uses']} time{'s' if g['test_uses'] != 1 else ''}")
    if out.get("promoted"):
        p = out["promoted"]
        say(f"promoted: saved {p['name']} version {p['version']}, with where it came from")
        _say_rates(out["rates"])
    elif a.promote:
        say("not promoted: " + out["not_promoted"])
    say(f"wrote {path}")
    return EXIT_OK


COMMANDS = {"align": cmd_align}
