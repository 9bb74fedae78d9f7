"""``monitor review-sample`` (issue 32: a review queue of judged production traces, k a window;
evaluators/review/production.py) and ``monitor export-otel`` (issue 32, "Out to other tools"): a project's judged scores sent as OpenTelemetry
``gen_ai.evaluation.result`` log events to an OTLP/HTTP endpoint (evaluators/monitor/otel_export.py)."""
from __future__ import annotations

import sys

from evaluators.cli.text import say


def add_commands(ms) -> list:
    """Add the commands to ``monitor``'s subparsers; returns their parsers (they take ``--db`` as the others)."""
    o = ms.add_parser("export-otel", help="send a project's judged scores as OpenTelemetry gen_ai.evaluation.result "
                      "log events to an OTLP/HTTP endpoint")
    o.add_argument("--project", required=True)
    o.add_argument("--endpoint", required=True, help="the collector's OTLP/HTTP logs URL, e.g. "
                   "http://localhost:4318/v1/logs (no credentials in it)")
    o.add_argument("--rule", help="only this rule's scores (default: every rule's, each its latest version)")
    o.add_argument("--since", help="only traces that started at or after this time (ISO, UTC unless it says)")
    o.add_argument("--until", help="only traces that started before this time")
    o.add_argument("--headers-env", metavar="NAME", help="the NAME of a variable holding headers to send, "
                   "k=v,k2=v2 (a collector's token; never given on the command line)")
    o.add_argument("--timeout", type=float, default=10.0, help="seconds a request waits for an answer")
    o.add_argument("--retries", type=int, default=3, help="retries of a request with no answer, 429 or a 5xx")
    rs = ms.add_parser("review-sample", help="a review queue of a rule's judged traces, drawn at random, so many "
                       "a window (reviewed on the Review page)")
    rs.add_argument("--project", required=True)
    rs.add_argument("--rule", required=True)
    rs.add_argument("--metric", required=True)
    rs.add_argument("--per-window", type=int, default=10, help="traces drawn in each window (default 10)")
    rs.add_argument("--window", default="1h", help="the windows' width: 15m, 1h, 1d... (default 1h)")
    rs.add_argument("--since", help="traces that started at or after this time (ISO, UTC unless it says; "
                    "default: a day ago)")
    rs.add_argument("--until", help="traces that started before this time (default: now)")
    rs.add_argument("--seed", type=int, default=0, help="the draw's seed (the same seed draws the same traces)")
    rs.add_argument("--reviewer", help="who makes the queue (kept with it)")
    return [o, rs]


def cmd(a, store) -> int:
    if a.monitor_command == "review-sample":
        return _review_sample(a, store)
    from evaluators.cli.common import EXIT_ERROR, EXIT_OK
    from evaluators.monitor.otel_export import ExportError, export_otel, headers_from_env
    from evaluators.monitor.serve import _ns

    try:
        done = export_otel(store, a.project, a.endpoint, rule=a.rule, since_ns=_ns(a.since, "--since"),
                           until_ns=_ns(a.until, "--until"), headers=headers_from_env(a.headers_env),
                           timeout=a.timeout, retries=max(0, a.retries))
    except ExportError as e:
        say(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    say(f"sent {done['sent']:,} scores in {done['requests']:,} requests to {a.endpoint}"
        + (f" ({done['rejected']:,} rejected by it)" if done["rejected"] else ""))
    return EXIT_OK


def _review_sample(a, store) -> int:
    import time

    from evaluators.cli.common import EXIT_OK
    from evaluators.monitor.serve import _ns
    from evaluators.cli.monitor_series import window_seconds  # (one reading of a window for every command)
    from evaluators.review.production import sample_production

    until = _ns(a.until, "--until") or time.time_ns()
    since = _ns(a.since, "--since") or until - 86_400 * 10**9
    made = sample_production(store, a.project, a.rule, a.metric, since, until, window_seconds(a.window),
                             a.per_window, a.seed, created_by=a.reviewer)
    say(f"{sum(len(q['rows']) for q in made):,} traces to review in {len(made)} queue(s):")
    for q in made:
        say(f"queue {q['queue_id']}: {len(q['rows']):,} traces of run {q['run_id']} "
            f"(Review page: /review?run={q['run_id']}&queue={q['queue_id']})")
    return EXIT_OK
