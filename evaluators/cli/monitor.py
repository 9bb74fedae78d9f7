"""``python -m evaluators monitor ...``: production traffic in (evaluators/monitor). ``token create|revoke|list``,
``project`` (its quiet period), ``serve`` (the OTLP/HTTP receiver), ``status`` and ``export``.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from evaluators.cli import monitor_alerts, monitor_series
from evaluators.cli.text import say


def add_commands(sub) -> None:
    m = sub.add_parser("monitor", help="production traffic: ingest tokens, the OTLP receiver, traces' status and export")
    ms = m.add_subparsers(dest="monitor_command", required=True)
    t = ms.add_parser("token", help="ingest tokens: an app sends its traces with one (Authorization: Bearer TOKEN)")
    ts = t.add_subparsers(dest="token_command", required=True)
    c = ts.add_parser("create", help="make a token for a project (made if new); printed once, stored hashed")
    c.add_argument("--project", required=True)
    r = ts.add_parser("revoke", help="revoke a token (given as itself or its id): its requests get 401 from then on")
    r.add_argument("token", help="the token or its id (monitor token list)")
    ls = ts.add_parser("list", help="tokens' ids, projects and states (never the tokens)")
    ls.add_argument("--project")
    p = ms.add_parser("project", help="make a project or set its quiet period")
    p.add_argument("--project", required=True)
    p.add_argument("--quiet-seconds", type=float, help="a trace is complete this long after its last span, its root "
                                                       "span having ended (default 30)")
    p.add_argument("--conversation-quiet-seconds", type=float, help="a conversation (gen_ai.conversation.id or "
                   "session.id) is assembled and judged this long after its last turn was mapped (default 300)")
    p.add_argument("--redact", help="replace these in traces before they are judged or shown: email,phone,card "
                   "(comma-separated; 'none' for none)")
    p.add_argument("--redact-pattern", action="append", metavar="NAME=REGEX", help="the project's own pattern (RE2), "
                   "its values replaced by [NAME_1]...; repeat for several (they replace the project's; 'none' for none)")
    p.add_argument("--keep-original", action=argparse.BooleanOptionalAction, help="keep the values replaced, apart "
                   "(default: not kept; --no-keep-original removes those kept)")
    s = ms.add_parser("serve", help="receive OTLP/HTTP traces and logs (POST /v1/traces, /v1/logs) and assemble them")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=4318, help="default 4318, OTLP/HTTP's; 0: any free port")
    s.add_argument("--max-body-mb", type=float, default=20.0, help="largest body, before and after gzip (413 past it)")
    s.add_argument("--max-inflight-mb", type=float, default=80.0,
                   help="bodies being read and decoded at once, in all (429 past it; one always goes)")
    s.add_argument("--max-pending", type=int, default=16, help="store writes waiting at most (429 past it)")
    s.add_argument("--write-timeout", type=float, default=10.0, help="seconds a write may take (then 503)")
    s.add_argument("--assemble-every", type=float, default=1.0, help="seconds between looks for complete traces")
    s.add_argument("--judge-every", type=float, default=0, help="also start a process judging every project's "
                   "rules (monitor rule run --every S), a round every S seconds (default 0: none); on PostgreSQL, "
                   "queue each rule's round for the queue's workers (python -m evaluators worker) instead")
    st = ms.add_parser("status", help="a project's traces by state")
    st.add_argument("--project", required=True)
    st.add_argument("--json", action="store_true")
    e = ms.add_parser("export", help="write a project's mapped traces to DIR/traces.jsonl")
    e.add_argument("--project", required=True)
    e.add_argument("--since", help="traces that started at or after this time (ISO, UTC unless it says)")
    e.add_argument("--until", help="traces that started before this time")
    e.add_argument("--out", required=True, type=Path)
    monitor_series.add_command(ms)  # issue 32: monitor series
    monitor_alerts.add_commands(ms)  # issue 32: monitor alert add|test|ack, monitor alerts
    ru = ms.add_parser("rule", help="rules that judge a project's traces: metrics, a judge, a sample rate")
    rus = ru.add_subparsers(dest="rule_command", required=True)
    ra = rus.add_parser("add", help="add a rule, or change one (a new version: each decision keeps its version)")
    ra.add_argument("--project", required=True)
    ra.add_argument("--name", required=True)
    ra.add_argument("--metrics", required=True, help="comma-separated metric names (see `metrics`)")
    ra.add_argument("--sample-rate", type=float, default=1.0, help="share of traces judged (0-1), the same traces for "
                    "every rule: a hash of the trace id under the rate")
    ra.add_argument("--judge-base-url", help="OpenAI-compatible server, e.g. http://localhost:11434/v1")
    ra.add_argument("--judge-model", help="judge model (default gpt-4o-mini)")
    ra.add_argument("--judge-api-key-env", metavar="VAR", help="the NAME of the variable holding the judge's key "
                    "(read when the rule runs; the key itself is never stored)")
    ra.add_argument("--concurrency", type=int, default=8)
    _limit_options(ra)
    rf = rus.add_parser("forecast", help="what a rule would cost a day, from the last day's traffic")
    rf.add_argument("--project", required=True)
    rf.add_argument("--name", required=True)
    rf.add_argument("--traces-per-hour", type=float, help="forecast for this traffic instead of the last day's")
    rr = rus.add_parser("run", help="decide every mapped trace a rule has not, then judge the pending ones")
    rr.add_argument("--project", help="this project's rules (default: every project's)")
    rr.add_argument("--name", help="only this rule (default: every rule of the project)")
    rr.add_argument("--every", type=float, help="go on: a round every this many seconds, until stopped")
    rr.add_argument("--since", help="also decide and judge the stored traces that started at or after this time (ISO, "
                    "UTC unless it says), older than the rule (a rule decides the traces mapped after it was made)")
    rr.add_argument("--with-parent", action="store_true", help=argparse.SUPPRESS)  # serve's child: ends with it
    from evaluators.cli.monitor_review import add_commands as add_review_commands

    for q in (c, r, ls, p, s, st, e, ra, rf, rr, *add_review_commands(ms)):
        q.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")


STATES = (("traces", "traces"), ("open", "open (waiting for the root span's end and the quiet period)"),
          ("mapped", "mapped to a row"), ("no_content", "of which no content captured"),
          ("no_root", "of which mapped without a root span"), ("late", "with late spans (came after mapping)"),
          ("spans", "spans stored"))


def _limit_options(ra) -> None:
    ra.add_argument("--filter", metavar="EXPR", help='judge only the traces it holds for, e.g. \'model == "gpt-4o" and '
                    'latency_ms > 2000 and not error\', \'"retrieve" in span_names\', \'attributes["app.tenant"] == '
                    '"acme"\', \'feedback < 0.5\' (docs: Monitoring)')
    ra.add_argument("--max-per-hour", type=int, help="judge at most this many traces in any hour (the later ones: "
                    "over_hourly_cap)")
    ra.add_argument("--budget-per-day", type=float, metavar="USD", help="stop judging once the rule's judge calls of the "
                    "UTC day reach this (the rest: over_budget); needs the judge model's price")
    ra.add_argument("--price", metavar="IN,CACHED,OUT[,BATCH]", help="the judge model's price in USD per 1M tokens "
                    "(else prices.toml's entry), kept with the rule")
    ra.add_argument("--traces-per-hour", type=float, help="forecast the cost for this traffic instead of the last day's")


def cmd_monitor(a) -> int:
    from evaluators.cli.common import EXIT_OK, EXIT_USAGE
    from evaluators.store.store import Store

    store = Store(a.db)
    if a.monitor_command == "token":
        if a.token_command == "create":
            tid, token = store.create_ingest_token(a.project)
            say(f"token {tid} for project {a.project.strip()!r} (shown once; only its hash is stored):")
            say(token)
        elif a.token_command == "revoke":
            done = store.revoke_ingest_token(a.token)
            if done is None:
                say("error: no such token (give the token or its id: monitor token list)", file=sys.stderr)
                return EXIT_USAGE
            say(f"revoked token {done['id']} of project {done['project']!r}")
        else:
            for t in store.ingest_tokens(a.project):
                state = f"revoked {t['revoked_at']:%Y-%m-%d %H:%M}" if t["revoked_at"] else "active"
                say(f"{t['id']}  {t['project']}  created {t['created_at']:%Y-%m-%d %H:%M}  {state}")
        return EXIT_OK
    if a.monitor_command == "project":
        from evaluators.monitor.redact import project_settings

        store.ensure_monitor_project(a.project, a.quiet_seconds)
        for line in project_settings(store, a.project.strip(), a.redact, a.redact_pattern, a.keep_original,
                                     a.conversation_quiet_seconds):
            say(line)
        return EXIT_OK
    if a.monitor_command == "serve":
        from evaluators.monitor.receiver import Limits
        from evaluators.monitor.serve import serve

        limits = Limits(max_body=int(a.max_body_mb * 2**20), max_inflight=int(a.max_inflight_mb * 2**20),
                        max_pending=a.max_pending, write_timeout=a.write_timeout)
        serve(store, a.host, a.port, limits, a.assemble_every, a.judge_every)
        return EXIT_OK
    if a.monitor_command == "rule":
        return _cmd_rule(a, store)
    if a.monitor_command in ("alert", "alerts"):
        return monitor_alerts.cmd(a, store)
    if a.monitor_command in ("export-otel", "review-sample"):
        from evaluators.cli import monitor_review

        return monitor_review.cmd(a, store)
    if store.monitor_project(a.project) is None:
        say(f"error: no project {a.project!r} (monitor token create --project NAME makes one)", file=sys.stderr)
        return EXIT_USAGE
    if a.monitor_command == "series":
        return monitor_series.cmd_series(a, store)
    if a.monitor_command == "status":
        counts, rules = store.trace_counts(a.project), store.decision_counts(a.project)
        if a.json:
            say(json.dumps({"project": a.project, **counts, **({"rules": rules} if rules else {})}))
        else:
            say(f"project {a.project!r}")
            for key, label in STATES:
                say(f"  {counts[key]:>8,}  {label}")
            for name, by in rules.items():
                say(f"  rule {name!r}: " + ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in by.items()))
        return EXIT_OK
    from evaluators.monitor.serve import export_traces

    n = export_traces(store, a.project, a.out, a.since, a.until)
    say(f"wrote {n:,} traces to {a.out / 'traces.jsonl'}")
    return EXIT_OK


def _cmd_rule(a, store) -> int:
    from evaluators.cli.common import EXIT_OK

    if a.rule_command == "add":
        from evaluators.judge.config import JudgeConfig
        from evaluators.monitor.rules import add_rule

        judge = JudgeConfig(model=a.judge_model or "gpt-4o-mini", base_url=a.judge_base_url,
                            provider="compatible" if a.judge_base_url else "openai", concurrency=a.concurrency)
        version = add_rule(store, a.project, a.name, a.metrics.split(","), a.sample_rate,
                           judge.for_storage().to_dict(), a.judge_api_key_env, filter=a.filter,
                           max_per_hour=a.max_per_hour, budget_per_day=a.budget_per_day, prices=_rule_prices(a, judge))
        _say_forecast(store, store.monitor_rule(a.project, a.name), a.traces_per_hour)
        say(f"rule {a.name!r} of project {a.project!r}: version {version}")
        return EXIT_OK
    if a.rule_command == "forecast":
        rule = store.monitor_rule(a.project, a.name)
        if rule is None:
            from evaluators.core.errors import UsageError

            raise UsageError(f"no rule {a.name!r} in project {a.project!r} (monitor rule add)")
        _say_forecast(store, rule, a.traces_per_hour)
        return EXIT_OK
    from evaluators.cli.monitor_rounds import round_or_defer, rule_round

    if a.every is None:
        if not rule_round(store, a.project, a.name, a.since):
            from evaluators.core.errors import UsageError

            raise UsageError(f"no rule{' ' + repr(a.name) if a.name else ''}"
                             f"{' in project ' + repr(a.project) if a.project else ''} (monitor rule add)")
        return EXIT_OK
    if a.since is not None:
        from evaluators.core.errors import UsageError

        raise UsageError("--since is for one round (a backfill): run it without --every")
    import threading

    stop, parent = threading.Event(), os.getppid()
    while True:  # (a TERM ends the process between or during rounds: a decision is written whole or not at all)
        if a.with_parent and os.getppid() != parent:  # the receiver that started it is gone, however it ended
            return EXIT_OK
        try:
            round_or_defer(store, a.project, a.name)  # (on PostgreSQL, jobs for the queue's workers)
        except Exception as e:  # noqa: BLE001 — the store or the judge is down: the next round tries again
            say(f"monitor rule run: the round failed ({type(e).__name__}: {e}); trying again", file=sys.stderr,
                  flush=True)
        stop.wait(a.every)


def _rule_prices(a, judge) -> dict | None:
    """The judge's price kept with the rule (``--price``, else prices.toml's), as ``run`` keeps a run's."""
    import argparse as ap

    from evaluators.cli.cost import settings

    return settings(ap.Namespace(price=a.price, budget=None, batch=False, batch_direct_retry=False), judge, [])["prices"] or None


def _say_forecast(store, rule: dict, traces_per_hour: float | None) -> None:
    """The rule's forecast cost a day (evaluators.monitor.rules.forecast), through the engine's estimate."""
    from evaluators.monitor.rules import forecast

    def estimate(rows, rule):
        from evaluators.api import estimate_run
        from evaluators.data.loading import load_dataset
        from evaluators.judge.config import JudgeConfig
        from evaluators.run.spec import RunSpec

        spec = RunSpec(metrics=list(rule["metrics"]), judge=JudgeConfig.from_dict(rule["judge"]),
                       prices=rule.get("prices") or {})
        return estimate_run(store, load_dataset(rows, name="forecast"), spec)

    f = forecast(store, rule["project"], rule, estimate, traces_per_hour)
    share = lambda v: "unknown (no trace to measure)" if v is None else f"{v:.1%}"  # noqa: E731
    say(f"forecast: {f['traces_per_day']:,.0f} traces a day ({f['measured_from']}) x sample rate {f['sample_rate']:g}"
        f" x filter's share {share(f['filter_share'])} x with content {share(f['content_share'])} = "
        f"{f['judged_per_day']:,.1f} judged a day" + (" (held to the hourly cap)" if f["capped_by"] else ""))
    if f["usd_per_day"] is None:
        say(f"forecast: cost a day unknown: {f['why']}")
        return
    capped = f["budget_per_day"] is not None and f["usd_per_day"] > f["budget_per_day"]
    say(f"forecast: {f['tokens_per_trace']:,.0f} judge tokens a judged trace ({f['calls_per_trace']:g} calls), "
        f"${f['usd_per_trace']:.6f} a trace: ${f['usd_per_day']:,.4f} a day"
        + (f", held to the budget of ${f['budget_per_day']:,.4f} a day" if capped else ""))


COMMANDS = {"monitor": cmd_monitor}
