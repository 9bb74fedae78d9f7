"""``python -m evaluators monitor alert add|test|ack`` and ``monitor alerts`` (issue 32): alert rules on a project's
rates and traffic, the alerts they raised (evaluated after each round of the monitor rules: evaluators.monitor.alerting),
a signed sample sent to a rule's webhook, an alert acknowledged. Rates are given in percent: ``--above 2`` is 2%.
Registered by a small hunk in :mod:`evaluators.cli.monitor`."""
from __future__ import annotations

import json
import os
import sys
import urllib.parse

from evaluators.cli.text import say

DB_HELP = "SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)"


def add_commands(ms) -> None:
    al = ms.add_parser("alert", help="alert rules on a rule's rate or the traffic: add, test the webhook, ack an alert")
    als = al.add_subparsers(dest="alert_command", required=True)
    a = als.add_parser("add", help="add an alert rule, or change the one of that name")
    a.add_argument("--project", required=True)
    a.add_argument("--name", required=True)
    a.add_argument("--metric", help="the metric whose rate is watched (one a monitor rule judges)")
    a.add_argument("--rule", help="the monitor rule judging it (default: the project's one rule judging the metric)")
    a.add_argument("--above", type=float, metavar="PERCENT", help="alert when the metric's rate (its defect rate for "
                   "a safety metric, else its pass rate) is above this, in percent: 2 is 2%%")
    a.add_argument("--below", type=float, metavar="PERCENT", help="alert when the rate is below this, in percent")
    a.add_argument("--judged-share-below", type=float, metavar="PERCENT", help="alert when the rule judges less than "
                   "this share of the traces it sampled in the last hour, in percent")
    a.add_argument("--no-traffic-minutes", type=float, metavar="M", help="alert when no trace started for M minutes")
    a.add_argument("--min-n", type=int, default=30, help="judged traces before a rate alert may fire (default 30)")
    a.add_argument("--webhook", metavar="URL", help="POST each new alert here as JSON, signed (X-Signature)")
    a.add_argument("--secret-env", metavar="VAR", help="the NAME of the variable holding the webhook's HMAC secret "
                   "(read when an alert is sent; the secret itself is never stored)")
    t = als.add_parser("test", help="send a sample alert, signed, to an alert rule's webhook")
    k = als.add_parser("ack", help="acknowledge an alert (its id: monitor alerts)")
    for p in (t, k):
        p.add_argument("--project", required=True)
    t.add_argument("--name", required=True)
    k.add_argument("--id", type=int, required=True)
    k.add_argument("--by", required=True, help="who acknowledges it")
    ls = ms.add_parser("alerts", help="a project's alerts, newest first")
    ls.add_argument("--project", required=True)
    ls.add_argument("--json", action="store_true", help="a JSON list of alerts")
    for p in (a, t, k, ls):
        p.add_argument("--db", help=DB_HELP)


def cmd(a, store) -> int:
    from evaluators.cli.common import EXIT_OK, EXIT_USAGE

    if store.monitor_project(a.project) is None:
        say(f"error: no project {a.project!r} (monitor token create --project NAME makes one)", file=sys.stderr)
        return EXIT_USAGE
    if a.monitor_command == "alerts":
        return _list(a, store)
    if a.alert_command == "add":
        return _add(a, store)
    if a.alert_command == "ack":
        if not store.ack_alert(a.project, a.id, a.by):
            say(f"error: project {a.project!r} has no alert {a.id} (monitor alerts --project {a.project})",
                file=sys.stderr)
            return EXIT_USAGE
        say(f"alert {a.id} acknowledged by {a.by.strip()}")
        return EXIT_OK
    return _test(a, store)


def _percent(value: float, flag: str) -> float:
    from evaluators.core.errors import UsageError

    if not 0 < value < 100:
        raise UsageError(f"{flag} is a percent strictly between 0 and 100 (2 is 2%), not {value:g}")
    return value / 100


def _add(a, store) -> int:
    from evaluators.cli.common import EXIT_OK
    from evaluators.core.errors import UsageError
    from evaluators.read.monitor_alerts import condition

    given = [f for f in ("above", "below", "judged_share_below", "no_traffic_minutes") if getattr(a, f) is not None]
    if len(given) != 1:
        raise UsageError("say what the alert watches: --metric M with --above or --below, --judged-share-below or "
                         "--no-traffic-minutes (one of them)")
    [what] = given
    if what in ("above", "below") and not a.metric:
        raise UsageError(f"--{what} is a rate of a metric: name it with --metric")
    if a.webhook:
        parts = urllib.parse.urlsplit(a.webhook)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--webhook must be an http(s)://host/... URL, not {a.webhook!r}")
        if not a.secret_env:
            raise UsageError("--webhook needs --secret-env VAR, the variable holding its secret (alerts are signed)")
    elif a.secret_env:
        raise UsageError("--secret-env is the secret of a --webhook: give the webhook too")
    rule = None
    if what != "no_traffic_minutes":
        rule = _monitor_rule(store, a.project, a.rule, a.metric if what in ("above", "below") else None)
    if what == "no_traffic_minutes":
        if not a.no_traffic_minutes > 0:
            raise UsageError(f"--no-traffic-minutes is a number of minutes over 0, not {a.no_traffic_minutes:g}")
        kind, threshold = "no_traffic_minutes", a.no_traffic_minutes
    elif what == "judged_share_below":
        kind, threshold = "judged_share_below", _percent(a.judged_share_below, "--judged-share-below")
    else:
        kind, threshold = f"rate_{what}", _percent(getattr(a, what), f"--{what}")
    rid = store.save_alert_rule(a.project, a.name, kind, threshold, metric=a.metric if kind.startswith("rate") else None,
                                rule=rule, min_n=a.min_n, webhook_url=a.webhook, secret_env=a.secret_env)
    say(f"alert rule {a.name!r} of project {a.project!r} (id {rid}): {condition(store.alert_rule(a.project, a.name))}")
    if a.secret_env and not os.environ.get(a.secret_env):
        say(f"note: {a.secret_env} is not set here; the process that judges the rules must have it, or its alerts' "
            f"deliveries fail", file=sys.stderr)
    return EXIT_OK


def _monitor_rule(store, project: str, name: str | None, metric: str | None) -> str:
    """The monitor rule an alert watches: ``name``, or the project's one rule judging ``metric``."""
    from evaluators.core.errors import UsageError

    rules = [r for r in store.monitor_rules(project) if name in (None, r["name"])]
    judging = [r for r in rules if metric is None or metric in r["metrics"]]
    if len(judging) == 1:
        return judging[0]["name"]
    if name and not rules:
        raise UsageError(f"project {project!r} has no rule {name!r} (monitor rule add)")
    if not judging:
        raise UsageError(f"no rule of project {project!r} judges {metric!r}" if metric else
                         f"project {project!r} has no rule (monitor rule add)")
    raise UsageError(f"several rules could be watched ({', '.join(r['name'] for r in judging)}): say which with --rule")


def _list(a, store) -> int:
    from evaluators.cli.common import EXIT_OK
    from evaluators.read.monitor_alerts import history

    got = history(store, a.project)
    if a.json:
        say(json.dumps(got))
        return EXIT_OK
    if not got:
        say(f"project {a.project!r}: no alert has fired" + ("" if store.alert_rules(a.project) else
                                                          " (no alert rule: monitor alert add)"))
    for e in got:
        rate = "" if e["rate"] is None else f"  {e['rate']:.1%} [{e['low']:.1%}, {e['high']:.1%}] n={e['n']}"
        acked = f"  acked by {e['acked_by']}" if e["acked_by"] else ""
        say(f"#{e['id']}  {e['alert']}: {e['condition']}  fired {e['fired_at']}  "
            f"{'resolved ' + e['resolved_at'] if e['resolved_at'] else 'open'}{rate}  delivery: {e['delivery']}{acked}")
        say(f"    {e['text']}")
        if e["delivery_error"]:
            say(f"    delivery: {e['delivery_error']}")
    return EXIT_OK


def _test(a, store) -> int:
    from evaluators.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE
    from evaluators.monitor.alerting import payload, send
    from evaluators.read.monitor_alerts import condition
    from evaluators.store.schema import utcnow

    rule = store.alert_rule(a.project, a.name)
    if rule is None:
        say(f"error: project {a.project!r} has no alert rule {a.name!r} (monitor alert add)", file=sys.stderr)
        return EXIT_USAGE
    if not rule["webhook_url"]:
        say(f"error: alert rule {a.name!r} has no webhook (monitor alert add ... --webhook URL --secret-env VAR)",
            file=sys.stderr)
        return EXIT_USAGE
    sample = {"id": None, "fired_at": utcnow().replace(microsecond=0), "rate": None, "low": None, "high": None,
              "n": None, "text": f"test alert of {a.name}: {condition(rule)} (a sample, nothing fired)"}
    status, error = send(rule, payload(sample, rule, test=True))
    if status != "delivered":
        say(f"error: the sample alert was not delivered: {error}", file=sys.stderr)
        return EXIT_ERROR
    say(f"sample alert delivered to {urllib.parse.urlsplit(rule['webhook_url']).hostname}, signed (X-Signature)")
    return EXIT_OK
