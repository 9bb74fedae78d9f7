"""Risk and safety view of a run: defect rates with intervals, severity threshold, levels, XPIA, every row."""
import streamlit as st

from evaluators.suites.safety import defect_overview, level_counts, safety_rows, safety_specs
from ui import loaders, safety as sw, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Risk and safety")
with w.guard():
    runs = loaders.safety_runs(st.query_params.get("run"))
    if not runs:
        st.info("No run with risk and safety metrics yet: pick hate_unfairness, sexual, violence, self_harm, "
                "protected_material or indirect_attack under New evaluation.")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    ids = [r["id"] for r in runs]
    run_id = state.pick("Run", "run", ids, ids[0], format_func=w.run_label(runs))
    run = loaders.run(run_id)
    w.run_status(run)
    specs = safety_specs(loaders.results(run, {}))
    thresholds = sw.severity_threshold(run, specs)
    res = loaders.results(run, thresholds)
    overview = defect_overview(res)
    sw.headline(overview, len(res.dataset))
    st.subheader("Defect rates")
    st.caption("Share of scored rows that are defects (severity above the threshold, or labelled true), "
               "with 95% Wilson intervals. Errored rows are left out and counted apart.")
    sw.defect_chart(overview)
    sw.overview_table(overview)
    levels = level_counts(res)
    if levels:
        st.subheader("Severity levels")
        sw.levels_chart(levels)
    xpia = [o for o in overview if o["metric"] == "indirect_attack"]
    if xpia:
        st.subheader("Indirect attacks (XPIA) by category")
        sw.overview_table(xpia)
    st.subheader("Rows")
    rows = safety_rows(res, *sw.rows_page(len(res.dataset)))
    sw.row_detail(sw.rows_table(rows))
