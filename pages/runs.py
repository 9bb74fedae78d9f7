"""Runs: every evaluation in the store, newest first; pick one to read it."""
import hashlib

import streamlit as st

from ui import loaders, state, widgets as w

st.title("Runs")
with w.guard():
    runs = loaders.runs(st.query_params.get("run"))
    st.page_link("pages/new_run.py", label="Start a new evaluation", icon=":material/play_arrow:")
    if not runs:
        st.info("No runs yet. The bundled sample datasets are ready: start a new evaluation; classic metrics need no key.")
        st.stop()
    names = {d["id"]: d["name"] for d in loaders.datasets(st.query_params.get("dataset"))}
    table = [{"run": r["name"], "dataset": names.get(r["dataset_id"], r["dataset_id"]), "status": r["status"],
              "progress": (r["tasks_done"] + r["tasks_errored"]) / r["tasks_total"] if r["tasks_total"] else 0.0,
              "errored": r["tasks_errored"], "metrics": ", ".join(r["spec"]["metrics"]),
              "judge": (r["spec"].get("judge") or {}).get("model", "–"), "created": r["created_at"],
              "by": r.get("created_by") or "–"} for r in runs]
    # keyed by the runs listed: a selection made in an older list never names another run
    key = "runs.table." + hashlib.sha1(",".join(r["id"] for r in runs).encode()).hexdigest()[:12]
    event = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row", key=key,
                         column_config={"progress": st.column_config.ProgressColumn(min_value=0, max_value=1)})
    k = state.selected(event, len(runs))
    if k is not None:
        st.switch_page("pages/results.py", query_params={"run": runs[k]["id"]})
