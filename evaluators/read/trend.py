"""A metric over successive runs of the same rows (a dataset evaluated release after release): its rate with
its interval per run, and which runs changed it more than chance would (McNemar's exact test against the run
before, paired on the same rows)."""
from __future__ import annotations

from typing import Any

from evaluators.read.charts_overview import rate_of
from evaluators.read.paired import paired_differences
from evaluators.read.results import RunResults


def trend(runs: list[tuple[dict, RunResults]], metric: str) -> list[dict[str, Any]]:
    """One record per run (oldest first) having ``metric``: its name, time, rate (pass or defect) with its
    95% Wilson interval, the change from the run before in points with its p-value, and ``marked`` when that
    change is unlikely to be chance (p < 0.05)."""
    out: list[dict[str, Any]] = []
    prev: RunResults | None = None
    for run, res in sorted(runs, key=lambda x: x[0]["created_at"]):
        spec = next((s for s in res.specs if s.name == metric), None)
        if spec is None:
            continue
        r = rate_of(spec, res.summary(spec))
        rec = {"run": run["id"], "name": run["name"], "created_at": run["created_at"], "measure": r.measure,
               "rate": r.rate, "low": r.low, "high": r.high, "change": None, "p_value": None, "marked": False}
        if prev is not None and len(prev) == len(res):
            d = next((x for x in paired_differences(prev, res) if x["metric"] == metric), None)
            if d and d.get("rate") is not None:
                rec["change"], rec["p_value"] = d["rate"].diff, d["rate"].p_value
                rec["marked"] = d["rate"].p_value < 0.05
        out.append(rec)
        prev = res
    return out


def trend_chart(points: list[dict[str, Any]], metric: str) -> dict:
    """A Vega-Lite line of the rate over runs with its interval as a band; runs whose change from the one
    before is unlikely to be chance drawn as large red points."""
    data = [{"run": f"{k + 1}. {p['name']}"[:60], "rate": p["rate"], "low": p["low"], "high": p["high"],
             "change": "unlikely to be chance" if p["marked"] else "could be chance or first run"}
            for k, p in enumerate(points) if p["rate"] is not None]
    x = {"field": "run", "type": "ordinal", "sort": None, "title": "run (oldest first)"}
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "data": {"values": data},
            "title": f"{metric}: {points[0]['measure'] if points else 'rate'} over runs",
            "width": "container", "height": 260,
            "layer": [
                {"mark": {"type": "area", "opacity": 0.2}, "encoding": {
                    "x": x, "y": {"field": "low", "type": "quantitative", "axis": {"format": ".0%"}, "title": None},
                    "y2": {"field": "high"}}},
                {"mark": {"type": "line"}, "encoding": {"x": x, "y": {"field": "rate", "type": "quantitative"}}},
                {"mark": {"type": "point", "filled": True}, "encoding": {
                    "x": x, "y": {"field": "rate", "type": "quantitative"},
                    "size": {"field": "change", "type": "nominal", "scale": {
                        "domain": ["unlikely to be chance", "could be chance or first run"], "range": [160, 40]}},
                    "color": {"field": "change", "type": "nominal", "scale": {
                        "domain": ["unlikely to be chance", "could be chance or first run"],
                        "range": ["#b71c1c", "#455a64"]}, "legend": {"title": "change from the run before"}},
                    "tooltip": [{"field": "run"}, {"field": "rate", "format": ".1%"}, {"field": "low", "format": ".1%"},
                                {"field": "high", "format": ".1%"}, {"field": "change"}]}}]}
