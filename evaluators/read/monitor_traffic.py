"""The Monitoring page's traffic over time (issue 32): per window of the traces' own start times, how many traces
arrived, how many a rule judged (and each of its other decisions), their mean latency and tokens, and errors;
the slice of traffic a team looks at (a model, a service, a deployed version) applied to every figure of the page;
and the deploys a change of ``service.version`` marks, for comparing before with after.

Every figure is one GROUP BY in the database over the traces of the range (their facts' columns: the mapped row's
model, service, latency, tokens, error and the resource's ``service.version``, on one index by start time:
migration 0011), never a pass over rows in Python. A window with no trace is absent from the database's answer and reported as 0 traces with no mean
(not a mean of 0): a gap, not a dip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, literal, select

from evaluators.store.monitor_rules import DECISIONS, MonitorDecisionRow
from evaluators.store.traces import MonitorTraceRow

MAX_WINDOWS = 2_000
MAX_VALUES = 50  # distinct models, services or versions a picker offers (the most frequent)


@dataclass(frozen=True)
class Slice:
    """The traffic a page looks at: traces whose facts say this model, this service, this ``service.version``
    (None: any)."""

    model: str | None = None
    service: str | None = None
    version: str | None = None

    def conditions(self, t=MonitorTraceRow) -> list:
        """SQL conditions on ``monitor_traces`` (its ``facts``) for this slice."""
        return [column == value for value, column in ((self.model, t.model), (self.service, t.service),
                                                      (self.version, t.service_version)) if value is not None]

    def said(self) -> str:
        """The slice in words ("" for all traffic)."""
        parts = [f"{k} {v}" for k, v in (("model", self.model), ("service", self.service),
                                          ("version", self.version)) if v is not None]
        return ", ".join(parts)


def traffic_series(store, project: str, since_ns: int, until_ns: int, window_s: int, rule: str | None = None,
                   where: Slice = Slice()) -> list[dict[str, Any]]:
    """Per window of ``window_s`` seconds in [since_ns, until_ns): ``start_ns``, ``traces``, ``errors``,
    ``latency_ms`` (mean of the traces that report one, None where none does), ``tokens`` (sum), ``tokens_mean``
    and, with ``rule``, ``decisions``: each decision of that rule (every version) -> traces."""
    width = window_s * 1_000_000_000
    if window_s <= 0 or until_ns <= since_ns:
        raise ValueError("a series needs a window over 0 s and a range that ends after it starts")
    if (until_ns - since_ns) // width > MAX_WINDOWS:
        raise ValueError(f"the range holds more than {MAX_WINDOWS:,} windows of {window_s} s: choose a wider window")
    t, d = MonitorTraceRow, MonitorDecisionRow
    window = ((t.start_ns - literal(since_ns)) // literal(width)).label("w")
    scope = [t.project == project, t.start_ns >= since_ns, t.start_ns < until_ns, t.kind == "trace", *where.conditions()]
    latency, tokens = t.latency_ms, t.tokens
    traffic = (select(window, func.count(), func.sum(case((t.error.is_(True), 1), else_=0)),
                      func.avg(latency), func.count(latency), func.sum(tokens), func.count(tokens))
               .where(*scope).group_by(window))
    out = {w: {"start_ns": since_ns + w * width, "traces": 0, "errors": 0, "latency_ms": None, "tokens": 0,
               "tokens_mean": None, **({"decisions": {k: 0 for k in DECISIONS}} if rule else {})}
           for w in range(-(-(until_ns - since_ns) // width))}
    with store.session() as s:
        for w, n, errors, lat, n_lat, tok, n_tok in s.execute(traffic):
            p = out[int(w)]
            p.update(traces=int(n), errors=int(errors or 0), latency_ms=float(lat) if n_lat else None,
                     tokens=int(tok or 0), tokens_mean=float(tok) / n_tok if n_tok else None)
        if rule:  # each decision of every version, by its trace's start as the decision keeps it (migration 0011)
            d_window = ((d.start_ns - literal(since_ns)) // literal(width)).label("w")
            q = (select(d_window, d.decision, func.count()).select_from(d)
                 .where(d.project == project, d.rule == rule, d.start_ns >= since_ns, d.start_ns < until_ns)
                 .group_by(d_window, d.decision))
            if where.conditions():  # a slice: the traces' own columns say which decisions are in it
                q = q.join(t, (t.project == d.project) & (t.trace_id == d.trace_id)).where(*where.conditions())
            for w, decision, n in s.execute(q):
                out[int(w)]["decisions"][decision] = out[int(w)]["decisions"].get(decision, 0) + int(n)
    return [out[w] for w in sorted(out)]


def slice_values(store, project: str, since_ns: int, until_ns: int) -> dict[str, list[str]]:
    """The models, services and versions the range's traces carry, the most frequent first (at most
    :data:`MAX_VALUES` each): what the page's slice pickers offer."""
    t = MonitorTraceRow
    out = {}
    with store.session() as s:
        for name, value in (("model", t.model), ("service", t.service), ("version", t.service_version)):
            q = (select(value, func.count()).where(t.project == project, t.start_ns >= since_ns, t.start_ns < until_ns,
                                                   value.is_not(None))
                 .group_by(value).order_by(func.count().desc(), value).limit(MAX_VALUES))
            out[name] = [str(v) for v, _ in s.execute(q)]
    return out


def deploys(store, project: str, since_ns: int, until_ns: int, where: Slice = Slice()) -> list[dict[str, Any]]:
    """The ``service.version`` values of the range's traces in the order they first appear: ``version``,
    ``first_ns``, ``last_ns``, ``traces``. A version first seen after another marks a deploy at its ``first_ns``."""
    t = MonitorTraceRow
    version = t.service_version
    q = (select(version, func.min(t.start_ns), func.max(t.start_ns), func.count())
         .where(t.project == project, t.start_ns >= since_ns, t.start_ns < until_ns, version.is_not(None),
                *Slice(where.model, where.service).conditions())
         .group_by(version).order_by(func.min(t.start_ns)))
    with store.session() as s:
        return [{"version": str(v), "first_ns": int(a), "last_ns": int(b), "traces": int(n)} for v, a, b, n in s.execute(q)]


def around_deploy(found: list[dict[str, Any]], version: str, until_ns: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two periods a deploy of ``version`` splits: (before, after), each as long as the shorter of the time
    since the deploy (to ``until_ns``) and the time since the version before it first appeared."""
    k = next(i for i, d in enumerate(found) if d["version"] == version)
    if k == 0:
        raise ValueError(f"version {version} is the first one seen in the range: there is no before to compare with")
    at, prev = found[k]["first_ns"], found[k - 1]["first_ns"]
    span = min(until_ns - at, at - prev)
    return (at - span, at), (at, at + span)


def window_start(start_ns: int) -> str:
    """A window's start (ns since the epoch) as the charts' ISO time, UTC (exact to the microsecond)."""
    import datetime as dt

    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=start_ns // 1000)).isoformat()


def traffic_chart(points: list[dict[str, Any]], title: str) -> dict:
    """A Vega-Lite chart of :func:`traffic_series`: traces per window as bars (judged ones darker, with a rule),
    each bar a point a click picks (the selection ``pick``, by ``start_ns``: the page opens that window's traces)."""
    values = [{"start": window_start(p["start_ns"]),
               "start_ns": p["start_ns"], "traces": p["traces"], "errors": p["errors"],
               "judged": (p.get("decisions") or {}).get("judged")} for p in points]
    x = {"field": "start", "type": "temporal", "title": "window (UTC)"}
    tip = [{"field": "start", "type": "temporal", "title": "window", "format": "%Y-%m-%d %H:%M"},
           {"field": "traces", "type": "quantitative", "title": "traces"},
           {"field": "judged", "type": "quantitative", "title": "judged"},
           {"field": "errors", "type": "quantitative", "title": "errors"}]
    layers = [{"params": [{"name": "pick", "select": {"type": "point", "fields": ["start_ns"]}}],
               "mark": {"type": "bar", "color": "#9ecae9", "cursor": "pointer"},
               "encoding": {"x": x, "y": {"field": "traces", "type": "quantitative", "title": "traces"},
                            "tooltip": tip,
                            "opacity": {"condition": {"param": "pick", "empty": True, "value": 1}, "value": 0.4}}}]
    if any(v["judged"] is not None for v in values):
        layers.append({"mark": {"type": "bar", "color": "#4c78a8"},
                       "encoding": {"x": x, "y": {"field": "judged", "type": "quantitative"}, "tooltip": tip}})
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": title, "width": "container",
            "height": 160, "data": {"values": values}, "layer": layers}


def usage_chart(points: list[dict[str, Any]]) -> dict:
    """Mean latency (ms) and mean tokens a trace per window, one line each on its own axis; a window with no trace
    leaves a gap."""
    values = [{"start": window_start(p["start_ns"]),
               "latency_ms": p["latency_ms"], "tokens_mean": p["tokens_mean"]} for p in points]
    x = {"field": "start", "type": "temporal", "title": "window (UTC)"}

    def line(field: str, title: str, color: str) -> dict:
        return {"mark": {"type": "line", "point": True, "color": color},
                "encoding": {"x": x, "y": {"field": field, "type": "quantitative", "title": title,
                                           "axis": {"titleColor": color}},
                             "tooltip": [{"field": field, "type": "quantitative", "title": title, "format": ",.0f"}]}}
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": "container", "height": 140,
            "data": {"values": values}, "layer": [line("latency_ms", "mean latency (ms)", "#f58518"),
                                                   line("tokens_mean", "mean tokens a trace", "#54a24b")],
            "resolve": {"scale": {"y": "independent"}}}
