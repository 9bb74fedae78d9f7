"""The Monitoring page's cached reads over time (issue 32), beside ui/loaders.py (which is at its size limit): a
rule's rates, two periods compared, the review-corrected windows, traffic per window, the slice pickers' values and
the deploys, each read again every 30 s (a slice travels as (model, service, version): a cache key); and the
project's alert history (evaluators.read.monitor_alerts.history), read again every 5 s, and an alert acknowledged."""
from __future__ import annotations

import streamlit as st

from evaluators.read.monitor_traffic import Slice
from ui.loaders import store


@st.cache_data(ttl=30, show_spinner=False, max_entries=32)
def _rate_series(url: str, project: str, rule: str, version: int, metric: str, since_ns: int, until_ns: int,
                 window_s: int, min_n: int, where: tuple) -> dict:
    from evaluators.read.monitor_series import rate_series as series

    return series(store(), project, rule, version, metric, since_ns, until_ns, window_s, min_n, Slice(*where))


def rate_series(project: str, rule: str, version: int, metric: str, since_ns: int, until_ns: int, window_s: int,
                min_n: int, where: Slice = Slice()) -> dict:
    """A rule's metric per window (``evaluators.read.monitor_series.rate_series``)."""
    return _rate_series(store().url, project, rule, version, metric, since_ns, until_ns, window_s, min_n,
                        (where.model, where.service, where.version))


@st.cache_data(ttl=30, show_spinner=False, max_entries=16)
def _compare_periods(url: str, project: str, rule: str, metric: str, before: tuple, after: tuple, labels: tuple,
                     where: tuple) -> dict:
    from evaluators.read.monitor_series import compare_periods as compare

    return compare(store(), project, rule, metric, before, after, labels, Slice(*where))


def compare_periods(project: str, rule: str, metric: str, before: tuple, after: tuple,
                    labels: tuple = ("last week", "this week"), where: Slice = Slice()) -> dict:
    """A rule's metric in two periods compared (``evaluators.read.monitor_series.compare_periods``)."""
    return _compare_periods(store().url, project, rule, metric, before, after, labels,
                            (where.model, where.service, where.version))


@st.cache_data(ttl=30, show_spinner=False, max_entries=16)
def _reviewed_series(url: str, project: str, rule: str, metric: str, since_ns: int, until_ns: int, window_s: int) -> dict:
    from evaluators.read.monitor_reviewed import reviewed_series as reviewed
    return reviewed(store(), project, rule, metric, since_ns, until_ns, window_s)


def reviewed_series(project: str, rule: str, metric: str, since_ns: int, until_ns: int, window_s: int) -> dict:
    """Per reviewed window, agreement and the review-corrected rate (``evaluators.read.monitor_reviewed``)."""
    return _reviewed_series(store().url, project, rule, metric, since_ns, until_ns, window_s)


@st.cache_data(ttl=30, show_spinner=False, max_entries=32)
def _traffic_series(url: str, project: str, since_ns: int, until_ns: int, window_s: int, rule: str | None,
                    where: tuple) -> list:
    from evaluators.read.monitor_traffic import traffic_series

    return traffic_series(store(), project, since_ns, until_ns, window_s, rule, Slice(*where))


def traffic_series(project: str, since_ns: int, until_ns: int, window_s: int, rule: str | None,
                   where: Slice = Slice()) -> list[dict]:
    """Traces, errors, latency, tokens and a rule's decisions per window (``evaluators.read.monitor_traffic``)."""
    return _traffic_series(store().url, project, since_ns, until_ns, window_s, rule,
                           (where.model, where.service, where.version))


@st.cache_data(ttl=30, show_spinner=False, max_entries=16)
def _slice_values(url: str, project: str, since_ns: int, until_ns: int) -> dict:
    from evaluators.read.monitor_traffic import slice_values as values

    return values(store(), project, since_ns, until_ns)


def slice_values(project: str, since_ns: int, until_ns: int) -> dict[str, list[str]]:
    """The models, services and versions the range's traces carry (the slice pickers' options)."""
    return _slice_values(store().url, project, since_ns, until_ns)


@st.cache_data(ttl=30, show_spinner=False, max_entries=16)
def _deploys(url: str, project: str, since_ns: int, until_ns: int, where: tuple) -> list:
    from evaluators.read.monitor_traffic import deploys as found

    return found(store(), project, since_ns, until_ns, Slice(*where))


def deploys(project: str, since_ns: int, until_ns: int, where: Slice = Slice()) -> list[dict]:
    """Each service.version of the range in the order it first appears (``evaluators.read.monitor_traffic``)."""
    return _deploys(store().url, project, since_ns, until_ns, (where.model, where.service, where.version))


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
