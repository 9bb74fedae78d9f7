"""Evaluating a project's alert rules after each round of its monitor rules (issue 32), and delivering what fired.

A rate rule (``rate_above`` / ``rate_below``) feeds the scores judged since its last round, in event time (each
trace's first span's start), to :func:`evaluators.monitor.alerts.scan` with the :class:`~evaluators.monitor.alerts.State`
it carried, and records each alert it raised or resolved at the time of the trace that did it. Which scores are new
is read by the time they were decided, with an overlap of :data:`OVERLAP` (a batch another process committed a little
late is still read; the traces already counted in the overlap are skipped by id). A batch whose traces started before
the newest already counted (a late batch) is put where it belongs: the rule's whole stream is scanned again in event
time from a fresh state, its alerts matched with the stored ones by the time they fired (kept, with their delivery
and acknowledgement; new ones added and delivered; one the late traces took away closed where it began, marked
withdrawn). That rescan reads every score the rule has judged since the alert rule was made, so it costs one read
and one scan of them; it happens only when a batch comes late.

``judged_share_below`` (judged / sampled, over the traces that started in the last hour) and ``no_traffic_minutes``
(no trace started for that long) are counted from the store each round, at the round's time.

A new alert is delivered to the rule's webhook (:func:`evaluators.monitor.webhooks.deliver`), signed with the secret in
the variable the rule names, read from this process's environment at delivery; a variable not set here fails the
delivery with that said (an alert is never sent unsigned, nor the secret stored or said).
"""
from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from evaluators.core.registry import get_metric
from evaluators.core.scales import reports_defects
from evaluators.core.stats import wilson
from evaluators.monitor import alerts, webhooks
from evaluators.store.monitor_alerts import ns_time

OVERLAP = dt.timedelta(seconds=60)
LEASE = dt.timedelta(minutes=5)  # a process holding an alert rule this long has died (an evaluation takes seconds)
SHARE_WINDOW_NS = 3600 * 10**9
NOT_COUNTED = ("filtered_out", "sampled_out", "pending")  # decisions not in a judged share's denominator


def evaluate_alerts(store, project: str, *, environ: Mapping[str, str] = os.environ,
                    deliver: Callable[..., webhooks.Delivery] = webhooks.deliver,
                    now_ns: int | None = None) -> list[dict[str, Any]]:
    """Each alert rule of the project, once. Returns the alerts fired or resolved (the events' rows, as
    ``alert_events`` gives them, with ``change``: "fired" or "resolved")."""
    now_ns = now_ns if now_ns is not None else time.time_ns()
    changed: list[tuple[int, str]] = []
    for listed in store.alert_rules(project):
        rule = store.hold_alert_rule(listed["id"], LEASE)  # (its state as it is now, held by this process)
        if rule is None:
            continue  # another process is evaluating it this moment: the scores it has not read are read next round
        try:
            if rule["kind"] in ("rate_above", "rate_below"):
                changed += _rate_rule(store, rule)
            elif rule["kind"] == "judged_share_below":
                changed += _share_rule(store, rule, now_ns)
            else:
                changed += _traffic_rule(store, rule, now_ns)
        finally:
            store.release_alert_rule(rule["id"])
    events = {e["id"]: e for e in store.alert_events(project)}
    for event_id, change in changed:
        if change == "fired":
            _deliver(store, events[event_id], store.alert_rule(project, events[event_id]["rule"]), environ, deliver)
    events = {e["id"]: e for e in store.alert_events(project)}
    return [{**events[i], "change": c} for i, c in changed]


def measure(rule: dict[str, Any]) -> tuple[str, Callable[[float], bool]]:
    """The rule's rate's name ("defect rate" or "pass rate", as the series') and whether a value is in that rate."""
    spec = get_metric(rule["metric"])
    thr, defect = spec.default_threshold, reports_defects(spec)

    def counted(v: float) -> bool:
        passed = v >= thr if spec.higher_is_better else v <= thr
        return passed != defect

    return ("defect rate" if defect else "pass rate"), counted


def _rate_rule(store, rule: dict[str, Any]) -> list[tuple[int, str]]:
    st = dict(rule["state"] or {})
    cursor = dt.datetime.fromisoformat(st["cursor"]) if st.get("cursor") else None
    got = store.judged_scores(rule["project"], rule["rule"], rule["metric"],
                              rule["created_at"] if cursor is None else cursor - OVERLAP)
    seen = set(st.get("seen") or ())
    new = [g for g in got if g["trace_id"] not in seen]
    if not new:
        return []
    newest = max(g["decided_at"] for g in got)
    late = st.get("last_ns") is not None and new[0]["start_ns"] < st["last_ns"]
    stream = store.judged_scores(rule["project"], rule["rule"], rule["metric"], rule["created_at"]) if late else new
    rate_name, counted = measure(rule)
    above = rule["kind"] == "rate_above"
    times = [g["start_ns"] for g in stream]
    bad = np.array([counted(g["value"]) == above for g in stream], dtype=bool)
    bound = rule["threshold"] if above else 1.0 - rule["threshold"]
    carried = None if late or not st.get("n") else alerts.State(
        s=np.array([st["s"]]), n=np.array([st["n"]]), run_n=np.array([st["run_n"]]), run_k=np.array([st["run_k"]]),
        firing=np.array([st["firing"]]))
    state, events = alerts.scan(bad, bound, min_n=rule["min_n"], state=carried)
    run_start = None if late else st.get("run_start_ns")
    alerts_seen = []  # (fired_ns, resolved_ns, k counted in the rate, n, excursion's start)
    for e in events:
        first = e.index - e.run_n + 1
        start = times[first] if first >= 0 else run_start
        if e.kind == "fired":
            alerts_seen.append([times[e.index], None, e.run_k if above else e.run_n - e.run_k, e.run_n, start])
        elif alerts_seen:
            alerts_seen[-1][1] = times[e.index]
        else:
            alerts_seen.append([None, times[e.index], None, None, None])  # resolves the alert carried open
    final_n = int(state.run_n[0])
    st.update(s=float(state.s[0]), n=int(state.n[0]), run_n=final_n, run_k=int(state.run_k[0]),
              firing=bool(state.firing[0]), last_ns=max(times[-1], st.get("last_ns") or times[-1]),
              run_start_ns=None if final_n == 0 else (times[-final_n] if final_n <= len(times) else run_start),
              cursor=newest.isoformat(), seen=sorted(g["trace_id"] for g in got if g["decided_at"] >= newest - OVERLAP))
    changed = _record(store, rule, st, alerts_seen, rate_name, late, min(g["start_ns"] for g in new))
    store.save_alert_state(rule["id"], st)
    return changed


def _record(store, rule, st: dict, seen: list, rate_name: str, late: bool, late_ns: int) -> list[tuple[int, str]]:
    """Write the alerts a scan raised (``seen``: [fired_ns, resolved_ns, k, n, since_ns]); a rescan's matched with
    the stored ones by their fired time. Sets ``st["open_id"]``."""
    changed = []
    stored = {e["fired_ns"]: e for e in store.alert_events(rule["project"], rule["id"])} if late else {}
    for fired, resolved, k, n, since in seen:
        if fired is None:  # the alert carried open resolved
            if st.get("open_id") is not None:
                store.update_alert_event(st["open_id"], resolved_ns=resolved, resolved_at=ns_time(resolved))
                changed.append((st["open_id"], "resolved"))
            st["open_id"] = None
            continue
        p, lo, hi = wilson(k, n)
        values = {"fired_ns": fired, "fired_at": ns_time(fired), "resolved_ns": resolved,
                  "resolved_at": ns_time(resolved), "rate": p, "low": lo, "high": hi, "n": n,
                  "text": alerts.describe(rule["metric"], rate_name, rule["kind"].split("_")[1], rule["threshold"],
                                          k, n, f"{ns_time(since):%Y-%m-%d %H:%M} UTC")}
        old = stored.pop(fired, None)
        if old is not None:
            store.update_alert_event(old["id"], **values)
            event_id = old["id"]
            if resolved is not None and old["resolved_ns"] is None:
                changed.append((event_id, "resolved"))
        else:
            event_id = store.add_alert_event(rule["id"], delivery="sending", **values)
            changed.append((event_id, "fired"))
            if resolved is not None:
                changed.append((event_id, "resolved"))
        st["open_id"] = None if resolved is not None else event_id
    for old in stored.values():  # a rescan did not raise it again: the late traces took its evidence away
        if old["fired_ns"] >= late_ns and not old["text"].endswith("(withdrawn)"):
            store.update_alert_event(old["id"], resolved_ns=old["resolved_ns"] or old["fired_ns"],
                                     resolved_at=old["resolved_at"] or old["fired_at"],
                                     text=old["text"] + " (withdrawn)")
    return changed


def _share_rule(store, rule: dict[str, Any], now_ns: int) -> list[tuple[int, str]]:
    counts = store.decided_counts(rule["project"], rule["rule"], now_ns - SHARE_WINDOW_NS)
    sampled = sum(n for d, n in counts.items() if d not in NOT_COUNTED)
    judged = counts.get("judged", 0)
    if sampled < rule["min_n"]:
        return []
    p, lo, hi = wilson(judged, sampled)
    text = (f"rule {rule['rule']} judged share {100 * p:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] of the {sampled} "
            f"sampled traces of the last hour, below {100 * rule['threshold']:g}%")
    return _toggle(store, rule, p < rule["threshold"], now_ns, {"rate": p, "low": lo, "high": hi, "n": sampled,
                                                                "text": text})


def _traffic_rule(store, rule: dict[str, Any], now_ns: int) -> list[tuple[int, str]]:
    created = int((rule["created_at"] - dt.datetime(1970, 1, 1)).total_seconds() * 10**9)
    last = max(store.last_trace_start(rule["project"]) or 0, created)
    quiet_ns = int(rule["threshold"] * 60 * 10**9)
    st = rule["state"] or {}
    if st.get("open_id") is not None:
        return _toggle(store, rule, last <= st["quiet_since"], last, {})
    text = (f"no traffic: no trace of project {rule['project']} started in the {rule['threshold']:g} minutes since "
            f"{ns_time(last):%Y-%m-%d %H:%M} UTC")
    return _toggle(store, rule, now_ns - last >= quiet_ns, last + quiet_ns, {"text": text}, quiet_since=last)


def _toggle(store, rule, breached: bool, at_ns: int, values: dict, **keep) -> list[tuple[int, str]]:
    """A counted rule's alert opened (breached, none open) or resolved (not breached, one open) at ``at_ns``."""
    st = dict(rule["state"] or {})
    if breached and st.get("open_id") is None:
        st.update(open_id=store.add_alert_event(rule["id"], delivery="sending", fired_ns=at_ns,
                                                fired_at=ns_time(at_ns), **values), **keep)
        store.save_alert_state(rule["id"], st)
        return [(st["open_id"], "fired")]
    if not breached and st.get("open_id") is not None:
        event_id = st.pop("open_id")
        store.update_alert_event(event_id, resolved_ns=at_ns, resolved_at=ns_time(at_ns))
        store.save_alert_state(rule["id"], st)
        return [(event_id, "resolved")]
    return []


def payload(event: dict[str, Any], rule: dict[str, Any], test: bool = False) -> dict[str, Any]:
    """The JSON an alert's webhook gets (never the secret, nor its variable's name)."""
    def iso(t):
        return None if t is None else t.isoformat() + "Z"

    return {"project": rule["project"], "alert": rule["name"], "id": event.get("id"), "kind": rule["kind"],
            "metric": rule["metric"], "threshold": rule["threshold"], "fired_at": iso(event.get("fired_at")),
            "rate": event.get("rate"), "low": event.get("low"), "high": event.get("high"), "n": event.get("n"),
            "text": event["text"], "test": test}


def send(rule: dict[str, Any], body: dict[str, Any], environ: Mapping[str, str] = os.environ,
         deliver: Callable[..., webhooks.Delivery] = webhooks.deliver) -> tuple[str, str | None]:
    """Deliver ``body`` to the rule's webhook signed with its secret: (delivery status, error or None)."""
    if not rule["webhook_url"]:
        return "not configured", None
    secret = environ.get(rule["secret_env"] or "") if rule["secret_env"] else None
    if not secret:
        return "failed", (f"the webhook's secret variable {rule['secret_env'] or '(none named)'} is not set here: "
                          f"not sent (an alert is never sent unsigned)")
    try:
        d = deliver(rule["webhook_url"], body, secret)
    except ValueError as e:
        return "failed", str(e)
    return ("delivered", None) if d.delivered else ("failed", d.error)


def _deliver(store, event, rule, environ, deliver) -> None:
    status, error = send(rule, payload(event, rule), environ, deliver)
    store.update_alert_event(event["id"], delivery=status, delivery_error=error)
