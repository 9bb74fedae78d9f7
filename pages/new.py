"""New evaluation: dataset, metrics (built from the registry), thresholds, judge, estimate, start."""
import streamlit as st

from evaluators.api import prepare_run
from evaluators.core.registry import FAMILIES, all_metrics
from evaluators.run.spec import RunSpec
from evaluators.run.workers import spawn_worker
from ui import auth, judge_form, loaders, state, target_form, widgets as w, wildbench as wb

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("New evaluation")
with w.guard():
    saved, imported, last = loaders.datasets_to_judge(st.query_params.get("dataset"))
    if st.query_params.get("dataset") in imported:
        st.info("This dataset is an imported WildBench judgment set: its rows are verdicts a judge already gave, "
                "not answers to judge. Its scores are on the WildBench leaderboard.", icon=":material/info:")
        st.page_link("pages/leaderboard.py", label="Open the WildBench leaderboard", icon=":material/leaderboard:")
        st.stop()
    ids = [d["id"] for d in saved]
    # with no dataset in the link (the sidebar), the one this browser session chose last, then the one the newest
    # run judged, then the newest: the ticks kept below are for the data the user left, not whichever is newest
    kept = st.session_state.get("kept.new.dataset")
    did = state.pick("Dataset", "dataset", ids, next((d for d in (kept, last) if d in ids), next(iter(ids), None)),
                     format_func=w.dataset_label(saved))
    st.session_state["kept.new.dataset"] = did
    if not did:
        st.info("No dataset yet: upload one on the Datasets page.")
        st.stop()
    ds = loaders.dataset(did)
    loaders.saved_metrics()  # the team's own metrics (New metric page) join the picker
    missing = loaders.availability(did)
    target = target_form.answers_section(ds)  # questions only, or new answers asked for: a model answers first
    if target is not None:
        missing = target_form.without_response(missing)
    chosen = []
    for family, title in FAMILIES.items():
        specs = [s for s in all_metrics() if s.family == family]
        st.subheader(title)
        if not specs:
            st.caption("No metrics of this family are available yet.")
            continue
        cols = st.columns(4)
        for k, s in enumerate(specs):
            lacking = missing[s.name]
            help_text = w.plain(s.description) + (f" — needs {', '.join(lacking)}" if lacking else "")  # a tooltip is Markdown
            if lacking:  # unticked under a key of its own: a tick kept from a dataset that feeds it waits there
                cols[k % 4].checkbox(w.display_name(s), False, key=f"new.metric.{s.name}.unavailable", disabled=True,
                                     help=help_text)
                cols[k % 4].caption(f"needs {', '.join(lacking)}")
                continue
            # ticks and thresholds are kept for the browser session (Streamlit drops a widget's value once a
            # page without it is shown): back on this page in the same tab, the choice is as it was left
            if cols[k % 4].checkbox(w.display_name(s), key=f"new.metric.{s.name}", help=help_text, persist_state="session"):
                chosen.append(s)
    if not chosen:
        st.info("Pick at least one metric.")
        st.stop()
    st.subheader("Thresholds")
    thresholds = {}
    cols = st.columns(min(4, len(chosen)))
    for k, s in enumerate(chosen):
        lo, hi = s.score_range
        thresholds[s.name] = cols[k % len(cols)].number_input(
            f"{w.display_name(s)} passes at {'≥' if s.higher_is_better else '≤'}", float(lo), float(hi), float(s.default_threshold),
            1.0 if s.integer else 0.05, key=f"new.th.{s.name}", persist_state="session")
    options = {s.name: wb.metric_options(s) for s in chosen if s.run_options}  # e.g. WildBench's K, both orders
    judge, api_key = None, None
    if any(s.is_judge for s in chosen):
        st.subheader("Judge")
        judge, api_key = judge_form.judge_settings()
        if judge is None:
            st.stop()
    repeat, jury = judge_form.several(judge) if judge is not None else (1, [])
    spec = RunSpec([s.name for s in chosen], thresholds, judge, options=options, repeat=repeat, jury=jury)
    spec.validate()
    st.subheader("Before you start")
    cost = judge_form.estimate_panel(did, spec)  # the prices entered, batch mode, budget and the estimate
    name = st.text_input("Run name", key="new.name", placeholder=f"{ds.name} · {', '.join(spec.metrics)}")
    blocked = judge_form.failed_test(judge, api_key)  # Start waits for settings the judge answers
    if blocked:
        st.caption("The judge did not answer the connection test with these settings: change them, or test again.")
    if target is not None and (target.config is None or judge_form.failed_test(target.config, target.api_key, "target")):
        blocked = True
        st.caption("Give the target's model and address (and a setting its connection test passes) to start.")
    if st.button("Start evaluation", type="primary", key="new.start", disabled=blocked):
        store = loaders.store()
        if target is not None:  # the answers first, each asked once; stored as a dataset of their own
            answered = target_form.generate(did, target, cost)
            if answered is None:
                st.stop()
            did, cost = answered[0], {**cost, "target": answered[1]}
        run_id = prepare_run(store, f"ds:{did}", spec.metrics, judge, thresholds, name=name or None,
                             options=options, repeat=repeat, jury=jury, cost=cost)
        store.update_run(run_id, created_by=auth.current_user())
        spawn_worker(store, run_id, api_key)
        loaders.forget_lists()
        st.switch_page("pages/results.py", query_params={"run": run_id})
