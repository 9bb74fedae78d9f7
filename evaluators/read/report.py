"""A self-contained HTML report of a run: summary, charts and every row; opens offline."""
from __future__ import annotations

import html
from typing import Any

from evaluators.read.charts import CHART_HEIGHT, distribution
from evaluators.read.results import RunResults


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def html_report(res: RunResults, run: dict[str, Any]) -> str:
    """The report as one HTML string (plotly.js inlined once, so no network is needed).

    Args:
        res: the run's results, thresholds applied.
        run: the stored run record (name, status, timestamps, spec).
    """
    judge = (run.get("spec") or {}).get("judge") or {}
    head = [("Run", run.get("name")), ("Status", run.get("status")), ("Created", run.get("created_at")),
            ("Rows", len(res.dataset)), ("Judge", f"{judge.get('model')} ({judge.get('provider')})" if judge else "none")]
    parts = [f"<h1>{html.escape(str(run.get('name')))}</h1><table class='meta'>"]
    parts += [f"<tr><th>{k}</th><td>{_fmt(v)}</td></tr>" for k, v in head] + ["</table>"]
    parts.append("<h2>Summary</h2><table><tr><th>metric</th><th>mean</th><th>95% CI</th><th>pass rate</th>"
                 "<th>threshold</th><th>scored</th><th>errored</th><th>skipped</th></tr>")
    for s in res.specs:
        sm = res.summary(s)
        lo, hi = sm[f"{s.primary}_ci95"]
        rate = "–" if sm["pass_rate"] is None else f"{sm['pass_rate']:.1%}"
        parts.append(f"<tr><td>{s.name}</td><td>{_fmt(sm[s.primary])}</td><td>{_fmt(lo)} – {_fmt(hi)}</td>"
                     f"<td>{rate}</td><td>{sm['threshold']:g}</td><td>{sm['scored_rows']}</td>"
                     f"<td>{sm['errored_rows']}</td><td>{sm['skipped_rows']}</td></tr>")
    # Small multiples in a grid: each chart in its own cell, titled by a caption outside the
    # drawing and resized with its cell (responsive), so nothing is cut or drawn over its neighbour.
    parts.append("</table><h2>Distributions</h2><div class='charts'>")
    for k, s in enumerate(res.specs):
        fig = distribution(res, s)
        chart = fig.to_html(full_html=False, include_plotlyjs=(k == 0), default_width="100%",
                            default_height=f"{CHART_HEIGHT}px", config={"responsive": True, "displayModeBar": False})
        parts.append(f"<figure class='chart'><figcaption>{html.escape(s.name)}</figcaption>{chart}</figure>")
    parts.append("</div>")
    parts.append("<h2>Rows</h2><table class='rows'><tr><th>#</th><th>query</th><th>response</th>"
                 + "".join(f"<th>{s.name}</th>" for s in res.specs) + "</tr>")
    for i in range(len(res.dataset)):
        c = res.dataset.canonical(i)
        query = c.get("query") or (res.dataset.turns(i)[-1].query if res.dataset.shape == "conversation" else "")
        response = c.get("response") or (res.dataset.turns(i)[-1].response if res.dataset.shape == "conversation" else "")
        cells = []
        for s in res.specs:
            cell = res.cells[s.name][i]
            verdict = res.passed(s, cell)
            cls = "" if verdict is None else ("pass" if verdict else "fail")
            note = (cell.reason or cell.error or "") if cell else "pending"
            cells.append(f"<td class='{cls}'><b>{_fmt(cell.value if cell else None)}</b><br>"
                         f"<small>{html.escape(note or '')}</small></td>")
        parts.append(f"<tr><td>{res.dataset.row_no(i)}</td><td>{html.escape(str(query or ''))}</td>"
                     f"<td>{html.escape(str(response or ''))}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ddd;padding:4px 8px;vertical-align:top;text-align:left}"
             "td.pass{background:#e8f5e9}td.fail{background:#ffebee}.rows td{max-width:28em}"
             ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,26em),1fr));gap:1.5em}"
             "figure.chart{margin:0;min-width:0;border:1px solid #eee;padding:.5em}"
             "figure.chart figcaption{font-weight:600;margin-bottom:.25em}")
    title = html.escape(str(run.get("name")))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style>"
            f"</head><body>{''.join(parts)}</body></html>")
