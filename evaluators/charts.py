"""Plotly figures of a run's results, shared by the dashboard and the HTML report."""
from __future__ import annotations

from collections import Counter

from .registry import MetricSpec
from .results import RunResults

PASS, FAIL = "#2e7d32", "#c62828"


def distribution(res: RunResults, spec: MetricSpec):
    """Score distribution of one metric, bars coloured by verdict, with the threshold marked."""
    import plotly.graph_objects as go

    threshold = res.thresholds[spec.name]
    values = [float(v) for v in res.values(spec.name) if v == v]  # NaN (no value) is not equal to itself
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
        import numpy as np

        # binned here (20 bins across the scale), so a big run sends 40 bars, not every value
        edges = np.linspace(lo, hi, 21)
        width = (hi - lo) / 20
        for name, colour, keep in (("pass", PASS, True), ("fail", FAIL, False)):
            part = [v for v in values if spec.passes(v, threshold) == keep]
            counts, _ = np.histogram(part, bins=edges)
            fig.add_bar(x=edges[:-1] + width / 2, y=counts, width=width, marker_color=colour, name=name,
                        hovertemplate="%{x:.3g}: %{y} rows<extra></extra>")
        fig.update_layout(barmode="stack")
        fig.update_xaxes(range=[lo, hi])
    fig.add_vline(x=threshold, line_dash="dash", line_color="#555",
                  annotation_text=f"threshold {threshold:g}", annotation_position="top")
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10), showlegend=False,
                      xaxis_title=spec.primary, yaxis_title="rows")
    return fig
