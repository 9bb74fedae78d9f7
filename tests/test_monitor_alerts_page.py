"""The Monitoring page's alerts panel (issue 32): the project's alert history as a table (fired, resolved, rate with
its interval, n, delivery, who acknowledged it), an alert's text shown as text, and an open alert acknowledged from
the page, stored with who did it. Expected values are what the test planted."""
from __future__ import annotations

import datetime as dt

import pytest

import streamlit as st

from tests.apptest import app, as_read, shown_text

pytestmark = [pytest.mark.usefixtures("fresh_caches"), pytest.mark.both_stores]
PAGE = "pages/monitoring.py"
T0 = 1_764_000_000 * 10**9  # 2025-11-24 16:00 UTC


def test_the_panel_shows_the_history_and_acknowledges_an_alert(home_store):
    home_store.ensure_monitor_project("shop")
    at = app(PAGE, project="shop")
    assert "No alert rule yet" in shown_text(at)
    rid = home_store.save_alert_rule("shop", "low *quality*", "rate_above", 0.02, metric="coherence", rule="quality")
    st.cache_data.clear()  # (the page reads the history again every 5 s; the test does not wait)
    at = app(PAGE, project="shop")
    assert "No alert has fired." in shown_text(at)
    old = home_store.add_alert_event(rid, fired_ns=T0, fired_at=dt.datetime(2025, 11, 24, 16), resolved_ns=T0 + 60,
                                     resolved_at=dt.datetime(2025, 11, 24, 17), rate=0.061, low=0.039, high=0.094,
                                     n=420, text="[link](http://evil.example) rate", delivery="delivered")
    new = home_store.add_alert_event(rid, fired_ns=T0 + 10**12, fired_at=dt.datetime(2025, 11, 24, 16, 16, 40),
                                     rate=0.1, low=0.05, high=0.2, n=40, text="second", delivery="failed",
                                     delivery_error="gave up after 5 attempts to hooks.example: HTTP 500")
    home_store.ack_alert("shop", old, "ann")
    st.cache_data.clear()
    at = app(PAGE, project="shop")
    [frame] = [d.value for d in at.dataframe if "acknowledged by" in d.value.columns]
    assert frame[["id", "fired", "resolved", "rate [95% interval]", "n", "delivery", "acknowledged by"]].astype(
        str).values.tolist() == [
        [str(new), "2025-11-24T16:16:40Z", "open", "10.0% [5.0%, 20.0%]", "40", "failed", "–"],
        [str(old), "2025-11-24T16:00:00Z", "2025-11-24T17:00:00Z", "6.1% [3.9%, 9.4%]", "420", "delivered", "ann"]]
    assert frame["alert"].tolist() == ["low *quality*"] * 2  # the rule's name as typed, a cell's text
    texts = [t.value for t in at.text]
    assert f"#{old} [link](http://evil.example) rate" in texts  # shown as text, not a link
    assert f"#{new} second  (delivery: gave up after 5 attempts to hooks.example: HTTP 500)" in texts
    assert not any("evil.example" in as_read(m.value) for m in at.markdown)
    assert at.selectbox(key="alert_ack").options == [f"#{new} low *quality*, fired 2025-11-24T16:16:40Z"]
    at.text_input(key="alert_ack_by").input("bob")
    next(b for b in at.button if b.label == "Acknowledge").click()
    at.run()
    acked = {e["id"]: e["acked_by"] for e in home_store.alert_events("shop")}
    assert acked == {old: "ann", new: "bob"}
    [frame] = [d.value for d in at.dataframe if "acknowledged by" in d.value.columns]
    assert frame["acknowledged by"].tolist() == ["bob", "ann"]  # shown at once (the cached history dropped)
    assert not [s for s in at.selectbox if s.key == "alert_ack"]  # none left to acknowledge
