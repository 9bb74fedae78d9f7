"""A metric over successive runs of the same rows (a dataset evaluated release after release): its rate with
its interval per run, and which runs changed it more than chance would (McNemar's exact test against the run
before, paired on the same rows)."""
from __future__ import annotations

from typing import Any

from evaluators.read.charts_overview import DEFAULT_TARGET, rate_of
from evaluators.read.compare import passes_at
from evaluators.read.paired import p_text, rate_change
from evaluators.read.results import RunResults


def trend(runs: list[tuple[dict, RunResults]], metric: str) -> list[dict[str, Any]]:
    """One record per run (oldest first) having ``metric``: its name, time, rate (pass or defect) with its
    95% Wilson interval and the threshold it counts (``passes_at``: "≥ 3"), the change from the run before in
    points with its p-value, and ``marked`` when that change is unlikely to be chance (p < 0.05) on the same
    threshold (a change of threshold alone is not a change of the answers: ``threshold_changed``)."""
    out: list[dict[str, Any]] = []
    prev: RunResults | None = None
    for run, res in sorted(runs, key=lambda x: x[0]["created_at"]):
        spec = next((s for s in res.specs if s.name == metric), None)
        if spec is None:
            continue
        r = rate_of(spec, res.summary(spec))
        rec = {"run": run["id"], "name": run["name"], "created_at": run["created_at"], "measure": r.measure,
               "rate": r.rate, "low": r.low, "high": r.high, "passes_at": passes_at(spec, res.thresholds[metric]),
               "change": None, "p_value": None, "marked": False, "threshold_changed": False}
        if prev is not None and len(prev) == len(res):
            got = rate_change(prev, res, metric)
            if got is not None:
                rec["change"], rec["p_value"] = got
                rec["threshold_changed"] = rec["passes_at"] != out[-1]["passes_at"]
                rec["marked"] = rec["p_value"] < 0.05 and not rec["threshold_changed"]
        out.append(rec)
        prev = res
    return out


MARKS = ("unlikely to be chance", "could be chance or first run", "threshold changed")


def _date(v: Any) -> str:
    return v.isoformat(timespec="seconds") if hasattr(v, "isoformat") else str(v)


def _ticks(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The date axis's ticks: whole days, weeks or months by the runs' span (Vega's own count put two ticks on
    one day, both labelled "Nov 03", when three runs spanned two days)."""
    import datetime as dt

    try:
        days = [dt.datetime.fromisoformat(_date(p["created_at"])) for p in points]
    except ValueError:  # a time this code cannot read: Vega's own ticks, by day
        days = []
    span = (max(days) - min(days)).days if days else 0
    unit = "day" if span <= 14 else "week" if span <= 120 else "month"
    return {"interval": unit, "step": 1}


def trend_chart(points: list[dict[str, Any]], metric: str, target: float = DEFAULT_TARGET) -> dict:
    """A Vega-Lite line of the rate over runs, by date (0-100%, a normal height), its interval as a band, the
    ``target`` pass rate as a dashed rule (1 - target for a defect rate), each run's name, threshold and change
    in its tooltip; runs whose change from the one before is unlikely to be chance drawn as large red points."""
    measure = points[0]["measure"] if points else "pass rate"
    goal = 1.0 - target if measure == "defect rate" else target
    data = [{"run": p["name"], "date": _date(p["created_at"]), "rate": p["rate"], "low": p["low"], "high": p["high"],
             "passes at": p["passes_at"],
             "change": "–" if p["change"] is None else f"{100 * p['change']:+.1f} points ({p_text(p['p_value'])})",
             "mark": MARKS[2] if p["threshold_changed"] else MARKS[0] if p["marked"] else MARKS[1]}
            for p in points if p["rate"] is not None]
    rules = sorted({p["passes at"] for p in data})
    ticks = _ticks(points)  # the domain rounded to them, so the first run's day has its tick
    x = {"field": "date", "type": "temporal", "title": "run date", "scale": {"padding": 16, "nice": ticks},
         "axis": {"format": "%b %d", "labelAngle": 0, "labelOverlap": "greedy", "tickCount": ticks}}
    y = {"field": "rate", "type": "quantitative", "title": measure, "scale": {"domain": [0, 1], "nice": False},
         "axis": {"format": ".0%", "values": [0, 0.25, 0.5, 0.75, 1]}}
    tooltip = [{"field": "run"}, {"field": "date", "type": "temporal", "format": "%Y-%m-%d %H:%M"},
               {"field": "rate", "format": ".1%", "title": measure}, {"field": "low", "format": ".1%", "title": "95% low"},
               {"field": "high", "format": ".1%", "title": "95% high"}, {"field": "passes at"},
               {"field": "change", "title": "change from the run before"}]
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "title": {"text": f"{metric}: {measure} over runs",
                      "subtitle": (f"a row passes at {metric} {rules[0]}" if len(rules) == 1 else
                                   "thresholds differ between runs: " + ", ".join(rules))},
            # the plot 260 px tall, axes, title and legend around it ("fit" squeezed the plot into the
            # height with them, to ~80 px under a legend and rotated names)
            "width": "container", "height": 260, "autosize": {"type": "fit-x", "contains": "padding"},
            "layer": [
                {"data": {"values": data}, "mark": {"type": "area", "opacity": 0.2},
                 "encoding": {"x": x, "y": {**y, "field": "low"}, "y2": {"field": "high"}}},
                {"data": {"values": data}, "mark": {"type": "line"}, "encoding": {"x": x, "y": y}},
                {"data": {"values": [{"target": goal, "label": f"target {goal:.0%}"}]},
                 "mark": {"type": "rule", "strokeDash": [6, 4], "color": "#555"},
                 "encoding": {"y": {"field": "target", "type": "quantitative"}}},
                {"data": {"values": [{"target": goal, "label": f"target {goal:.0%}"}]},
                 "mark": {"type": "text", "align": "right", "x": "width", "dx": -4, "dy": -7, "color": "#555"},
                 "encoding": {"y": {"field": "target", "type": "quantitative"}, "text": {"field": "label"}}},
                {"data": {"values": data}, "mark": {"type": "point", "filled": True}, "encoding": {
                    "x": x, "y": y, "tooltip": tooltip,
                    "size": {"field": "mark", "type": "nominal", "scale": {"domain": list(MARKS), "range": [160, 50, 90]}},
                    "color": {"field": "mark", "type": "nominal", "scale": {
                        "domain": list(MARKS), "range": ["#b71c1c", "#455a64", "#ef8f00"]},
                        "legend": {"title": "change from the run before", "orient": "bottom"}}}}]}
