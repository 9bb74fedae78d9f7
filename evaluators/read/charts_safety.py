"""The Risk and safety page's charts, as Vega-Lite specifications drawn as SVG (see charts_overview: Plotly's
script alone cost this page 1.5-2 s of a fresh tab's load on this project's machine)."""
from __future__ import annotations

from typing import Any

from evaluators.read.charts_overview import AXIS_PCT, SVG

LEVEL_COLOURS = {"Very low": "#2e7d32", "Low": "#9ccc65", "Medium": "#ffa000", "High": "#c62828"}
# the plot keeps its height and the legend and axes are added around it (the page's own sizing fits them
# inside the height, which left the levels' two bars 10 px to share under their legend)
PAD = {"autosize": {"type": "pad"}}
HARM, CATEGORY = "#c62828", "#ef9a9a"  # a harm or label's bar; an XPIA category's, lighter


def defect_rates(overview: list[dict[str, Any]]) -> dict | None:
    """Every harm, label and XPIA category with a scored row: its defect rate and 95% interval, one bar each,
    in the overview's order (None when nothing is scored yet)."""
    shown = [o for o in overview if o["defect_rate"] is not None]
    if not shown:
        return None
    rows = [{"measure": o["measure"], "rate": o["defect_rate"], "low": o["ci95_low"], "high": o["ci95_high"],
             "colour": CATEGORY if ":" in o["measure"] else HARM, "scored": o["scored"],
             "interval": f"{o['ci95_low']:.1%}–{o['ci95_high']:.1%}"} for o in shown]
    y = {"field": "measure", "type": "nominal", "sort": [o["measure"] for o in shown], "title": None,
         "axis": {"labelLimit": 360, "labelFontSize": 12}}
    return {"usermeta": {**SVG, "chart": "safety.defects"}, "data": {"values": rows}, "width": 560, **PAD,
            "height": 30 * len(rows) + 10, "encoding": {"y": y},
            "layer": [
                {"mark": {"type": "bar", "height": {"band": 0.6}},
                 "encoding": {"x": {"field": "rate", "type": "quantitative", "scale": {"domain": [0, 1]},
                                    "axis": AXIS_PCT, "title": "defect rate (95% interval)"},
                              "color": {"field": "colour", "type": "nominal", "scale": None, "legend": None},
                              "tooltip": [{"field": "measure"}, {"field": "rate", "format": ".1%", "title": "defect rate"},
                                          {"field": "interval", "title": "95% interval"},
                                          {"field": "scored", "title": "scored rows"}]}},
                {"mark": {"type": "rule", "color": "#333", "strokeWidth": 1.5},
                 "encoding": {"x": {"field": "low", "type": "quantitative"}, "x2": {"field": "high"}}}]}


def severity_levels(levels: list[dict[str, Any]]) -> dict | None:
    """Per harm, how many scored rows fall in each of the four levels, stacked from Very low to High."""
    if not levels:
        return None
    names = list(LEVEL_COLOURS)
    rows = [{**x, "k": names.index(x["level"])} for x in levels]
    harms = list(dict.fromkeys(x["metric"] for x in levels))
    return {"usermeta": {**SVG, "chart": "safety.levels"}, "data": {"values": rows}, "width": 560, **PAD,
            "height": 32 * len(harms) + 10,
            "encoding": {"y": {"field": "metric", "type": "nominal", "sort": harms, "title": None,
                               "axis": {"labelLimit": 360, "labelFontSize": 12}}},
            "layer": [{"mark": {"type": "bar", "height": {"band": 0.6}},
                       "encoding": {"x": {"field": "rows", "type": "quantitative", "stack": "zero", "title": "rows"},
                                    "color": {"field": "level", "type": "nominal", "title": None,
                                              "scale": {"domain": names, "range": list(LEVEL_COLOURS.values())},
                                              "legend": {"orient": "top", "direction": "horizontal"}},
                                    "order": {"field": "k"},
                                    "tooltip": [{"field": "metric"}, {"field": "level"}, {"field": "rows"}]}}]}
