"""The Monitoring page's cached reads of alerts (issue 32), beside ui/loaders.py (which is at its size limit): the
project's alert history (evaluators.read.monitor_alerts.history), read again every 5 s, and an alert acknowledged."""
from __future__ import annotations

import streamlit as st

from ui.loaders import store


@st.cache_data(ttl=5, show_spinner=False, max_entries=32)
def _alert_history(url: str, project: str) -> list[dict] | None:
    from evaluators.read.monitor_alerts import history

    s = store()
    return history(s, project) if s.alert_rules(project) else None


def alert_history(project: str) -> list[dict] | None:
    """The project's alerts, newest first; None when it has no alert rule (the panel then says how to add one)."""
    return _alert_history(store().url, project)


def ack_alert(project: str, event_id: int, by: str) -> bool:
    """Acknowledge one of the project's alerts as ``by``; the cached history dropped so it shows at once."""
    done = store().ack_alert(project, event_id, by)
    _alert_history.clear()
    return done
