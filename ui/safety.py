"""Widgets of the risk and safety pages. Everything a model or a dataset wrote is shown as text."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.core.kinds.severity import LEVELS
from ui import state
from ui.widgets import count, metric_cards, rate_card, table

LEVEL_COLOURS = {"Very low": "#2e7d32", "Low": "#9ccc65", "Medium": "#ffa000", "High": "#c62828"}
PCT = "percent"  # a rate's format in ui.widgets.table


def severity_threshold(run: dict, specs: list) -> dict[str, float]:
    """One severity threshold (0-7) for every harm of the run, in the URL as ``sev``; the verdicts and
    defect rates below are recomputed from stored severities."""
    harms = [s for s in specs if s.kind == "severity"]
    if not harms:
        return {}
    own = int(run["spec"]["thresholds"].get(harms[0].name, harms[0].default_threshold))
    value = st.slider("Severity threshold: a row is a defect above", 0, 7, own, 1, key="sev", bind=state.URL,
                      help="0-1 Very low · 2-3 Low · 4-5 Medium · 6-7 High. Nothing is re-run.")
    return {s.name: float(value) for s in harms}


def headline(overview: list[dict], rows: int) -> None:
    """A card per harm and label: its defect rate, under it the threshold, the rows it rests on and the
    interval (ui.widgets.rate_card); the cards wrap, never cut."""
    cards = []
    for o in overview:
        if ":" in o["measure"]:
            continue  # XPIA's categories: in the chart and the table
        rule = "labelled true" if o["threshold"] is None else f"> {o['threshold']:g}"
        cards.append(rate_card(f"{o['measure']} defect rate", o["defect_rate"], o["ci95_low"], o["ci95_high"],
                               o["scored"], rows, o["errored"],
                               f"{o['defects']:,} of {count(o['scored'], 'scored row')} are defects; "
                               f"{o['errored']:,} errored (left out)", rule))
    metric_cards(cards)


def defect_chart(overview: list[dict], key: str = "safety.defects") -> None:
    """The headline view: every harm, label and XPIA category's defect rate with its 95% interval."""
    import plotly.graph_objects as go

    shown = [o for o in overview if o["defect_rate"] is not None]
    if not shown:
        st.info("No scored rows yet.")
        return
    fig = go.Figure(go.Bar(
        x=[o["defect_rate"] for o in shown], y=[o["measure"] for o in shown], orientation="h",
        marker_color=["#c62828" if ":" not in o["measure"] else "#ef9a9a" for o in shown],
        error_x=dict(type="data", array=[o["ci95_high"] - o["defect_rate"] for o in shown],
                     arrayminus=[o["defect_rate"] - o["ci95_low"] for o in shown], color="#333"),
        hovertemplate="%{y}: %{x:.1%}<extra></extra>"))
    fig.update_layout(height=80 + 36 * len(shown), margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(range=[0, 1], tickformat=".0%", title="defect rate (95% interval)"),
                      yaxis=dict(autorange="reversed"))
    st.plotly_chart(fig, key=key, config={"displayModeBar": False})


def overview_table(overview: list[dict]) -> None:
    table(pd.DataFrame(overview), {"defect_rate": PCT, "ci95_low": PCT, "ci95_high": PCT, "threshold": "%g"})


def levels_chart(levels: list[dict]) -> None:
    """How many scored rows of each harm fall in each of the four levels."""
    import plotly.graph_objects as go

    if not levels:
        return
    frame = pd.DataFrame(levels)
    fig = go.Figure()
    for _, name in LEVELS:
        part = frame[frame["level"] == name]
        fig.add_bar(x=part["rows"], y=part["metric"], name=name, orientation="h", marker_color=LEVEL_COLOURS[name])
    fig.update_layout(barmode="stack", height=120 + 40 * frame["metric"].nunique(),
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="rows",
                      # above the plot: below it, the legend covered the x-axis ticks
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    st.plotly_chart(fig, key="safety.levels", config={"displayModeBar": False})
    table(frame.pivot(index="metric", columns="level", values="rows")[[n for _, n in LEVELS]], hide_index=False)


PAGE = 100  # rows a table shows at once


def rows_page(n_rows: int) -> tuple[int, int]:
    """Which rows to show: a page number in the URL (``spage``); returns (start, stop)."""
    pages = max(1, -(-n_rows // PAGE))
    page = st.number_input(f"Page (of {pages}, {PAGE} rows each)", 1, pages, 1, key="spage", bind=state.URL)
    return (int(page) - 1) * PAGE, int(page) * PAGE


def rows_table(rows: list[dict]) -> None:
    widths = {c: "large" if c in ("response", "query") else "medium"
              for c in (rows[0] if rows else {}) if c in ("query", "response") or c.endswith("reason")}
    table(pd.DataFrame(rows), key="safety.rows", widths=widths)


def row_detail(rows: list[dict]) -> None:
    """One row of the page, read as plain text (a model's reasoning is never rendered as Markdown)."""
    if not rows:
        return
    numbers = [str(r["#"]) for r in rows]
    picked = state.pick("Read row", "srow", numbers, numbers[0])
    rec = rows[numbers.index(picked)]
    for k in ("query", "response"):
        if rec.get(k):
            st.caption(k)
            st.text(rec[k])
    for k, v in rec.items():
        if k in ("#", "query", "response"):
            continue
        st.text(f"{k}: {'' if v is None else v}")


def upia(cmp) -> None:
    """A direct-attack comparison: per harm the three defect rates, unpaired rows, the paired rows."""
    m = cmp.metrics
    cards = [("Paired rows", str(m["paired_rows"]), None), ("Unpaired rows", str(m["unpaired_rows"]), None)]
    lines = []
    for h in cmp.harms:
        for what in ("baseline", "attack", "direct_attack"):
            k = f"{h}.{what}_defect_rate"
            lines.append({"harm": h, "rate": what.replace("_", " "), "defect_rate": m[k],
                          "ci95_low": m[f"{k}_ci95_low"], "ci95_high": m[f"{k}_ci95_high"]})
    for h in cmp.harms:
        v = m[f"{h}.direct_attack_defect_rate"]
        cards.append((f"{h} direct-attack defect rate", "–" if v is None else f"{v:.1%}",
                      f"{m[f'{h}.direct_attack_defects']} of {count(m[f'{h}.scored_pairs'], 'pair')} scored in both "
                      f"runs (threshold {m[f'{h}.threshold']:g}); {count(m[f'{h}.errored_pairs'], 'pair')} with an "
                      "error left out"))
    metric_cards(cards)
    table(pd.DataFrame(lines), {"defect_rate": PCT, "ci95_low": PCT, "ci95_high": PCT})
    for side, ids in (("baseline", cmp.unpaired_baseline), ("attack", cmp.unpaired_attack)):
        if ids:
            st.caption(f"Only in the {side} run ({count(len(ids), 'row')}):")
            st.code(", ".join(map(str, ids)), language=None)
    table(pd.DataFrame(cmp.rows), key="upia.rows")
