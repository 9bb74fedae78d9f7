"""``python -m evaluators monitor ...``: production traffic in (evaluators/monitor). ``token create|revoke|list``,
``project`` (its quiet period), ``serve`` (the OTLP/HTTP receiver), ``status`` and ``export``.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes as there.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


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
    s = ms.add_parser("serve", help="receive OTLP/HTTP traces and logs (POST /v1/traces, /v1/logs) and assemble them")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=4318, help="default 4318, OTLP/HTTP's; 0: any free port")
    s.add_argument("--max-body-mb", type=float, default=20.0, help="largest body, before and after gzip (413 past it)")
    s.add_argument("--max-inflight-mb", type=float, default=80.0,
                   help="bodies being read and decoded at once, in all (429 past it; one always goes)")
    s.add_argument("--max-pending", type=int, default=16, help="store writes waiting at most (429 past it)")
    s.add_argument("--write-timeout", type=float, default=10.0, help="seconds a write may take (then 503)")
    s.add_argument("--assemble-every", type=float, default=1.0, help="seconds between looks for complete traces")
    st = ms.add_parser("status", help="a project's traces by state")
    st.add_argument("--project", required=True)
    st.add_argument("--json", action="store_true")
    e = ms.add_parser("export", help="write a project's mapped traces to DIR/traces.jsonl")
    e.add_argument("--project", required=True)
    e.add_argument("--since", help="traces that started at or after this time (ISO, UTC unless it says)")
    e.add_argument("--until", help="traces that started before this time")
    e.add_argument("--out", required=True, type=Path)
    for q in (c, r, ls, p, s, st, e):
        q.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")


STATES = (("traces", "traces"), ("open", "open (waiting for the root span's end and the quiet period)"),
          ("mapped", "mapped to a row"), ("no_content", "of which no content captured"),
          ("no_root", "of which mapped without a root span"), ("late", "with late spans (came after mapping)"),
          ("spans", "spans stored"))


def cmd_monitor(a) -> int:
    from evaluators.cli.main import EXIT_OK, EXIT_USAGE
    from evaluators.store.store import Store

    store = Store(a.db)
    if a.monitor_command == "token":
        if a.token_command == "create":
            tid, token = store.create_ingest_token(a.project)
            print(f"token {tid} for project {a.project.strip()!r} (shown once; only its hash is stored):")
            print(token)
        elif a.token_command == "revoke":
            done = store.revoke_ingest_token(a.token)
            if done is None:
                print("error: no such token (give the token or its id: monitor token list)", file=sys.stderr)
                return EXIT_USAGE
            print(f"revoked token {done['id']} of project {done['project']!r}")
        else:
            for t in store.ingest_tokens(a.project):
                state = f"revoked {t['revoked_at']:%Y-%m-%d %H:%M}" if t["revoked_at"] else "active"
                print(f"{t['id']}  {t['project']}  created {t['created_at']:%Y-%m-%d %H:%M}  {state}")
        return EXIT_OK
    if a.monitor_command == "project":
        store.ensure_monitor_project(a.project, a.quiet_seconds)
        print(f"project {a.project.strip()!r}: quiet period {store.monitor_project(a.project.strip())['quiet_seconds']:g} s")
        return EXIT_OK
    if a.monitor_command == "serve":
        from evaluators.monitor.receiver import Limits
        from evaluators.monitor.serve import serve

        limits = Limits(max_body=int(a.max_body_mb * 2**20), max_inflight=int(a.max_inflight_mb * 2**20),
                        max_pending=a.max_pending, write_timeout=a.write_timeout)
        serve(store, a.host, a.port, limits, a.assemble_every)
        return EXIT_OK
    if store.monitor_project(a.project) is None:
        print(f"error: no project {a.project!r} (monitor token create --project NAME makes one)", file=sys.stderr)
        return EXIT_USAGE
    if a.monitor_command == "status":
        counts = store.trace_counts(a.project)
        if a.json:
            print(json.dumps({"project": a.project, **counts}))
        else:
            print(f"project {a.project!r}")
            for key, label in STATES:
                print(f"  {counts[key]:>8,}  {label}")
        return EXIT_OK
    from evaluators.monitor.serve import export_traces

    n = export_traces(store, a.project, a.out, a.since, a.until)
    print(f"wrote {n:,} traces to {a.out / 'traces.jsonl'}")
    return EXIT_OK


COMMANDS = {"monitor": cmd_monitor}
