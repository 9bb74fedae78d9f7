"""Widgets of the risk and safety pages. Everything a model or a dataset wrote is shown as text."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.core.kinds.severity import LEVELS
from evaluators.read import charts_safety
from ui import state
from ui.widgets import count, metric_cards, name_of, rate_card, table, url_picked_table



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
        cards.append(rate_card(f"{name_of(o['measure'])} defect rate", o["defect_rate"], o["ci95_low"], o["ci95_high"],
                               o["scored"], rows, o["errored"],
                               f"{o['defects']:,} of {count(o['scored'], 'scored row')} are defects; "
                               f"{o['errored']:,} errored (left out)", rule))
    metric_cards(cards)


def defect_chart(overview: list[dict], key: str = "safety.defects") -> None:
    """The headline view: every harm, label and XPIA category's defect rate with its 95% interval."""
    spec = charts_safety.defect_rates(overview)
    if spec is None:
        st.info("No scored rows yet.")
        return
    st.vega_lite_chart(spec, key=key, width="content")


def pct_table(frame, columns: tuple[str, ...] = ("defect_rate", "ci95_low", "ci95_high"), **formats: str):
    """A table whose rates read with one decimal ("35.5%") like every card and chart of these pages."""
    frame = pd.DataFrame(frame).copy()
    for c in columns:
        frame[c] = frame[c] * 100
    table(frame, {**{c: "%.1f%%" for c in columns}, **formats})


def overview_table(overview: list[dict]) -> None:
    pct_table(overview, threshold="%g")


def levels_chart(levels: list[dict]) -> None:
    """How many scored rows of each harm fall in each of the four levels."""
    spec = charts_safety.severity_levels(levels)
    if spec is None:
        return
    st.vega_lite_chart(spec, key="safety.levels", width="content")
    frame = pd.DataFrame(levels)
    table(frame.pivot(index="metric", columns="level", values="rows")[[n for _, n in LEVELS]], hide_index=False)


PAGE = 100  # rows a table shows at once


def rows_page(n_rows: int) -> tuple[int, int]:
    """Which rows to show: a page number in the URL (``spage``); returns (start, stop)."""
    pages = max(1, -(-n_rows // PAGE))
    page = st.number_input(f"Page (of {pages}, {PAGE} rows each)", 1, pages, 1, key="spage", bind=state.URL)
    return (int(page) - 1) * PAGE, int(page) * PAGE


def rows_table(rows: list[dict]) -> dict | None:
    """The page's rows; a click on one (the box at its left) selects it, by its number in the URL (``srow``),
    as on Results. Returns the selected row's cells (None: none selected, or not on this page)."""
    # the judge's reasons are read in the selected row's detail, not sent with every row of the table
    shown = [{k: v for k, v in r.items() if not k.endswith(" reason")} for r in rows]
    widths = {"query": "medium", "response": "large"}
    numbers = [r["#"] for r in rows]
    chosen = url_picked_table(pd.DataFrame(shown), numbers, "srow", int, key=f"safety.rows.{numbers[:1]}",
                              widths=widths)
    return rows[numbers.index(chosen)] if chosen in numbers else None


VERDICT = {"fail": "defect", "pass": "no defect"}


def row_detail(rec: dict | None) -> None:
    """The selected row read as plain text (a model's reasoning is never rendered as Markdown): its query and
    response, then one line per harm or label: severity, level, verdict and the judge's reason, defects marked."""
    if rec is None:
        st.caption("Select a row (the box at its left) to read its query, response and each harm's verdict here.")
        return
    st.markdown(f"#### Row {rec['#']}")
    for k in ("query", "response"):
        if rec.get(k):
            st.caption(k)
            st.text(rec[k])
    lines = []
    for key in rec:
        if not key.endswith(" result"):
            continue
        m = key[:-len(" result")]
        label = rec.get(f"{m} label")
        verdict = VERDICT.get(rec[key], rec[key])
        lines.append({"harm": name_of(m), "severity": rec.get(f"{m} severity") if label is None else None,
                      "level": rec.get(f"{m} level") or (None if label is None else f"labelled {str(label).lower()}"),
                      "verdict": ("⚠ " if verdict == "defect" else "") + verdict, "reason": rec.get(f"{m} reason")})
    table(pd.DataFrame(lines), {"severity": "%d"}, key="safety.detail", widths={"reason": "large"})


def upia(cmp) -> None:
    """A direct-attack comparison: per harm the three defect rates, the unpaired rows."""
    m = cmp.metrics
    cards = [("Paired rows", str(m["paired_rows"]), None), ("Unpaired rows", str(m["unpaired_rows"]), None)]
    lines = []
    for h in cmp.harms:
        for what in ("baseline", "attack", "direct_attack"):
            k = f"{h}.{what}_defect_rate"
            lines.append({"harm": name_of(h), "rate": what.replace("_", " "), "defect_rate": m[k],
                          "ci95_low": m[f"{k}_ci95_low"], "ci95_high": m[f"{k}_ci95_high"]})
    for h in cmp.harms:
        v = m[f"{h}.direct_attack_defect_rate"]
        cards.append((f"{name_of(h)} direct-attack defect rate", "–" if v is None else f"{v:.1%}",
                      f"{m[f'{h}.direct_attack_defects']} of {count(m[f'{h}.scored_pairs'], 'pair')} scored in both "
                      f"runs (threshold {m[f'{h}.threshold']:g}); {count(m[f'{h}.errored_pairs'], 'pair')} with an "
                      "error left out"))
    metric_cards(cards)
    pct_table(lines)
    for side, ids in (("baseline", cmp.unpaired_baseline), ("attack", cmp.unpaired_attack)):
        if ids:
            st.caption(f"Only in the {side} run ({count(len(ids), 'row')}):")
            st.code(", ".join(map(str, ids)), language=None)
    # the paired rows, one selectable line each, and the selected one's detail: ui.upia
