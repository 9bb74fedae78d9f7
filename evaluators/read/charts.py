"""The HTML report's charts: each a small SVG drawn here, so the report carries no charting library (plotly.js
inlined once weighed 4.8 MB, most of a 31-row report) and opens offline in any browser. The dashboard draws its
own (``read.charts_overview``, Vega-Lite)."""
from __future__ import annotations

import html
import itertools
import math

from evaluators.core.registry import MetricSpec
from evaluators.read.results import RunResults

PASS, FAIL = "#2e7d32", "#c62828"
CHART_HEIGHT = 280  # pixels at the drawing's own width (WIDTH); the report's grid cells are sized for it
WIDTH = 420
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 48  # room for tick labels, axis titles and the threshold's label


def bars(res: RunResults, spec: MetricSpec) -> tuple[list[tuple[float, float, int, int]], tuple[float, float], bool]:
    """Score distribution of one metric's scored rows: (bars as (x, width, passing rows, failing rows), the x
    axis's range, whether the scale is whole numbers). A whole-number scale gets a bar a value; any other 20
    bins across the scale, so a big run draws 20 bars, not every value."""
    import numpy as np

    threshold = res.thresholds[spec.name]
    values = res.values(spec.name)
    values = values[~np.isnan(values)]  # scored rows only
    lo, hi = spec.score_range
    good = values >= threshold if spec.higher_is_better else values <= threshold  # spec.passes, per row
    if spec.integer and bool(np.all(values == np.floor(values))):
        xs = list(range(int(lo), int(hi) + 1))
        counts = np.bincount((values - int(lo)).astype(int), minlength=len(xs))[:len(xs)] if len(values) else [0] * len(xs)
        return ([(x, 0.8, int(c), 0) if spec.passes(x, threshold) else (x, 0.8, 0, int(c)) for x, c in zip(xs, counts)],
                (lo - 0.6, hi + 0.6), True)
    edges = np.linspace(lo, hi, 21)
    width = (hi - lo) / 20
    passing, _ = np.histogram(values[good], bins=edges)
    failing, _ = np.histogram(values[~good], bins=edges)
    return ([(float(e + width / 2), float(width), int(p), int(f)) for e, p, f in zip(edges[:-1], passing, failing)],
            (lo, hi), False)


def _step(top: int) -> int:
    """A round step (1, 2, 5, 10, 20, 50, ...) giving at most 5 steps from 0 to ``top``."""
    step = 1.0
    for k in itertools.cycle((2, 2.5, 2)):
        if top / step <= 5:
            return int(step)
        step *= k
    raise AssertionError  # (the cycle never ends)


def distribution_svg(res: RunResults, spec: MetricSpec) -> str:
    """Score distribution of one metric as an SVG: bars coloured by verdict (pass green, fail red), the threshold
    as a dashed line labelled above the plot on its roomier side, tick labels and axis titles inside the drawing,
    a tooltip per bar. It scales with its container (viewBox); every text is escaped."""
    data, (x0, x1), whole = bars(res, spec)
    threshold = res.thresholds[spec.name]
    w, h = WIDTH - LEFT - RIGHT, CHART_HEIGHT - TOP - BOTTOM
    top = max([p + f for _, _, p, f in data] + [1])
    step = _step(top)
    ymax = math.ceil(top / step) * step

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * w

    def sy(n: float) -> float:
        return TOP + h - n / ymax * h

    out = [f"<svg class='chart' viewBox='0 0 {WIDTH} {CHART_HEIGHT}' width='100%' role='img' "
           f"xmlns='http://www.w3.org/2000/svg' font-family='system-ui,sans-serif' font-size='11'>"]
    for n in range(0, ymax + 1, step):  # grid lines and y tick labels
        out.append(f"<line x1='{LEFT}' x2='{LEFT + w}' y1='{sy(n):.1f}' y2='{sy(n):.1f}' stroke='#eee'/>"
                   f"<text class='ytick' x='{LEFT - 6}' y='{sy(n) + 4:.1f}' text-anchor='end' fill='#555'>{n}</text>")
    for x, width, passing, failing in data:
        left, right = sx(x - width / 2), sx(x + width / 2)
        label = f"{x:g}" if whole else f"{x - width / 2:.3g}–{x + width / 2:.3g}"
        for base, n, colour, word in ((0, passing, PASS, "pass"), (passing, failing, FAIL, "fail")):
            if n:
                out.append(f"<rect class='bar' x='{left:.1f}' y='{sy(base + n):.1f}' width='{right - left:.1f}' "
                           f"height='{sy(base) - sy(base + n):.1f}' fill='{colour}'><title>{html.escape(label)}: "
                           f"{n} rows ({word})</title></rect>")
    ticks = [x for x, *_ in data] if whole else [x0 + k * (x1 - x0) / 4 for k in range(5)]
    out.append(f"<line x1='{LEFT}' x2='{LEFT + w}' y1='{TOP + h}' y2='{TOP + h}' stroke='#888'/>")
    out += [f"<text class='xtick' x='{sx(x):.1f}' y='{TOP + h + 14}' text-anchor='middle' fill='#555'>{x:g}</text>"
            for x in ticks]
    tx = sx(min(max(threshold, x0), x1))
    side = "end" if threshold > (x0 + x1) / 2 else "start"
    out.append(f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{TOP}' y2='{TOP + h}' stroke='#555' stroke-dasharray='4 3'/>"
               f"<text x='{tx:.1f}' y='{TOP - 6}' text-anchor='{side}' fill='#555'>threshold {threshold:g}</text>")
    out.append(f"<text x='{LEFT + w / 2:.1f}' y='{CHART_HEIGHT - 8}' text-anchor='middle' fill='#333'>"
               f"{html.escape(spec.primary)}</text><text transform='translate(14 {TOP + h / 2:.1f}) rotate(-90)' "
               "text-anchor='middle' fill='#333'>rows</text></svg>")
    return "".join(out)
