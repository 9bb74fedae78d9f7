"""A rule's metric over time on the Monitoring page (issue 32): per window of event time (a trace's first span's
start), how many of its judged traces passed, with the 95% Wilson interval of ``core.stats.wilson``. Counted in the
database (one GROUP BY over the rule's judged decisions joined to their results); a window with no judged trace has
no point (never 0), one below ``min_n`` is marked ``few``. Over every version of a rule, a window where another
version's judgements start carries ``changes``: what that version changed (its judge's model, sample rate, ...)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, literal, select

from evaluators.core.registry import get_metric
from evaluators.core.scales import reports_defects
from evaluators.core.stats import wilson
from evaluators.read.monitor_traffic import Slice, window_start
from evaluators.store.monitor_rules import MonitorDecisionRow, MonitorRuleRow
from evaluators.store.schema import ResultRow
from evaluators.store.traces import MonitorTraceRow

WINDOWS = {"5 min": 300, "15 min": 900, "1 hour": 3600, "6 hours": 21_600, "1 day": 86_400}
MIN_N = 30
MAX_WINDOWS = 2_000  # a range cut into more windows than this is refused (its chart would be unreadable)


def rate_series(store, project: str, rule: str, version: int | None, metric: str, since_ns: int, until_ns: int,
                window_s: int, min_n: int = MIN_N, where: Slice = Slice()) -> dict[str, Any]:
    """The metric's rate per window in [since_ns, until_ns) (nanoseconds since the epoch).

    The rate is the defect rate (the share not passing) for a risk and safety metric, else the pass rate, at the
    metric's default threshold, over each window's judged traces (turn 0: a trace's row); ``version`` None: every
    version's judgements, each window's ``changes`` saying what a version first judging in it changed; ``where``:
    the slice of traffic (a model, a service, a version: :class:`evaluators.read.monitor_traffic.Slice`).
    Returns:
        ``measure`` ("pass rate" or "defect rate"), ``threshold``, and ``points``: per window, ``start_ns``, ``n``
        judged, ``k`` passed, ``rate``, ``low``, ``high`` (None where n is 0), ``few`` (n below ``min_n``) and
        ``changes`` (sentences, empty but where a version other than the last judged window's starts).
    """
    if window_s <= 0 or until_ns <= since_ns:
        raise ValueError("a series needs a window over 0 s and a range that ends after it starts")
    width = window_s * 1_000_000_000
    if (until_ns - since_ns) // width > MAX_WINDOWS:
        raise ValueError(f"the range holds more than {MAX_WINDOWS:,} windows of {window_s} s: choose a wider window")
    spec = get_metric(metric)
    thr = spec.default_threshold
    t, d, r = MonitorTraceRow, MonitorDecisionRow, ResultRow
    passed = r.value >= thr if spec.higher_is_better else r.value <= thr
    # whole windows (integer division) of the traces' start, which each decision keeps (migration 0011)
    window = ((d.start_ns - literal(since_ns)) // literal(width)).label("w")
    q = (select(window, d.rule_version, func.count(), func.sum(case((passed, 1), else_=0)))
         .select_from(d)
         .join(r, (r.run_id == d.run_id) & (r.row_idx == d.row_idx))
         .where(d.project == project, d.rule == rule, d.decision == "judged",
                r.metric == metric, r.turn == 0, r.status == "ok", r.value.is_not(None),
                d.start_ns >= since_ns, d.start_ns < until_ns)
         .group_by(window, d.rule_version))
    if where.conditions(t):  # a slice: the traces' own columns say which judged traces are in it
        q = q.join(t, (t.project == d.project) & (t.trace_id == d.trace_id)).where(*where.conditions(t))
    counts: dict[int, tuple[int, int]] = {}
    versions: dict[int, dict[int, tuple[int, int]]] = {}  # window -> version -> (n, k)
    with store.session() as s:
        settings = {row.version: row for row in s.scalars(select(MonitorRuleRow).where(  # each version's settings:
            MonitorRuleRow.project == project, MonitorRuleRow.name == rule))}  # its sample rate, what it changed
        # the versions named (an IN, not no condition): the decisions' index (project, rule, version, decision)
        # then finds the judged ones, not a scan of every trace in the range
        q = q.where(d.rule_version.in_(sorted(settings) if version is None else [version]))
        for w, v, n, k in s.execute(q):
            n0, k0 = counts.get(int(w), (0, 0))
            counts[int(w)] = (n0 + int(n), k0 + int(k or 0))
            versions.setdefault(int(w), {})[int(v)] = (int(n), int(k or 0))
        s.expunge_all()
    defect = reports_defects(spec)
    points, last = [], None
    for w in range(-(-(until_ns - since_ns) // width)):
        n, k = counts.get(w, (0, 0))
        p, low, high = wilson(n - k if defect else k, n)
        weighted = _weighted(versions.get(w, {}), settings, defect)
        if weighted is not None:  # sampled at different rates: the traffic's rate weighs each by 1 / its chance
            p, low, high = weighted
        changes = []
        for v in sorted(versions.get(w, ())):
            if last is not None and v != last:
                changes.append(version_change(settings.get(last), settings.get(v), last, v))
            last = v
        points.append({"start_ns": since_ns + w * width, "n": n, "k": k, "rate": p, "low": low, "high": high,
                       "few": n < min_n, "changes": changes, "weighted": weighted is not None})
    filters = sorted({settings[v].filter for vs in versions.values() for v in vs
                      if v in settings and settings[v].filter})
    return {"measure": "defect rate" if defect else "pass rate", "threshold": thr, "points": points,
            "filters": filters}


def scope_note(series: dict[str, Any]) -> str:
    """What a series' rates are rates of, said where it is not simply the traffic's: a rule's filter (the rate is
    the matching traces'), windows weighted for unequal sampling."""
    said = []
    if series.get("filters"):
        said.append("rates of the traces matching the rule's filter (" + "; ".join(series["filters"]) + "), not of all "
                    "traffic")
    if any(p.get("weighted") for p in series["points"]):
        said.append("windows judged at different sample rates are weighted by 1 / each trace's chance of being judged "
                    "(interval at the effective n)")
    return "; ".join(said)


def _weighted(by_version: dict[int, tuple[int, int]], settings: dict, defect: bool):
    """A window's rate over the whole traffic where its judged traces were sampled at different rates (versions of
    the rule with different sample rates): each judged trace weighs 1 / its version's sample rate (the chance it was
    judged), the interval Wilson's at Kish's effective n, (sum w)^2 / sum w^2. None where sampling was uniform."""
    rates = {v: settings[v].sample_rate for v in by_version if v in settings and settings[v].sample_rate > 0}
    if len(set(rates.values())) < 2 or len(rates) < len(by_version):
        return None
    w_n = sum(n / rates[v] for v, (n, _) in by_version.items())
    w_k = sum(((n - k) if defect else k) / rates[v] for v, (n, k) in by_version.items())
    w_sq = sum(n / rates[v] ** 2 for v, (n, _) in by_version.items())
    n_eff = w_n * w_n / w_sq
    _, low, high = wilson(w_k / w_n * n_eff, n_eff)
    return w_k / w_n, low, high


def compare_periods(store, project: str, rule: str, metric: str, before: tuple[int, int], after: tuple[int, int],
                    labels: tuple[str, str] = ("last week", "this week"), where: Slice = Slice()) -> dict[str, Any]:
    """The metric's rate (as :func:`rate_series`: every version of the rule) in two periods of event time, each
    [since_ns, until_ns), and how ``after``'s differs from ``before``'s: the difference with its 95% interval
    (Newcombe's, from the two Wilson intervals), the two-sided p-value of the two-proportion z-test, said in the
    Compare page's sentence (:func:`evaluators.read.paired.sentence`). Counted in the database, one GROUP BY."""
    import math

    from evaluators.core.inference import PairedDifference
    from evaluators.read.paired import sentence

    length = before[1] - before[0]
    if before[1] == after[0] and after[1] - after[0] == length and length % 1_000_000_000 == 0:
        # adjacent periods of one length (this week and the last): one read, two windows
        got = rate_series(store, project, rule, None, metric, before[0], after[1], length // 10**9, 1, where)["points"]
    else:
        got = []
        for since_ns, until_ns in (before, after):
            width_s = max(1, -(-(until_ns - since_ns) // 1_000_000_000))  # one window: the whole period
            got += rate_series(store, project, rule, None, metric, since_ns, since_ns + width_s * 10**9, width_s,
                               1, where)["points"]
    measure = "defect rate" if reports_defects(get_metric(metric)) else "pass rate"
    (a, b), d = got, None
    if a["n"] and b["n"]:
        diff = b["rate"] - a["rate"]
        low = diff - math.sqrt((b["rate"] - b["low"]) ** 2 + (a["high"] - a["rate"]) ** 2)
        high = diff + math.sqrt((b["high"] - b["rate"]) ** 2 + (a["rate"] - a["low"]) ** 2)
        pooled = (a["rate"] * a["n"] + b["rate"] * b["n"]) / (a["n"] + b["n"])
        se = math.sqrt(pooled * (1 - pooled) * (1 / a["n"] + 1 / b["n"]))
        p_value = 1.0 if se == 0 else math.erfc(abs(diff) / se / math.sqrt(2))
        d = PairedDifference(diff=diff, low=low, high=high, p_value=p_value, rows=a["n"] + b["n"], rows_needed=None,
                             test="two-proportion z-test")
    return {"measure": measure, "before": a, "after": b, "difference": d,
            "sentence": sentence(metric, measure, d, labels[1], base=labels[0], unit="judged traces")}


def version_change(old, new, v_old: int, v_new: int) -> str:
    """What rule version ``v_new`` changed from ``v_old`` (their MonitorRuleRow, None if gone), in one sentence: the
    judge's model, the sample rate, the metrics, the filter; the ones a rate can move with."""
    said = []
    if old is not None and new is not None:
        def model(row):
            return (row.judge or {}).get("model") or "the default judge"

        if model(old) != model(new):
            said.append(f"judge {model(old)} → {model(new)}")
        if old.sample_rate != new.sample_rate:
            said.append(f"sample rate {old.sample_rate:g} → {new.sample_rate:g}")
        if list(old.metrics) != list(new.metrics):
            said.append(f"metrics {', '.join(old.metrics)} → {', '.join(new.metrics)}")
        if (old.filter or "") != (new.filter or ""):
            said.append(f"filter {old.filter or 'none'!r} → {new.filter or 'none'!r}")
    return f"rule version {v_old} → {v_new}" + (f": {'; '.join(said)}" if said else "")


def series_chart(series: dict[str, Any], title: str) -> dict:
    """A Vega-Lite chart of :func:`rate_series`: the rate per window as a line over its 95% interval's band, the
    number judged under every point, a window under min n drawn hollow; a window with none judged leaves a gap, and a
    change of the rule breaks the line at a dashed mark saying what changed."""
    values, segment = [], 0
    for p in series["points"]:
        # windows with none judged end a stretch of line, and so does a change of the rule: the next starts anew
        segment += p["n"] == 0 or bool(p.get("changes"))
        values.append({"start": window_start(p["start_ns"]),
                       "rate": p["rate"], "low": p["low"], "high": p["high"], "n": p["n"], "few": p["few"],
                       "segment": segment, "change": "; ".join(p.get("changes") or ()) or None})
    x = {"field": "start", "type": "temporal", "title": "window (UTC)"}
    y = {"field": "rate", "type": "quantitative", "title": series["measure"],
         "scale": {"domain": [0, 1]}, "axis": {"format": "%"}}
    judged = {"filter": "datum.n > 0"}
    changed = {"filter": "datum.change != null"}  # a rule's change: a dashed line at its window, what it changed
    stretch = {"field": "segment", "type": "nominal"}  # one line (and band) per stretch of windows with judged
    tip = [{"field": "start", "type": "temporal", "title": "window", "format": "%Y-%m-%d %H:%M"},
           {"field": "rate", "type": "quantitative", "title": series["measure"], "format": ".1%"},
           {"field": "low", "type": "quantitative", "title": "95% low", "format": ".1%"},
           {"field": "high", "type": "quantitative", "title": "95% high", "format": ".1%"},
           {"field": "n", "type": "quantitative", "title": "judged"}]
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": title, "width": "container",
            "height": 260, "data": {"values": values}, "layer": [
                {"mark": {"type": "rule", "opacity": 0}, "encoding": {"x": x}},  # every window: the whole range
                {"transform": [judged], "mark": {"type": "area", "opacity": 0.2},
                 "encoding": {"x": x, "y": {**y, "field": "low"}, "y2": {"field": "high"}, "detail": stretch}},
                {"transform": [judged], "mark": "line", "encoding": {"x": x, "y": y, "detail": stretch}},
                {"transform": [judged], "mark": {"type": "rule", "opacity": 0.5},  # a lone window's interval too
                 "encoding": {"x": x, "y": {**y, "field": "low"}, "y2": {"field": "high"}}},
                {"transform": [judged], "mark": {"type": "point", "size": 60, "opacity": 1},
                 "encoding": {"x": x, "y": y, "tooltip": tip,
                              "fill": {"condition": {"test": "datum.few", "value": "white"}, "value": "#4c78a8"},
                              "stroke": {"value": "#4c78a8"}}},
                {"transform": [judged], "mark": {"type": "text", "dy": 14, "fontSize": 10, "color": "#555"},
                 "encoding": {"x": x, "y": y, "text": {"field": "n", "type": "quantitative"}}},
                {"transform": [changed], "mark": {"type": "rule", "strokeDash": [4, 3], "color": "#e45756"},
                 "encoding": {"x": x, "tooltip": [{"field": "change", "type": "nominal", "title": "change"}]}},
                {"transform": [changed], "mark": {"type": "text", "align": "left", "baseline": "top", "dx": 3, "y": 2,
                                                  "fontSize": 10, "color": "#e45756"},
                 "encoding": {"x": x, "text": {"field": "change", "type": "nominal"}}}]}
