"""A self-contained HTML report of a run: summary, charts and every row; opens offline."""
from __future__ import annotations

import html
import io
from typing import Any, Iterator, Sequence, TextIO

from evaluators.read.charts import distribution_svg
from evaluators.read.chunks import CHUNK_ROWS, row_chunks
from evaluators.read.results import RunResults

STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ddd;padding:4px 8px;vertical-align:top;text-align:left}"
         "td.pass{background:#e8f5e9}td.fail{background:#ffebee}.rows td{max-width:28em}"
         ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,26em),1fr));gap:1.5em}"
         "figure.chart{margin:0;min-width:0;border:1px solid #eee;padding:.5em}"
         "figure.chart figcaption{font-weight:600;margin-bottom:.25em}figure.chart svg{display:block;max-width:36em}")


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def _head(res: RunResults, run: dict[str, Any]) -> Iterator[str]:
    """The title, the run's facts and the summary table."""
    judge = (run.get("spec") or {}).get("judge") or {}
    head = [("Run", run.get("name")), ("Status", run.get("status")), ("Created", run.get("created_at")),
            ("Rows", len(res.dataset)), ("Judge", f"{judge.get('model')} ({judge.get('provider')})" if judge else "none")]
    title = html.escape(str(run.get("name")))
    yield f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head><body>"
    yield f"<h1>{title}</h1><table class='meta'>"
    yield from (f"<tr><th>{k}</th><td>{_fmt(v)}</td></tr>" for k, v in head)
    yield ("</table><h2>Summary</h2><table><tr><th>metric</th><th>mean</th><th>95% CI</th><th>pass rate</th>"
           "<th>threshold</th><th>scored</th><th>errored</th><th>skipped</th></tr>")
    for s in res.specs:
        sm = res.summary(s)
        lo, hi = sm[f"{s.primary}_ci95"]
        rate = "–" if sm["pass_rate"] is None else f"{sm['pass_rate']:.1%}"
        yield (f"<tr><td>{s.name}</td><td>{_fmt(sm[s.primary])}</td><td>{_fmt(lo)} – {_fmt(hi)}</td>"
               f"<td>{rate}</td><td>{sm['threshold']:g}</td><td>{sm['scored_rows']}</td>"
               f"<td>{sm['errored_rows']}</td><td>{sm['skipped_rows']}</td></tr>")
    yield "</table>"


def _charts(res: RunResults) -> Iterator[str]:
    """Small multiples in a grid: each chart in its own cell, titled by a caption outside the drawing and
    resized with its cell, so nothing is cut or drawn over its neighbour. Each is an SVG of its own
    (``charts.distribution_svg``): no script, a few kilobytes a chart."""
    yield "<h2>Distributions</h2><div class='charts'>"
    for s in res.specs:
        yield f"<figure class='chart'><figcaption>{html.escape(s.name)}</figcaption>{distribution_svg(res, s)}</figure>"
    yield "</div>"


def _row(res: RunResults, i: int) -> str:
    ds = res.dataset
    c = ds.canonical(i)
    query = c.get("query") or (ds.turns(i)[-1].query if ds.shape == "conversation" else "")
    response = c.get("response") or (ds.turns(i)[-1].response if ds.shape == "conversation" else "")
    cells = []
    for s in res.specs:
        cell = res.cell(s.name, i)
        verdict = res.passed(s, cell)
        cls = "" if verdict is None else ("pass" if verdict else "fail")
        note = (cell.reason or cell.error or "") if cell else "pending"
        cells.append(f"<td class='{cls}'><b>{_fmt(cell.value if cell else None)}</b><br>"
                     f"<small>{html.escape(note or '')}</small></td>")
    return (f"<tr><td>{ds.row_no(i)}</td><td>{html.escape(str(query or ''))}</td>"
            f"<td>{html.escape(str(response or ''))}</td>{''.join(cells)}</tr>")


def write_html_report(res: RunResults, run: dict[str, Any], out: TextIO, chunk: int = CHUNK_ROWS,
                      rows: Sequence[int] | None = None) -> None:
    """Write the report to ``out``, its rows a chunk at a time (``chunks.row_chunks``): the whole run is
    never in memory. Model and dataset text is escaped.

    Args:
        res: the run's results, thresholds applied.
        run: the stored run record (name, status, timestamps, spec).
        rows: only these rows listed (the summary and charts are still the whole run's, and say so).
    """
    for part in (*_head(res, run), *_charts(res)):
        out.write(part)
    some = "" if rows is None else f" ({len(rows):,} of {len(res.dataset):,}: the filtered rows; the summary above is every row's)"
    out.write(f"<h2>Rows{some}</h2><table class='rows'><tr><th>#</th><th>query</th><th>response</th>"
              + "".join(f"<th>{s.name}</th>" for s in res.specs) + "</tr>")
    for idx in row_chunks(res, chunk, rows):
        out.write("".join(_row(res, i) for i in idx))
    out.write("</table></body></html>")


def html_report(res: RunResults, run: dict[str, Any]) -> str:
    """The report as one HTML string (see :func:`write_html_report`; no script, so no network is needed).

    Args:
        res: the run's results, thresholds applied.
        run: the stored run record (name, status, timestamps, spec).
    """
    buf = io.StringIO()
    write_html_report(res, run, buf)
    return buf.getvalue()
