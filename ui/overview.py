"""The Metrics tab of the Results page: the run in one picture, distributions in a grid, threshold "what if"."""
from __future__ import annotations

import streamlit as st

from evaluators.read import charts_overview as charts
from evaluators.read.results import RunResults
from ui import loaders, state
from ui.widgets import count, panel_title


def target_control() -> float:
    """The pass rate a metric must reach to "meet" its threshold (in the URL when changed)."""
    pct = st.number_input("Target pass rate (%)", 0, 100, int(charts.DEFAULT_TARGET * 100), 5, key="target", width=220,
                          bind=state.URL, help="A metric meets its threshold when its pass rate reaches this share "
                          "of scored rows: green when the whole 95% interval is at or above it, red when the "
                          "whole interval is below, amber when the interval straddles it. Severity and label "
                          "metrics show their defect rate against 100% minus this.")
    return pct / 100


def run_overview(res: RunResults, target: float) -> None:
    """Every metric's pass (or defect) rate with its interval, coloured by the target, beside its row counts."""
    rates = [charts.rate_of(s, res.summary(s), target) for s in res.specs]
    shown = (tuple(sorted(res.thresholds.items())), target)
    st.vega_lite_chart(loaders.figure(res, "overview", shown, lambda: charts.overview(rates)), width="content")
    meets = sum(r.verdict == "meets" for r in rates)
    unsure = sum(r.verdict == "unsure" for r in rates)
    st.caption(f"{meets} of {count(len(rates), 'metric')} {'meets' if meets == 1 else 'meet'} the {target:.0%} target"
               + (f"; {unsure} too close to tell on these rows" if unsure else "")
               + ". Errored, skipped and pending rows are left out of every rate.")


def distributions(res: RunResults) -> None:
    """Small multiples: each metric's distribution, three to a row, titled with its summary, drawn as one
    chart (each chart element costs the browser its own set-up; one grid of six draws faster than six).
    Flagged rows are said under it."""
    titles = [panel_title(res, s) for s in res.specs]
    shown = (tuple(sorted(res.thresholds.items())), tuple((t, tuple(lines)) for t, lines in titles))
    st.vega_lite_chart(loaders.figure(res, "distributions", shown, lambda: charts.small_multiples(
        [charts.distribution(s, res.values(s.name), res.thresholds[s.name], t, empty(res, s))
         for s, t in zip(res.specs, titles)])))
    for s in res.specs:
        noted = res.summary(s).get("noted_rows")
        if noted:
            st.warning(f"{s.name}: {count(noted, 'row')} flagged. First: {res.first_note(s.name)}")


def empty(res: RunResults, spec) -> str:
    """What a metric's chart says while no row has a score: the judge is still to answer, or nothing came."""
    sm = res.summary(spec)
    return "waiting for the judge" if sm.get("pending_rows") else "no scored rows (errored or skipped)"


def what_if(res: RunResults, intro, cells: dict) -> None:
    """Under each metric's threshold slider, its pass (or defect) rate at every threshold with the
    current one marked, recomputed from stored scores.

    Args:
        intro: where the explanation goes (above the sliders).
        cells: metric name -> its slider's grid cell (from ``widgets.threshold_bar``).
    """
    specs = [s for s in res.specs if s.name in cells]
    if not specs:
        intro.caption("No metric of this run has a threshold to move: labels pass or fail as they are.")
        return
    intro.markdown("#### What if the threshold moved")
    intro.caption("Under each slider, the metric's pass rate (defect rate for severities) at every threshold, "
                  "recomputed from the stored scores; the threshold in force is marked. Moving a slider changes "
                  "the rates on every tab and nothing is re-run.")
    for spec in specs:
        defect = charts.rate_of(spec, res.summary(spec)).measure == "defect rate"  # severities, labels
        shown = (spec.name, res.thresholds[spec.name], defect)
        fig = loaders.figure(res, "what_if", shown, lambda spec=spec, defect=defect: charts.what_if(
            spec, res.threshold_curve(spec.name), res.thresholds[spec.name], defect, empty(res, spec)))
        cells[spec.name].vega_lite_chart(fig, width="stretch")


def refresh_while_running(run: dict) -> None:
    """While a run is active, re-draw the whole page once new results are stored (checked every 3 s),
    so the headline and charts fill in as metrics and rows finish instead of waiting for the end."""
    if run["status"] in ("queued", "running"):
        _watch(run["id"], _progress(run))


def _progress(run: dict | None) -> tuple:
    return (run["status"], run["tasks_done"], run["tasks_errored"]) if run else ()


@st.fragment(run_every=3.0)
def _watch(run_id: str, seen: tuple) -> None:
    from ui import loaders

    if _progress(loaders.run(run_id)) != seen:
        st.rerun(scope="app")  # the results loader is keyed by this progress: the rerun reads what is new
