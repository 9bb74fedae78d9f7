"""Plotly figures of a run's results, shared by the dashboard and the HTML report."""
from __future__ import annotations

from collections import Counter

from .registry import MetricSpec
from .results import RunResults

PASS, FAIL = "#2e7d32", "#c62828"
CHART_HEIGHT = 280  # pixels; the report's grid cells are sized for it


def distribution(res: RunResults, spec: MetricSpec):
    """Score distribution of one metric, bars coloured by verdict, with the threshold marked."""
    import plotly.graph_objects as go

    threshold = res.thresholds[spec.name]
    values = [c.value for c in res.cells[spec.name] if c and c.status == "ok" and c.value is not None]
    lo, hi = spec.score_range
    fig = go.Figure()
    if spec.integer and all(float(v).is_integer() for v in values):
        counts = Counter(int(v) for v in values)
        xs = list(range(int(lo), int(hi) + 1))
        colours = [PASS if spec.passes(x, threshold) else FAIL for x in xs]
        fig.add_bar(x=xs, y=[counts.get(x, 0) for x in xs], marker_color=colours, name="rows",
                    hovertemplate="score %{x}: %{y} rows<extra></extra>")
        fig.update_xaxes(dtick=1, range=[lo - 0.6, hi + 0.6])
    else:
        passing = [v for v in values if spec.passes(v, threshold)]
        failing = [v for v in values if not spec.passes(v, threshold)]
        bins = dict(start=lo, end=hi + 1e-9, size=(hi - lo) / 20)
        fig.add_histogram(x=passing, xbins=bins, marker_color=PASS, name="pass")
        fig.add_histogram(x=failing, xbins=bins, marker_color=FAIL, name="fail")
        fig.update_layout(barmode="stack")
        fig.update_xaxes(range=[lo, hi])
    # The label sits above the plot (in the top margin, never over a bar), on the side of the line
    # with more room, so it is never cut at the plot's edge.
    fig.add_vline(x=threshold, line_dash="dash", line_color="#555")
    fig.add_annotation(x=threshold, y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                       xanchor="right" if threshold > (lo + hi) / 2 else "left", text=f"threshold {threshold:g}",
                       font=dict(size=11, color="#555"))
    # Margins that hold the tick labels and axis titles (automargin grows them when the labels are
    # longer), and room above the plot for the threshold's label. No figure title: a page or the
    # report titles the chart outside it, where a title cannot cover the next chart.
    fig.update_layout(height=CHART_HEIGHT, margin=dict(l=56, r=16, t=28, b=48), showlegend=False,
                      xaxis_title=spec.primary, yaxis_title="rows")
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True, rangemode="tozero")
    return fig
