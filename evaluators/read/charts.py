"""Plotly figures of a run's results, shared by the dashboard and the HTML report."""
from __future__ import annotations

from evaluators.core.registry import MetricSpec
from evaluators.read.results import RunResults

PASS, FAIL = "#2e7d32", "#c62828"
CHART_HEIGHT = 280  # pixels; the report's grid cells are sized for it


def distribution(res: RunResults, spec: MetricSpec):
    """Score distribution of one metric, bars coloured by verdict, with the threshold marked."""
    import numpy as np
    import plotly.graph_objects as go

    threshold = res.thresholds[spec.name]
    values = res.values(spec.name)
    values = values[~np.isnan(values)]  # scored rows only
    lo, hi = spec.score_range
    good = values >= threshold if spec.higher_is_better else values <= threshold  # spec.passes, per row
    fig = go.Figure()
    if spec.integer and bool(np.all(values == np.floor(values))):
        xs = list(range(int(lo), int(hi) + 1))
        counts = np.bincount((values - int(lo)).astype(int), minlength=len(xs))[:len(xs)] if len(values) else [0] * len(xs)
        colours = [PASS if spec.passes(x, threshold) else FAIL for x in xs]
        fig.add_bar(x=xs, y=[int(c) for c in counts], marker_color=colours, name="rows",
                    hovertemplate="score %{x}: %{y} rows<extra></extra>")
        fig.update_xaxes(dtick=1, range=[lo - 0.6, hi + 0.6])
    else:
        # binned here (20 bins across the scale), so a big run sends 40 bars, not every value
        edges = np.linspace(lo, hi, 21)
        width = (hi - lo) / 20
        for name, colour, part in (("pass", PASS, values[good]), ("fail", FAIL, values[~good])):
            counts, _ = np.histogram(part, bins=edges)
            fig.add_bar(x=edges[:-1] + width / 2, y=counts, width=width, marker_color=colour, name=name,
                        hovertemplate="%{x:.3g}: %{y} rows<extra></extra>")
        fig.update_layout(barmode="stack")
        fig.update_xaxes(range=[lo, hi])
    # The threshold as one layout shape (add_vline does the same, 10x slower on a big run); its label
    # sits above the plot (in the top margin, never over a bar), on the side of the line with more
    # room, so it is never cut at the plot's edge.
    fig.update_layout(shapes=[dict(type="line", x0=threshold, x1=threshold, xref="x", y0=0, y1=1, yref="paper",
                                   line=dict(dash="dash", color="#555"))],
                      annotations=[dict(x=threshold, xref="x", y=1, yref="paper", yanchor="bottom", showarrow=False,
                                        xanchor="right" if threshold > (lo + hi) / 2 else "left",
                                        text=f"threshold {threshold:g}", font=dict(size=11, color="#555"))])
    # Margins that hold the tick labels and axis titles (automargin grows them when the labels are
    # longer), and room above the plot for the threshold's label. No figure title: a page or the
    # report titles the chart outside it, where a title cannot cover the next chart.
    fig.update_layout(height=CHART_HEIGHT, margin=dict(l=56, r=16, t=28, b=48), showlegend=False,
                      xaxis_title=spec.primary, yaxis_title="rows")
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True, rangemode="tozero")
    return fig
