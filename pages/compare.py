"""Compare runs: a baseline against other runs on the same rows — deltas, changed verdicts, side by side."""
import pandas as pd
import streamlit as st

from evaluators.compare import metric_deltas, row_changes
from ui import loaders, state, widgets as w

st.title("Compare runs")
with w.guard():
    runs = [r for r in loaders.runs(st.query_params.get("base")) if r["status"] == "completed"]
    if len(runs) < 2:
        st.info("Two completed runs are needed to compare.")
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
    if not others_ids:
        st.info("Pick one or more runs on the same dataset (or on a dataset with as many rows, aligned by position).")
        st.stop()
    others = [loaders.results(loaders.run(r), {}) for r in others_ids]
    for k, (rid, other) in enumerate(zip(others_ids, others), 1):
        st.markdown(f"**Run {k}:**")
        st.text(label(rid))  # a run's name is data: text, not Markdown
        if loaders.run(rid)["dataset_id"] != base_run["dataset_id"]:
            st.caption("Different dataset: rows are aligned by position.")
        st.dataframe(pd.DataFrame(metric_deltas(base, other)), hide_index=True,
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in
                                    ("base_mean", "mean", "mean_delta", "base_pass_rate", "pass_rate", "pass_rate_delta")})
    changes = pd.DataFrame(row_changes(base, others))
    only = st.toggle("Show only differences", key="diff", bind=state.URL)
    shown = changes[changes["changed"]] if only else changes
    st.caption(f"{int(changes['changed'].sum())} of {len(changes)} rows changed verdict on some metric")
    event = st.dataframe(shown, hide_index=True, on_select="rerun", selection_mode="single-row", key="compare.rows")
    k = state.selected(event, len(shown))
    if k is not None:
        state.write("row", int(shown.iloc[k]["row"]))
    row = state.read("row", None, int)
    if row is not None and row < len(changes):
        cols = st.columns(1 + len(others))
        for col, res, title in zip(cols, [base] + others, ["Baseline"] + [f"Run {k}" for k in range(1, len(others) + 1)]):
            with col:
                st.markdown(f"### {title}")
                w.detail(res, row)
