"""Compare runs: a baseline against other runs on the same rows — deltas, changed verdicts, side by side."""
import pandas as pd
import streamlit as st

from evaluators.read.charts_overview import number
from evaluators.read.compare import delta_tone, metric_deltas, readable_deltas, row_changes, shared_metrics
from ui import loaders, paired, rows, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Compare runs")
BETTER, WORSE = "color: #1b5e20; background-color: #e8f5e9", "color: #b71c1c; background-color: #ffebee"


def deltas_table(deltas: list[dict]) -> None:
    """Plain headers, percentages, and each delta coloured by whether it is an improvement."""
    frame = pd.DataFrame(readable_deltas(deltas))
    tones = pd.DataFrame("", index=frame.index, columns=frame.columns)
    for k, d in enumerate(deltas):
        for key, header in (("mean_delta", "Δ mean"), ("pass_rate_delta", "Δ pass rate")):
            tones.loc[k, header] = {1: BETTER, -1: WORSE}.get(delta_tone(d, key), "")
    st.table(frame.style.apply(lambda _: tones, axis=None).hide(axis="index"))


with w.guard():
    runs = loaders.completed_runs(st.query_params.get("base"))
    if len(runs) < 2:
        st.info("Two completed runs are needed to compare: run the same dataset again with another model's "
                "answers, another judge or other settings.")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    ids, label = [r["id"] for r in runs], w.run_label(runs)
    base_id = state.pick("Baseline", "base", ids, ids[-1], format_func=label)
    base_run = loaders.run(base_id)
    base = loaders.results(base_run, {})

    def aligned(r: dict) -> bool:  # same dataset, or the same number of rows (aligned by position)
        return r["id"] != base_id and (r["dataset_id"] == base_run["dataset_id"]
                                       or len(loaders.dataset(r["dataset_id"])) == len(base.dataset))

    same_rows = [r["id"] for r in runs if aligned(r)]
    others_ids = state.pick_many("Compare with", "runs", same_rows, format_func=label)
    trend_on = st.session_state.get("trend", state.read("trend", "") == "true")  # (its toggle is drawn below)
    trend_runs = paired.trend_runs(base_run, runs) if trend_on else []
    one = paired.thresholds_notice(base_run, [loaders.run(r) for r in others_ids] + trend_runs)  # first of all
    thresholds = base.thresholds if one else {}  # the baseline's for every run, or each run's own
    if st.toggle("Trend over every run of the baseline's dataset", key="trend", bind=state.URL):
        paired.trend_section(base_run, runs, thresholds)
    if not others_ids:
        st.info("Pick one or more runs on the same dataset (or on a dataset with as many rows, aligned by position).")
        st.stop()
    others = [loaders.results(loaders.run(r), thresholds) for r in others_ids]
    for k, (rid, other) in enumerate(zip(others_ids, others), 1):
        st.markdown(f"**Run {k}:**")
        st.text(label(rid))  # a run's name is data: text, not Markdown
        if loaders.run(rid)["dataset_id"] != base_run["dataset_id"]:
            st.caption("Different dataset: rows are aligned by position.")
        if shared_metrics(base, other):
            deltas_table(metric_deltas(base, other))
            paired.compare(base_run, loaders.run(rid), base, other, k)
        else:
            st.info(f"Run {k} and the baseline share no metric, so there is nothing to compare. Baseline: "
                    f"{', '.join(s.name for s in base.specs)}; run {k}: {', '.join(s.name for s in other.specs)}.")
    if not any(shared_metrics(base, o) for o in others):
        st.stop()
    changes = pd.DataFrame(row_changes(base, others))
    only = st.toggle("Show only differences", key="diff", bind=state.URL)
    shown = changes[changes["changed"]] if only else changes
    st.caption(f"{int(changes['changed'].sum())} of {len(changes)} rows changed verdict on some metric")
    verdicts = [c for c in shown.columns if c.endswith(" verdict")]  # coloured as on the Results page
    values = [c for c in shown.columns if " · " in c and c not in verdicts]
    styled = shown.rename(columns={"changed": "Changed"}).style.map(
        lambda v: rows.PASS_STYLE if v == "pass" else rows.FAIL_STYLE if v == "fail" else "", subset=verdicts
    ).format(number, subset=values)  # a score of 4 as 4, not the Styler's "4.000000"
    event = st.dataframe(styled, hide_index=True, on_select="rerun", selection_mode="single-row", key="compare.rows")
    k = state.selected(event, len(shown))
    if k is not None:
        state.write_row(int(shown.index[k]))  # the row's index in the dataset, not its place in this table
    row = state.read_row()
    if row is not None and 0 <= row < len(changes):
        titles = ["Baseline"] + [f"Run {k}" for k in range(1, len(others) + 1)]
        one_dataset = all(loaders.run(r)["dataset_id"] == base_run["dataset_id"] for r in others_ids)
        paired.row_compared([base] + others, titles, row, shared_inputs=one_dataset)
