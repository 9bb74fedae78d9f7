"""A project's alerts as people read them (``monitor alerts``, the Monitoring page's alerts panel): each alert with its
rule's condition in words, its times in event time, the rate with its 95% interval and n, its delivery and who
acknowledged it (evaluators.store.monitor_alerts; raised by evaluators.monitor.alerting)."""
from __future__ import annotations


def condition(rule: dict) -> str:
    """An alert rule's condition in words, e.g. ``coherence rate above 2% (rule 'quality', min n 30)``."""
    if rule["kind"] == "no_traffic_minutes":
        return f"no trace for {rule['threshold']:g} minutes"
    if rule["kind"] == "judged_share_below":
        return f"judged share of rule {rule['rule']!r} below {100 * rule['threshold']:g}% (min n {rule['min_n']})"
    return (f"{rule['metric']} rate {rule['kind'].split('_')[1]} {100 * rule['threshold']:g}% (rule {rule['rule']!r}, "
            f"min n {rule['min_n']})")


def history(store, project: str) -> list[dict]:
    """The project's alerts as ``monitor alerts`` and the Monitoring page show them, newest first."""
    rules = {r["name"]: r for r in store.alert_rules(project)}

    def iso(t):
        return None if t is None else t.isoformat() + "Z"

    return [{"id": e["id"], "alert": e["rule"], "metric": e["metric"], "condition": condition(rules[e["rule"]]),
             "fired_at": iso(e["fired_at"]), "resolved_at": iso(e["resolved_at"]), "rate": e["rate"], "low": e["low"],
             "high": e["high"], "n": e["n"], "delivery": e["delivery"], "delivery_error": e["delivery_error"],
             "acked_by": e["acked_by"], "acked_at": iso(e["acked_at"]), "text": e["text"]}
            for e in store.alert_events(project)]
