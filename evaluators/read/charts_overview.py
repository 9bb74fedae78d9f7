"""Figures for reading one run at a glance: the overview, per-metric distributions, threshold "what if".

They read a run only through :class:`~evaluators.read.results.RunResults`' read API (``summary``,
``values``, ``threshold_curve``), never row by row, so they stay cheap on big runs.

"Meets its threshold" (the overview's colours): a row passes when its score is at or past the
metric's threshold; a *metric* meets it when its pass rate reaches a target share of scored rows
(``target``, 80% by default, changeable on the page). The 95% interval decides the colour:
green when the whole interval is at or above the target, red when the whole interval is below,
amber when the interval straddles the target (too few rows to tell). For severity and label
metrics the figure shows the defect rate (1 - pass rate) against ``1 - target``: the same verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from evaluators.core.names import display_name
from evaluators.core.registry import MetricSpec

PASS, FAIL, UNSURE = "#2e7d32", "#c62828", "#ef8f00"
# Green, amber and red say pass / unsure / fail (of a row or of a metric against its target) and nothing
# else: errored rows, which count in no rate, are purple.
COUNTS = (("scored_rows", "scored", "#607d8b"), ("errored_rows", "errored", "#7b1fa2"),
          ("skipped_rows", "skipped", "#b0bec5"), ("pending_rows", "pending", "#e0e0e0"))
DEFAULT_TARGET = 0.8


def output_label(spec: MetricSpec, key: str | None = None) -> str:
    """A readable name for one output of a metric: ``coherence``, ``rouge f1 score``, ``bleu score``.

    The metric's name, then what the output measures without the metric's prefix repeated."""
    key = key or spec.primary
    if key in (spec.name, spec.prefix):
        return spec.name
    rest = key[len(spec.prefix):] if key.startswith(spec.prefix) else key
    rest = rest.strip("_").replace("_", " ")
    return f"{spec.name} {rest}" if rest else spec.name


def number(v: float | None, digits: int = 4) -> str:
    """A score with sensible digits: whole numbers as such, else ``digits`` significant ones (0.4213)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    v = float(v)
    if v.is_integer() and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


@dataclass
class Rate:
    """What the overview draws for one metric."""

    label: str  # "coherence · pass rate"
    measure: str  # "pass rate" or "defect rate"
    rate: float | None
    low: float | None
    high: float | None
    target: float  # the target for ``measure`` (a defect rate's is 1 - the pass-rate target)
    verdict: str  # "meets" | "misses" | "unsure" | "no data"
    counts: dict[str, int]


def rate_of(spec: MetricSpec, sm: dict, target: float = DEFAULT_TARGET) -> Rate:
    """One metric's headline rate from its ``summary()``: the defect rate where the kind reports one
    (severity, label), else the pass rate; with its interval and whether it meets ``target``."""
    defect = "defect_rate" in sm
    measure = "defect rate" if defect else "pass rate"
    rate, (low, high) = (sm["defect_rate"], sm["defect_rate_ci95"]) if defect else (sm["pass_rate"], sm["pass_rate_ci95"])
    goal = 1.0 - target if defect else target
    if rate is None:
        verdict = "no data"
    else:
        plo, phi = (1 - high, 1 - low) if defect else (low, high)  # the pass rate's interval
        verdict = "meets" if plo >= target else "misses" if phi < target else "unsure"
    counts = {k: int(sm.get(k) or 0) for k, _, _ in COUNTS}
    return Rate(f"{display_name(spec)} · {measure}", measure, rate, low, high, goal, verdict, counts)


COLOUR = {"meets": PASS, "misses": FAIL, "unsure": UNSURE, "no data": "#9e9e9e"}
MEANING = {"meets": "meets the target", "unsure": "too close to tell", "misses": "below the target",
           "no data": "no scored rows"}  # the overview's legend


# The Metrics tab's charts are Vega-Lite specifications (plain dicts, data inline), not Plotly figures:
# on this project's 2-core, GPU-less machine Plotly's script alone costs a page 1.5-2 s to load and
# start, whatever is drawn; Vega-Lite draws the same dozen charts in a fraction of that
# (bench/dashboard_scale.py). The HTML report keeps Plotly (evaluators/charts.py). Charts are drawn
# as SVG so that their text (labels, the what-if point) is in the page, readable and testable.
# ``usermeta.chart`` names each chart for tests and tools.
SVG = {"embedOptions": {"renderer": "svg", "actions": False}}
AXIS_PCT = {"format": ".0%"}


def _meta(name: str) -> dict:
    return {**SVG, "chart": name}


def overview(rates: list[Rate]) -> dict:
    """Every metric's rate with its 95% interval and target (left), its row counts (right), one row each,
    the first metric at the top; the bar's colour is its verdict against the target."""
    order = [f"{r.label} {'–' if r.rate is None else f'{r.rate:.0%}'}" for r in rates]  # the value in the label
    rows = [{"metric": lab, "rate": r.rate, "low": r.low, "high": r.high, "target": r.target, "verdict": r.verdict,
             "colour": COLOUR[r.verdict], "meaning": MEANING[r.verdict],
             "interval": "–" if r.low is None else f"{r.low:.1%}–{r.high:.1%}"} for lab, r in zip(order, rates)]
    counts = [{"metric": lab, "rows": name, "n": r.counts[key], "k": k}
              for lab, r in zip(order, rates) for k, (key, name, _) in enumerate(COUNTS)]
    y = {"field": "metric", "type": "nominal", "sort": order, "title": None,
         "axis": {"labelLimit": 360, "labelFontSize": 12}}
    height = 34 * len(rates) + 10
    rate = {"data": {"values": rows}, "width": 430, "height": height,
            "title": {"text": "Rate with 95% interval (● target)", "fontSize": 13, "anchor": "start"},
            "encoding": {"y": y},
            "layer": [
                {"mark": {"type": "bar", "height": {"band": 0.6}},
                 "encoding": {"x": {"field": "rate", "type": "quantitative", "title": None,
                                    "scale": {"domain": [0, 1]}, "axis": AXIS_PCT},
                              "color": {"field": "meaning", "type": "nominal", "title": "Rate against the target",
                                        "scale": {"domain": list(MEANING.values()), "range": [COLOUR[k] for k in MEANING]},
                                        "legend": {"orient": "bottom", "direction": "horizontal"}},
                              "tooltip": [{"field": "metric"}, {"field": "rate", "format": ".1%"},
                                          {"field": "interval", "title": "95% interval"}, {"field": "verdict"}]}},
                {"mark": {"type": "rule", "color": "#333", "strokeWidth": 1.5},
                 "encoding": {"x": {"field": "low", "type": "quantitative"}, "x2": {"field": "high"}}},
                {"mark": {"type": "point", "filled": True, "color": "#111", "size": 70},
                 "encoding": {"x": {"field": "target", "type": "quantitative"},
                              "tooltip": [{"field": "target", "format": ".0%"}]}}]}
    names, colours = [n for _, n, _ in COUNTS], [c for _, _, c in COUNTS]
    right = {"data": {"values": counts}, "width": 220, "height": height, "mark": {"type": "bar", "height": {"band": 0.6}},
             "title": {"text": "Rows", "fontSize": 13, "anchor": "start"},
             "encoding": {"y": {**y, "axis": None},
                          "x": {"field": "n", "type": "quantitative", "title": None, "stack": "zero"},
                          "color": {"field": "rows", "type": "nominal", "scale": {"domain": names, "range": colours},
                                    "legend": {"orient": "bottom", "title": None, "columns": 2}},  # in its width
                          "order": {"field": "k"},
                          "tooltip": [{"field": "metric"}, {"field": "rows"}, {"field": "n", "title": "count"}]}}
    return {"usermeta": _meta("overview"), "hconcat": [rate, right], "spacing": 12, "autosize": {"type": "pad"},
            "resolve": {"scale": {"color": "independent"}, "legend": {"color": "independent"}}}


def _rule(x: float, dash: bool = True) -> dict:
    """A vertical line at ``x`` across the plot (the threshold)."""
    return {"mark": {"type": "rule", "color": "#555", "strokeDash": [5, 4] if dash else []},
            "data": {"values": [{"threshold": x}]},
            "encoding": {"x": {"field": "threshold", "type": "quantitative"}}}


def _nothing_yet(text: str, x: float) -> dict:
    """A layer that says why a chart is empty, at ``x`` on its x scale, up in its plot; the chart then shows no
    count axis (Vega drew a lone "0.000000" tick for no rows)."""
    return {"data": {"values": [{"say": text}]}, "mark": {"type": "text", "fontSize": 14, "color": "#555"},
            "encoding": {"x": {"datum": x, "type": "quantitative"}, "y": {"value": 40}, "text": {"field": "say"}}}


def distribution(spec: MetricSpec, values, threshold: float, title: tuple[str, list[str]] | None = None,
                 empty: str = "no scored rows") -> dict:
    """Score distribution of one metric from its values (NaN = no value): bars coloured by verdict,
    the threshold marked. Whole-number scales get one bar per value; others 20 even bins. With no value,
    ``empty`` in words instead of bars and a count axis.

    Args:
        title: the chart's title and lines under it (the metric's summary), if any.
        empty: what to say when no row has a value (e.g. "waiting for the judge" while rows are pending).
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    lo, hi = map(float, spec.score_range)
    bars = []
    if spec.integer and np.all(np.mod(v, 1) == 0):
        for x in np.arange(lo, hi + 1):
            ok = spec.passes(float(x), threshold)
            n = int((v == x).sum())
            bars.append({"from": float(x) - 0.4, "to": float(x) + 0.4, "score": float(x), "rows": n, "top": n,
                         "bottom": 0, "verdict": "pass" if ok else "fail"})
        scale = {"domain": [lo - 0.6, hi + 0.6], "nice": False}
        axis = {"values": [float(x) for x in np.arange(lo, hi + 1)], "format": "d"}
    else:
        edges = np.linspace(lo, hi, 21)
        ok = v >= threshold if spec.higher_is_better else v <= threshold  # spec.passes, on every value at once
        below = np.zeros(len(edges) - 1, dtype=int)  # pass rows, then fail rows stacked on them
        for mask, name in ((ok, "pass"), (~ok, "fail")):
            counts, _ = np.histogram(v[mask], bins=edges)
            bars += [{"from": float(a), "to": float(b), "score": float((a + b) / 2), "rows": int(c),
                      "bottom": int(z), "top": int(z + c), "verdict": name}
                     for a, b, c, z in zip(edges[:-1], edges[1:], counts, below) if c]
            below = below + counts
        scale = {"domain": [lo, hi], "nice": False}
        axis = {}
    x = {"field": "from", "type": "quantitative", "title": output_label(spec), "scale": scale, "axis": axis}
    head = {} if title is None else {"title": {"text": title[0], "subtitle": title[1], "anchor": "start",
                                                "fontSize": 14, "subtitleFontSize": 12, "subtitlePadding": 4,
                                                "subtitleColor": "#555", "offset": 10}}
    lines = 0 if title is None else 1 + len(title[1])  # the chart's height holds its title: the plot keeps ~160 px
    y = {"field": "top", "type": "quantitative", "title": "rows"}
    if not v.size:
        y = {**y, "axis": None, "scale": {"domain": [0, 1]}}
    return {"usermeta": _meta(f"distribution.{spec.name}"), "height": 190 + 16 * lines, "width": "container", **head,
            "layer": [{"data": {"values": bars}, "mark": {"type": "bar"},
                       "encoding": {"x": x, "x2": {"field": "to"}, "y": y,
                                    "y2": {"field": "bottom"},
                                    "color": {"field": "verdict", "type": "nominal", "legend": None,
                                              "scale": {"domain": ["pass", "fail"], "range": [PASS, FAIL]}},
                                    "tooltip": [{"field": "score", "format": ".3~g"}, {"field": "rows"},
                                                {"field": "verdict"}]}},
                      _rule(threshold)] + ([] if v.size else [_nothing_yet(empty, (lo + hi) / 2)])}


def what_if(spec: MetricSpec, curve, threshold: float, defect: bool = False, empty: str = "no scored rows") -> dict:
    """Pass (or defect) rate over every threshold, from ``RunResults.threshold_curve``; the threshold in force
    marked with its rate written beside it; ``empty`` in words when no row has a score."""
    ys = [None if r is None or (isinstance(r, float) and math.isnan(r)) else (1 - r if defect else r)
          for r in curve["pass_rate"]]
    xs = [float(t) for t in curve["threshold"]]
    measure = "defect rate" if defect else "pass rate"
    points = [{"threshold": x, "rate": y} for x, y in zip(xs, ys)]
    here = next((y for x, y in zip(xs, ys) if x == threshold), None)
    x = {"field": "threshold", "type": "quantitative", "title": f"{output_label(spec)} threshold",
         "scale": {"domain": [min(xs), max(xs)] if xs else [0, 1], "nice": False},
         "axis": {"values": xs, "format": "d"} if spec.integer and len(xs) <= 12 else {}}
    y = {"field": "rate", "type": "quantitative", "title": measure, "scale": {"domain": [0, 1.05]}, "axis": AXIS_PCT}
    tip = [{"field": "threshold", "format": ".3~g"}, {"field": "rate", "title": measure, "format": ".1%"}]
    layer = [{"data": {"values": points},
              "mark": {"type": "line", "color": "#1565c0", "point": bool(spec.integer)},
              "encoding": {"x": x, "y": y, "tooltip": tip}},
             _rule(threshold)]
    if here is not None:
        now = {"data": {"values": [{"threshold": threshold, "rate": here, "label": f"{here:.0%}"}]},
               "encoding": {"x": x, "y": y}}
        layer += [{**now, "mark": {"type": "point", "filled": True, "size": 110, "color": "#111"},
                   "encoding": {**now["encoding"], "tooltip": tip}},
                  {**now, "mark": {"type": "text", "align": "left", "dx": 7, "dy": -10, "fontSize": 13},
                   "encoding": {**now["encoding"], "text": {"field": "label"}}}]
    if all(r is None for r in ys):
        layer.append(_nothing_yet(empty, (min(xs) + max(xs)) / 2 if xs else 0.5))
    return {"usermeta": _meta(f"whatif.{spec.name}"), "height": 180, "width": "container", "layer": layer}


def small_multiples(panels: list[dict], columns: int = 3, width: int = 220) -> dict:
    """Charts of :func:`distribution` side by side, ``columns`` to a row, as one chart (rows of
    ``hconcat`` in a ``vconcat``); each keeps its own scales and title, and its name
    (``distribution.<metric>``) as the view's ``description``.

    Args:
        width: each plot's width in pixels (views side by side cannot follow their container's width;
            three of 220 px with their axes fit the main column of a 1280 px wide window).
    """
    views = [{**{k: v for k, v in p.items() if k != "usermeta"}, "description": p["usermeta"]["chart"], "width": width,
              "height": 150} for p in panels]  # the plot's own size here: titles are laid out above it
    rows = [{"hconcat": views[k:k + columns], "spacing": 28} for k in range(0, len(views), columns)]
    return {"usermeta": _meta("distributions"), "vconcat": rows, "spacing": 24}
