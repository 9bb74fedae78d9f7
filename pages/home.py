"""Home: what evaldash does, the three steps, and a first result from a bundled sample in one click."""
import streamlit as st

from evaluators.api import prepare_run
from evaluators.run.workers import spawn_worker
from ui import auth, loaders, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

SAMPLE = "rag_single_turn.jsonl"  # bundled in data/, stored on first start
SAMPLE_METRICS = ["f1_score", "bleu", "rouge"]  # classic metrics: computed here, no judge, no key

st.title("evaldash")
st.markdown("Score what your LLM application answered, with an LLM judge or with classic reference metrics.  \n"
            "Read every metric at a glance, open any row to see why it passed or failed, compare runs and "
            "share the report.")
with w.guard():
    c1, c2, c3 = st.columns(3)
    with c1.container(border=True, height="stretch"):  # the three cards as tall as the tallest
        st.markdown("**1 · Dataset**")
        st.caption("Upload JSONL, JSON, CSV or Parquet: queries, responses, context, ground truth or conversations.")
        st.page_link("pages/datasets.py", label="Add a dataset", icon=":material/dataset:")
    with c2.container(border=True, height="stretch"):  # the three cards as tall as the tallest
        st.markdown("**2 · Evaluation**")
        st.caption("Pick metrics and thresholds, point at a judge model if a metric needs one, see the cost, start.")
        st.page_link("pages/new.py", label="Start an evaluation", icon=":material/play_arrow:")
    with c3.container(border=True, height="stretch"):  # the three cards as tall as the tallest
        st.markdown("**3 · Results**")
        st.caption("Pass rates with intervals, score distributions, every row with the judge's reasoning.")
        st.page_link("pages/runs.py", label="Read the results", icon=":material/list:")
    st.subheader("Try it now")
    sample = next((d for d in loaders.datasets() if d["name"] == SAMPLE), None)
    if sample is None:
        st.info("The bundled sample is not in this store; add a dataset to begin.")
    else:
        st.caption(f"Score the bundled sample ({w.count(sample['rows'], 'question')} with answers and references) with "
                   f"{', '.join(SAMPLE_METRICS)}: classic metrics, no judge and no API key needed.")
        if st.button("Evaluate the sample", type="primary", icon=":material/play_arrow:", key="home.sample"):
            store = loaders.store()
            run_id = prepare_run(store, f"ds:{sample['id']}", SAMPLE_METRICS,
                                 name=f"Sample · {SAMPLE} · classic metrics")
            store.update_run(run_id, created_by=auth.current_user())
            spawn_worker(store, run_id)
            loaders.forget_lists()
            st.session_state["kept.new.dataset"] = sample["id"]  # New evaluation opens on the data just used
            st.switch_page("pages/results.py", query_params={"run": run_id})
    runs = loaders.runs()
    if runs:
        latest = runs[0]
        st.caption("Your latest run:")
        st.text(f"{latest['name']} · {w.status_word(latest)}")  # a run's name is data: text, not Markdown
        st.page_link("pages/results.py", label="Open its results", query_params={"run": latest["id"]},
                     icon=":material/bar_chart:")
