"""Pairwise inspector: one judged pair — the conversation, the checklist, both responses side by
side with each analysis, the verdict, and the swapped-order verdict where there is one."""
import streamlit as st

from ui import loaders, state, widgets as w, wildbench as wb

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Pairwise inspector")
with w.guard():
    runs = loaders.wildbench_runs("pairwise", st.query_params.get("run"))
    if not runs:
        st.info("No run with wildbench_pairwise yet. Under New evaluation, pick wildbench_pairwise on a dataset "
                "whose rows have a checklist and a second response (candidate_B) beside the response; each judged "
                "pair opens here.")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    ids = [r["id"] for r in runs]
    run_id = state.pick("Run", "run", ids, ids[0], format_func=w.run_label(runs))
    run = loaders.run(run_id)
    res = loaders.results(run, {})
    spec = next(s for s in res.specs if s.kind == "pairwise")
    pairs = wb.pairs_table(res, spec)
    only_flips = st.toggle("Only pairs whose verdict flipped with the order", key="flips", bind=state.URL)
    shown = pairs[pairs["flipped"] == True] if only_flips else pairs  # noqa: E712 — None is not a flip
    st.caption(f"{len(shown):,} of {w.count(len(pairs), 'pair')}")
    event = w.table(shown, {"reward_A": "%+g"}, key="pairs", on_select="rerun", selection_mode="single-row")
    k = state.selected(event, len(shown))
    if k is not None:
        state.write_row(int(shown.index[k]))
    row = state.read_row()
    if row is None or not 0 <= row < len(res.dataset):
        st.caption("Select a pair to read it.")
        st.stop()
    wb.pair_view(res, spec, row)
