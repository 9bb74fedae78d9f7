"""The Compare page's honest part: is a difference between two runs real (paired test, interval, rows
needed), and, for two judges of the same rows, how far they agree."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.read.results import RunResults
from ui import loaders


def _pts(v) -> str:
    return "–" if v is None else f"{100 * v:+.1f}"


def _interval(d, scale: float = 100.0, fmt: str = "+.1f") -> str:
    if d is None or d.low is None:
        return "–"
    return f"{scale * d.low:{fmt}} to {scale * d.high:{fmt}}"


def differences(found: list[dict]) -> None:
    """Per shared metric, a run against the baseline on the rows both scored (``evaluators.read.paired``): one
    sentence, and a table of the change in rate (points) and in mean with 95% intervals, p-values, rows needed."""
    if not found:
        return
    for rec in found:
        st.markdown(f"- {_escape(rec['sentence'])}")
    table = []
    for rec in found:
        if not rec["rows"]:
            continue
        r, m = rec["rate"], rec.get("mean")
        table.append({"metric": rec["metric"], "paired rows": f"{rec['rows']:,}",
                      f"Δ {rec['measure']} (points)": _pts(r.diff), "95% interval": _interval(r),
                      "p (McNemar)": f"{r.p_value:.3g}", "rows needed": f"{r.rows_needed:,}" if r.rows_needed else "–",
                      "Δ mean": "–" if m is None else f"{m.diff:+.3f}",
                      "Δ mean 95%": "–" if m is None else _interval(m, 1.0, "+.3f"),
                      "p (bootstrap)": "–" if m is None or m.p_value is None else f"{m.p_value:.3g}"})
    if table:
        st.table(pd.DataFrame(table).set_index("metric"))
        st.caption("Paired on the rows both runs scored. Rows needed: how many paired rows a change of that "
                   "size needs to be detected 4 times in 5 at the 5% level.")


def compare(base_run: dict, other_run: dict, base: RunResults, other: RunResults, k: int) -> None:
    diffs, agree = loaders.comparison(base_run, other_run, base, other, f"Run {k}")
    differences(diffs)
    judges(agree, base, k)


def _escape(text: str) -> str:
    from ui.rows import _md  # (the Markdown escape of our names: rows imports nothing of this module)

    return _md(text)


def judges(found: dict, base: RunResults, k: int) -> None:
    """Two judgings of the same rows (another judge model, prompt or day): agreement per judged metric."""
    if not found:
        return
    with st.expander(f"Judges compared: the baseline's judge against run {k}'s on the same rows"):
        rows = []
        for name, g in found.items():
            for key, label in (("kappa", "Cohen's κ (pass/fail)"), ("weighted_kappa", "weighted κ (scale)"),
                               ("spearman", "Spearman's ρ")):
                v, lo, hi = g[key]
                if v is not None:
                    rows.append({"metric": name, "statistic": label, "value": f"{v:.3f}",
                                 "95% interval": "–" if lo is None else f"{lo:.3f} to {hi:.3f}"})
            rows.append({"metric": name, "statistic": "same value on the scale", "value": f"{100 * g['agree']:.1f}%",
                         "95% interval": f"on {g['rows']:,} rows"})
        st.table(pd.DataFrame(rows).set_index(["metric", "statistic"]))
        for name, g in found.items():
            if g["disagree_most"]:
                st.caption(f"{name}: where they differ most (row: baseline → run {k})")
                st.text(", ".join(f"row {base.dataset.row_no(d['row'])}: {d['baseline']:g} → {d['other']:g}"
                                  for d in g["disagree_most"]))


def trend_section(base_run: dict, runs: list[dict]) -> None:
    """The baseline's dataset (or its run name) over every completed run of it: each metric's rate with its
    interval as a line, runs whose change from the one before is unlikely to be chance marked."""
    from evaluators.read.trend import trend, trend_chart

    same = [r for r in runs if r["dataset_id"] == base_run["dataset_id"] or r["name"] == base_run["name"]]
    if len(same) < 2:
        return
    st.markdown("#### Trend over runs of this dataset")
    loaded = [(r, loaders.results(r, {})) for r in same]
    for spec in loaded[0][1].specs:
        points = trend(loaded, spec.name)
        if len(points) < 2:
            continue
        st.vega_lite_chart(trend_chart(points, spec.name), width="stretch")
        marked = [f"{p['name']} ({100 * p['change']:+.1f} points, p = {p['p_value']:.2g})" for p in points if p["marked"]]
        st.caption("Unlikely to be chance: " + ", ".join(marked) if marked else
                   "No change between consecutive runs is beyond chance (McNemar's exact test, 5% level).")
