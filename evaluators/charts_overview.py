"""Figures for reading one run at a glance: the overview, per-metric distributions, threshold "what if".

They read a run only through :class:`~evaluators.results.RunResults`' read API (``summary``,
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

from .registry import MetricSpec

PASS, FAIL, UNSURE = "#2e7d32", "#c62828", "#ef8f00"
COUNTS = (("scored_rows", "scored", "#607d8b"), ("errored_rows", "errored", "#c62828"),
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
    return Rate(f"{spec.name} · {measure}", measure, rate, low, high, goal, verdict, counts)


COLOUR = {"meets": PASS, "misses": FAIL, "unsure": UNSURE, "no data": "#9e9e9e"}


def overview(rates: list[Rate]):
    """Every metric's rate with its 95% interval and target (left), its row counts (right), one row each."""
    from plotly.subplots import make_subplots

    # the value in the label, not on the bar: a short bar has no room for it beside its interval
    labels = [f"{r.label} {'–' if r.rate is None else f'{r.rate:.0%}'}" for r in rates][::-1]  # first at the top
    rs = rates[::-1]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.65, 0.35], horizontal_spacing=0.04,
                        subplot_titles=("Rate with 95% interval (● target)", "Rows"))
    fig.add_bar(y=labels, x=[r.rate or 0 for r in rs], orientation="h", marker_color=[COLOUR[r.verdict] for r in rs],
                error_x=dict(type="data", symmetric=False, color="#333",
                             array=[(r.high - r.rate) if r.rate is not None else 0 for r in rs],
                             arrayminus=[(r.rate - r.low) if r.rate is not None else 0 for r in rs]),
                customdata=[[r.verdict, "–" if r.low is None else f"{r.low:.1%}–{r.high:.1%}"] for r in rs],
                hovertemplate="%{y}: %{x:.1%} (95% CI %{customdata[1]}) · %{customdata[0]}<extra></extra>",
                name="rate", showlegend=False, row=1, col=1)
    fig.add_scatter(y=labels, x=[r.target for r in rs], mode="markers", name="target",
                    marker=dict(symbol="circle", size=9, color="#111"),
                    hovertemplate="target %{x:.0%}<extra></extra>", showlegend=False, row=1, col=1)
    for key, name, colour in COUNTS:
        fig.add_bar(y=labels, x=[r.counts[key] for r in rs], orientation="h", name=name, marker_color=colour,
                    hovertemplate=f"%{{y}}: %{{x}} {name}<extra></extra>", row=1, col=2)
    fig.update_layout(barmode="stack", height=90 + 44 * len(rates), margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.08, x=0.65), bargap=0.35)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(automargin=True)
    return fig


def _vline(x: float, layer: str = "above") -> dict:
    """A dashed vertical line at ``x`` across the plot, as a layout shape."""
    return dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="paper", layer=layer,
                line=dict(dash="dash", color="#555"))


def distribution(spec: MetricSpec, values, threshold: float):
    """Score distribution of one metric from its values (NaN = no value): bars coloured by verdict,
    the threshold marked. Whole-number scales get one bar per value; others 20 even bins."""
    import numpy as np
    import plotly.graph_objects as go

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    lo, hi = map(float, spec.score_range)
    fig = go.Figure()
    if spec.integer and np.all(np.mod(v, 1) == 0):
        xs = np.arange(lo, hi + 1)
        counts = [int((v == x).sum()) for x in xs]
        fig.add_bar(x=xs.tolist(), y=counts, marker_color=[PASS if spec.passes(x, threshold) else FAIL for x in xs],
                    hovertemplate="%{x}: %{y} rows<extra></extra>")
        fig.update_xaxes(dtick=1, range=[lo - 0.6, hi + 0.6])
    else:
        edges = np.linspace(lo, hi, 21)
        ok = v >= threshold if spec.higher_is_better else v <= threshold  # spec.passes, on every value at once
        for mask, colour, name in ((ok, PASS, "pass"), (~ok, FAIL, "fail")):
            counts, _ = np.histogram(v[mask], bins=edges)
            fig.add_bar(x=((edges[:-1] + edges[1:]) / 2).tolist(), y=counts.tolist(), width=(hi - lo) / 20, marker_color=colour,
                        name=name, hovertemplate=f"%{{x}}: %{{y}} rows ({name})<extra></extra>")
        fig.update_layout(barmode="stack")
        fig.update_xaxes(range=[lo, hi])
    # the threshold as one layout shape over the bars (add_vline draws the same, at ten times the cost)
    fig.update_layout(height=220, margin=dict(l=10, r=10, t=10, b=10), showlegend=False,
                      xaxis_title=output_label(spec), yaxis_title="rows", shapes=[_vline(threshold, "above")])
    return fig


def what_if(spec: MetricSpec, curve, threshold: float, defect: bool = False):
    """Pass (or defect) rate over every threshold, from ``RunResults.threshold_curve``; the threshold in force marked."""
    import plotly.graph_objects as go

    ys = [None if r is None or (isinstance(r, float) and math.isnan(r)) else (1 - r if defect else r)
          for r in curve["pass_rate"]]
    xs = [float(t) for t in curve["threshold"]]
    measure = "defect rate" if defect else "pass rate"
    fig = go.Figure()
    fig.add_scatter(x=xs, y=ys, mode="lines+markers" if spec.integer else "lines", line_shape="linear",
                    name=measure, line_color="#1565c0", hovertemplate=f"threshold %{{x}}: %{{y:.1%}} {measure}<extra></extra>")
    here = next((y for x, y in zip(xs, ys) if x == threshold), None)
    if here is not None:
        fig.add_scatter(x=[threshold], y=[here], mode="markers+text", marker=dict(size=12, color="#111"),
                        text=[f"{here:.0%}"], textposition="top right", name="now",
                        hovertemplate=f"threshold in force %{{x}}: %{{y:.1%}} {measure}<extra></extra>")
    fig.update_layout(height=220, margin=dict(l=10, r=10, t=10, b=10), showlegend=False,
                      xaxis_title=f"{output_label(spec)} threshold", yaxis_title=measure, shapes=[_vline(threshold)])
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    return fig
