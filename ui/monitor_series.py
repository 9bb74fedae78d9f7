"""The Monitoring page's rates over time (issue 32's first part): a rule's metric per window with its 95% Wilson
interval as a band, the number judged under every point, windows under min n hollow (evaluators.read.monitor_series)."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from evaluators.read.monitor_series import MIN_N, WINDOWS, scope_note, series_chart
from ui import auth, loaders_monitor, monitor_review, monitor_traffic, state
from ui.widgets import table

RANGES = {"last 6 hours": 6 * 3600, "last 24 hours": 86_400, "last 7 days": 7 * 86_400, "last 30 days": 30 * 86_400,
          "last 90 days": 90 * 86_400}


def rates(project: str, rules: list[dict]):
    """Pickers (in the URL) for a rule's metric, the range, the window and min n, and the slice of traffic; then the
    traffic per window, the rule's rate with its intervals, its reviews, and two periods compared. Returns the slice
    (the trace list below keeps to it)."""
    options = [f"{r['name']} · {m}" for r in rules for m in r["metrics"]]
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    picked = c1.selectbox("Rule · metric", options, key="series", bind=state.URL) if options else None
    span = c2.selectbox("Range", list(RANGES), index=1, key="series_range", bind=state.URL)
    window = c3.selectbox("Window", list(WINDOWS), index=2, key="window", bind=state.URL)
    min_n = int(c4.number_input("Min n", min_value=1, max_value=100_000, value=MIN_N, key="min_n", bind=state.URL))
    width = WINDOWS[window]
    now = int(dt.datetime.now(dt.timezone.utc).timestamp())
    until = (now // width + 1) * width  # the current window's end: a minute's reruns share one cached read
    since_ns, until_ns = (until - RANGES[span]) * 10**9, until * 10**9
    where = monitor_traffic.slice_picker(project, since_ns, until_ns)
    name, metric = picked.split(" · ", 1) if picked else (None, None)
    monitor_traffic.traffic(project, name, since_ns, until_ns, width, window, where)
    if picked is None:
        st.caption("A rule's judged traces show here as rates over time.")
        return where
    rule = next(r for r in rules if r["name"] == name)
    try:
        # None: every version of the rule, each change marked where the next version starts judging
        series = loaders_monitor.rate_series(project, rule["name"], None, metric, since_ns, until_ns, width, min_n,
                                             where)
    except ValueError as e:
        st.warning(str(e))
        return where
    rate_chart(series, rule, metric, window, min_n)
    reviewed_windows(series, loaders_monitor.reviewed_series(project, rule["name"], metric, since_ns, until_ns, width))
    with st.expander("Review a sample of production", icon=":material/rate_review:"):
        monitor_review.review_sample(project, rule["name"], metric, since_ns, until_ns, width)
    periods(project, rule, metric, until, since_ns, until_ns, where)
    return where


def rate_chart(series: dict, rule: dict, metric: str, window: str, min_n: int) -> None:
    """The rate per window with its band, counts, hollow points under min n and the rule's changes, then in words."""
    judged = sum(p["n"] for p in series["points"])
    st.vega_lite_chart(series_chart(series, f"{metric}: {series['measure']} per {window} "
                                            f"(rule {rule['name']!r}, now version {rule['version']})"),
                       width="stretch")
    st.caption(f"{judged:,} judged traces in the range, at the metric's default threshold "
               f"({series['threshold']:g}); the band is each window's 95% Wilson interval, the number under a point "
               f"how many it judged; a hollow point has fewer than {min_n}, a gap none; a dashed line marks where another "
               f"version of the rule starts judging, with what it changed.")
    if scope_note(series):
        st.caption(f"Note: {scope_note(series)}.")


def periods(project: str, rule: dict, metric: str, until: int, since_ns: int, until_ns: int, where) -> None:
    """This week against last, and a deploy against the time before it, each on demand (a second read)."""
    # on demand (a second read of two weeks: the page's first open stays within its target on a million traces)
    if st.toggle("Compare this week with last", key="weeks", bind=state.URL):
        week = 7 * 86_400 * 10**9  # this week (the last 7 days, to the current window's end) against the 7 before
        got = loaders_monitor.compare_periods(project, rule["name"], metric,
                                              (until * 10**9 - 2 * week, until * 10**9 - week),
                                              (until * 10**9 - week, until * 10**9), where=where)
        st.text(f"This week against last: {got['sentence']}")
    if st.toggle("Compare before and after a deploy", key="deploys", bind=state.URL):
        monitor_traffic.deploy(project, rule, metric, since_ns, until_ns, where)


def reviewed_windows(series: dict, reviewed: dict) -> None:
    """Each window people reviewed: the judge's rate beside the rate corrected by their reviews (prediction-powered
    inference, with its 95% interval) and how far the judge agrees with them (Cohen's κ with its interval)."""
    if not reviewed:
        st.caption("No window has reviewed traces yet: review a sample below to see each window's rate corrected by "
                   "people's verdicts and how far the judge agrees with them.")
        return
    judged = {p["start_ns"]: p for p in series["points"]}

    def pct(v, lo=None, hi=None):
        return "–" if v is None else f"{v:.1%}" + ("" if lo is None else f" [{lo:.1%}, {hi:.1%}]")

    lines = []
    for start, r in sorted(reviewed.items()):
        p = judged.get(start, {})
        k = "–" if r["kappa"] is None else f"{r['kappa']:.2f}" + (
            " (one side gave one verdict: no interval)" if r.get("one_verdict") else
            "" if r["kappa_low"] is None else f" [{r['kappa_low']:.2f}, {r['kappa_high']:.2f}]")
        lines.append({"window": dt.datetime.fromtimestamp(start // 10**9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                      "judged": p.get("n", 0), f"judge's {series['measure']}": pct(p.get("rate"), p.get("low"), p.get("high")),
                      "reviewed": r["reviews"], f"{series['measure']} corrected by reviews": pct(r["corrected"], r["low"], r["high"]),
                      "agreement κ": k})
    st.markdown("**Windows people reviewed**")
    table(pd.DataFrame(lines))
    st.caption("The corrected rate is the judge's rate over every judged trace of the window, moved by how far the "
               "judge and the reviewers differ on the traces drawn at random for review (prediction-powered "
               "inference); its interval says how sure that is. κ: 1 is full agreement, 0 no better than chance.")


def alerts_panel(project: str, history: list[dict] | None = None) -> None:
    """The project's alerts (``ui.loaders_monitor.alert_history``, newest first): when each fired and resolved (event
    time), the rate with its 95% interval, n, the delivery, who acknowledged it; an open one acknowledged here. Rule
    names and texts are shown as text (table cells, ``st.text``), never as Markdown. None: no alert rules yet."""
    if history is None:
        st.caption("No alert rule yet: python -m evaluators monitor alert add (docs: Alerts) makes one; the alerts it "
                   "raises show here.")
        return
    if not history:
        st.caption("No alert has fired.")
        return

    def pct(e):
        return "–" if e["rate"] is None else f"{e['rate']:.1%} [{e['low']:.1%}, {e['high']:.1%}]"

    table(pd.DataFrame([{"id": e["id"], "alert": e["alert"], "condition": e["condition"], "fired": e["fired_at"],
                         "resolved": e["resolved_at"] or "open", "rate [95% interval]": pct(e), "n": e["n"],
                         "delivery": e["delivery"], "acknowledged by": e["acked_by"]} for e in history]))
    for e in history[:3]:
        st.text(f"#{e['id']} {e['text']}" + (f"  (delivery: {e['delivery_error']})" if e["delivery_error"] else ""))
    waiting = [e for e in history if not e["acked_by"]]
    if not waiting:
        return
    c1, c2, c3 = st.columns([2, 2, 1], vertical_alignment="bottom")
    picked = c1.selectbox("Alert", [e["id"] for e in waiting], key="alert_ack", format_func=lambda i: next(
        f"#{e['id']} {e['alert']}, fired {e['fired_at']}" for e in waiting if e["id"] == i))
    by = c2.text_input("Acknowledged by", value=auth.current_user() or "", key="alert_ack_by")
    if c3.button("Acknowledge", key="alert_ack_go"):
        if not by.strip():
            st.warning("Say who acknowledges it.")
        elif loaders_monitor.ack_alert(project, picked, by):
            st.rerun()
