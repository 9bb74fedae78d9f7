"""``python -m evaluators monitor series``: a rule's metric per window of event time, as the Monitoring page draws it
(evaluators.read.monitor_series.rate_series: counted in the database, 95% Wilson interval, every version of the rule
with what each change changed). Registered by a small hunk in :mod:`evaluators.cli.monitor`."""
from __future__ import annotations

import datetime as dt
import json
import re
import sys

from evaluators.cli.text import say

UNITS = {"m": 60, "h": 3600, "d": 86_400}


def add_command(ms) -> None:
    s = ms.add_parser("series", help="a rule's metric per window: rate, 95%% interval, n judged, the rule's changes")
    s.add_argument("--project", required=True)
    s.add_argument("--metric", required=True, help="the metric's name (one of the rule's)")
    s.add_argument("--rule", help="the rule (default: the project's one rule judging the metric)")
    s.add_argument("--window", default="1h", help="each window's length: 5m, 15m, 1h, 6h, 1d... (default 1h)")
    s.add_argument("--since", help="traces that started at or after this time (ISO, UTC unless it says; default: a "
                                   "day before --until)")
    s.add_argument("--until", help="traces that started before this time (default: the current window's end)")
    s.add_argument("--min-n", type=int, default=30, help="a window judging fewer is marked few (default 30)")
    s.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    s.add_argument("--json", action="store_true", help="a JSON list of windows: start, n, rate, low, high, "
                                                       "corrected, changes")


def window_seconds(text: str) -> int:
    """``5m``, ``1h``, ``1d`` ... as seconds (a whole number of minutes, at least 1)."""
    from evaluators.core.errors import UsageError

    m = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", text or "")
    if not m or int(m.group(1)) == 0:
        raise UsageError(f"--window {text!r} is not a length: give it as 5m, 15m, 1h, 6h or 1d")
    return int(m.group(1)) * UNITS[m.group(2)]


def cmd_series(a, store) -> int:
    from evaluators.cli.common import EXIT_OK, EXIT_USAGE
    from evaluators.core.errors import UsageError
    from evaluators.monitor.serve import _ns
    from evaluators.read.monitor_series import rate_series, scope_note
    from evaluators.read.monitor_reviewed import reviewed_series

    width = window_seconds(a.window)
    if a.min_n < 1:
        raise UsageError(f"--min-n is a number of traces, 1 or more, not {a.min_n}")
    rules = [r for r in store.monitor_rules(a.project) if a.rule in (None, r["name"])]
    judging = [r for r in rules if a.metric in r["metrics"]]
    if len(judging) != 1:
        if a.rule and not rules:
            why = f"project {a.project!r} has no rule {a.rule!r}"
        elif not judging:
            why = (f"the rule {a.rule!r} does not judge {a.metric!r}" if a.rule
                   else f"no rule of project {a.project!r} judges {a.metric!r}")
        else:
            why = f"several rules judge {a.metric!r} ({', '.join(r['name'] for r in judging)}): say which with --rule"
        say(f"error: {why}", file=sys.stderr)
        return EXIT_USAGE
    [rule] = judging
    now = int(dt.datetime.now(dt.timezone.utc).timestamp()) * 10**9
    until = _ns(a.until, "--until") or (now // (width * 10**9) + 1) * width * 10**9
    since = _ns(a.since, "--since") or until - 86_400 * 10**9
    try:
        series = rate_series(store, a.project, rule["name"], None, a.metric, since, until, width, a.min_n)
    except ValueError as e:
        raise UsageError(str(e)) from None
    # each window's rate corrected by its reviewed traces (prediction-powered; None where it has no sampled review)
    reviewed = reviewed_series(store, a.project, rule["name"], a.metric, since, until, width)
    windows = []
    for p in series["points"]:
        start = dt.datetime.fromtimestamp(p["start_ns"] // 10**9, dt.timezone.utc)
        windows.append({"start": start.isoformat().replace("+00:00", "Z"), "n": p["n"], "rate": p["rate"],
                        "low": p["low"], "high": p["high"], "corrected": reviewed.get(p["start_ns"], {}).get("corrected"), "few": p["few"],
                        "weighted": p["weighted"], "changes": p["changes"]})
    if a.json:
        say(json.dumps(windows))
        return EXIT_OK
    say(f"{a.metric}: {series['measure']} per {a.window} (rule {rule['name']!r}, threshold {series['threshold']:g}; "
        f"95% Wilson interval; * fewer than {a.min_n} judged)")
    if scope_note(series):
        say(f"  ({scope_note(series)})")
    for w in windows:
        rate = "—" if w["rate"] is None else f"{w['rate']:6.1%}  [{w['low']:.1%}, {w['high']:.1%}]"
        fixed = "" if w["corrected"] is None else f"  corrected by reviews {w['corrected']:.1%}"
        say(f"  {w['start']}  n={w['n']:>6,}  {rate}{' *' if w['few'] and w['n'] else ''}"
            f"{' weighted' if w['weighted'] else ''}{fixed}")
        for c in w["changes"]:
            say(f"      change: {c}")
    return EXIT_OK
