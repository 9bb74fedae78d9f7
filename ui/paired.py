"""The Compare page's honest part: is a difference between two runs real (paired test, interval, rows
needed), and, for two judges of the same rows, how far they agree."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.read.paired import judge_changes, p_text
from evaluators.read.results import RunResults
from ui import loaders, state
from ui.widgets import name_of


def _p(p) -> str:  # a table's p-value column: "0.0156", "< 0.001"
    return p_text(p).removeprefix("p = ").removeprefix("p ")


def _mean(v) -> str:  # a change in mean: "+0.25", and a whole one as a whole number ("0", "+1")
    return f"{v:+.3f}" if not float(v).is_integer() else (f"{int(v):+d}" if v else "0")


def _pts(v) -> str:
    return "–" if v is None else f"{100 * v:+.1f}"


def _interval(d, scale: float = 100.0, fmt: str = "+.1f") -> str:
    if d is None or d.low is None:
        return "–"
    return f"{scale * d.low:{fmt}} to {scale * d.high:{fmt}}"


def thresholds_notice(base_run: dict, runs: list[dict]) -> bool:
    """Said before any number when the baseline and ``runs`` (those compared, those of the trend) count passes
    at different thresholds, with the offer to read every run at the baseline's (thresholds are applied at read
    time: nothing is re-run). Returns whether the reader took it."""
    from evaluators.read.compare import run_rules, threshold_differences

    found = threshold_differences(base_run, list({r["id"]: r for r in runs}.values()))
    if not found:
        return False
    own = run_rules(base_run)
    lines = [f"{name}: {own[name]} in the baseline; " + "; ".join(f"{rule} in {_escape(r['name'])}" for r, rule in got)
             for name, got in found.items()]
    st.warning("These runs count a pass at different thresholds, so their pass rates differ even where no answer "
               "did:\n\n" + "\n".join(f"- {line}" for line in lines), icon=":material/rule:")
    one = st.toggle("Compare at one threshold: the baseline's for every run", key="one_threshold", bind=state.URL)
    if one:
        st.caption(_escape("Every run is read at the baseline's thresholds (" +
                           ", ".join(f"{name} {own[name]}" for name in found) + "); nothing is re-run."))
    return one


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
        a, b = rec["passes_at"]
        table.append({"metric": name_of(rec["metric"]), "passes at": a if a == b else f"{a} → {b}",
                      "paired rows": f"{rec['rows']:,}",
                      f"Δ {rec['measure']} (points)": _pts(r.diff), "95% interval": _interval(r),
                      "p (McNemar)": _p(r.p_value), "rows needed": f"{r.rows_needed:,}" if r.rows_needed else "–",
                      "Δ mean": "–" if m is None else _mean(m.diff),
                      "Δ mean 95%": "–" if m is None or m.low is None else f"{_mean(m.low)} to {_mean(m.high)}",
                      "p (bootstrap)": "–" if m is None or m.p_value is None else _p(m.p_value)})
    if table:
        st.table(pd.DataFrame(table).set_index("metric"))
        st.caption("Paired on the rows both runs scored. Rows needed: how many paired rows a change of that "
                   "size needs to be detected 4 times in 5 at the 5% level.")


def compare(base_run: dict, other_run: dict, base: RunResults, other: RunResults, k: int) -> None:
    """The paired differences, then the two judges' agreement on each judged metric whose judge (model,
    template, settings) differs between the runs: the same judge agreeing with itself, its answers often
    from the cache, would only measure the thresholds."""
    changed = {s.name: judge_changes(base_run["spec"], other_run["spec"], s.name) for s in base.specs
               if s.is_judge and s.name in other.thresholds}
    differ = sorted(n for n, what in changed.items() if what)
    diffs, agree = loaders.comparison(base_run, other_run, base, other, names(base_run, other_run, k), differ)
    differences(diffs)
    judges(agree, base, k, {n: changed[n] for n in differ})
    same = [n for n, what in changed.items() if not what]
    if same:
        st.caption(_escape(f"The same judge (model, template and settings) judged {', '.join(same)} in both runs: "
                           "there are not two judges to compare there."))


def names(base_run: dict, other_run: dict, k: int) -> tuple[str, str]:
    """What the sentences call the two runs: two variants of one experiment by their names ("prompt B", "prompt
    A"), else "Run k" and "the baseline"."""
    bt, ot = base_run["spec"].get("target") or {}, other_run["spec"].get("target") or {}
    if bt.get("variant") and ot.get("variant") and bt.get("experiment") == ot.get("experiment"):
        return ot["variant"], bt["variant"]
    return f"Run {k}", "the baseline"


def _escape(text: str) -> str:
    from ui.rows import _md  # (the Markdown escape of our names: rows imports nothing of this module)

    return _md(text)


def judges(found: dict, base: RunResults, k: int, what: dict[str, list[str]]) -> None:
    """Two judges of the same rows (another judge model, template or settings: ``what`` differs, per
    metric): agreement per judged metric."""
    if not found:
        return
    with st.expander(f"Judges compared: the baseline's judge against run {k}'s on the same rows"):
        said = [f"{name}: the {' and '.join(what[name])} {'differs' if len(what[name]) == 1 else 'differ'}"
                for name in found if what.get(name)]
        st.caption(_escape("; ".join(said)))
        rows = []
        for name, g in found.items():
            for key, label in (("kappa", "Cohen's κ (pass/fail)"), ("weighted_kappa", "weighted κ (scale)"),
                               ("spearman", "Spearman's ρ")):
                v, lo, hi = g[key]
                if v is not None:
                    rows.append({"metric": name_of(name), "statistic": label, "value": f"{v:.3f}",
                                 "95% interval": "–" if lo is None else f"{lo:.3f} to {hi:.3f}"})
            rows.append({"metric": name_of(name), "statistic": "same value on the scale", "value": f"{100 * g['agree']:.1f}%",
                         "95% interval": f"on {g['rows']:,} rows"})
        st.table(pd.DataFrame(rows).set_index(["metric", "statistic"]))
        for name, g in found.items():
            if g["disagree_most"]:
                st.caption(f"{name}: where they differ most (row: baseline → run {k})")
                st.text(", ".join(f"row {base.dataset.row_no(d['row'])}: {d['baseline']:g} → {d['other']:g}"
                                  for d in g["disagree_most"]))


def row_compared(results: list[RunResults], titles: list[str], i: int, shared_inputs: bool) -> None:
    """Row ``i`` in every run: first each shared metric's value and verdict per run, the metrics whose value or
    verdict differs between runs first; then the row's inputs, once when the runs share them (``shared_inputs``:
    one dataset), else per run; then each run's judge reasoning side by side, the differing metrics first."""
    from evaluators.read.compare import verdict
    from ui import rows

    base = results[0]
    st.subheader(f"Row {base.dataset.row_no(i)}")
    names = [s.name for s in base.specs if all(s.name in r.thresholds for r in results[1:])]
    seen = {}
    for name in names:
        cells = [r.cell(name, i) for r in results]
        values = [None if c is None or c.status != "ok" else c.value for c in cells]
        seen[name] = [f"{rows.shown(v)} · {verdict(r, name, i)}" if v is not None else verdict(r, name, i)
                      for r, v in zip(results, values)]
    differ = [n for n in names if len(set(seen[n])) > 1]
    same = [n for n in names if n not in differ]
    st.dataframe(pd.DataFrame([{"metric": name_of(n), "differs": "yes" if n in differ else "", **dict(zip(titles, seen[n]))}
                               for n in differ + same]), hide_index=True)
    if shared_inputs:
        with st.expander("The row's inputs (the same in every run)", expanded=True):
            rows.row_inputs(base, i, scores=False)
    cols = st.columns(len(results))
    for col, res, title in zip(cols, results, titles):
        with col:
            st.markdown(f"#### {title}")
            if not shared_inputs:
                rows.row_inputs(res, i, scores=False)
            if differ:
                rows.metric_details(res, i, only=differ)
            if same:
                st.caption("The same value and verdict in every run:")
                rows.metric_details(res, i, only=same)


def trend_runs(base_run: dict, runs: list[dict]) -> list[dict]:
    """The runs of the trend: those of the baseline's dataset, or of its name."""
    return [r for r in runs if r["dataset_id"] == base_run["dataset_id"] or r["name"] == base_run["name"]]


def trend_section(base_run: dict, runs: list[dict], thresholds: dict[str, float]) -> None:
    """The baseline's dataset (or its run name) over every completed run of it: each metric's rate with its
    interval as a line by date, runs whose change from the one before is unlikely to be chance marked.
    ``thresholds``: applied to every run (the baseline's, for the comparison at one threshold), else each
    run's own."""
    same = trend_runs(base_run, runs)
    if len(same) < 2:
        return
    st.markdown("#### Trend over runs of this dataset")
    for name, points, chart in loaders.trend(same, thresholds):
        st.vega_lite_chart(chart, width="stretch")
        marked = [f"{p['name']} ({100 * p['change']:+.1f} points, {p_text(p['p_value'])})" for p in points if p["marked"]]
        moved = [p["name"] for p in points if p["threshold_changed"]]
        st.caption(_escape(("Unlikely to be chance: " + ", ".join(marked) if marked else
                    "No change between consecutive runs is beyond chance (McNemar's exact test, 5% level).")
                   + (f" Threshold changed at: {', '.join(moved)} (not compared)." if moved else "")))
