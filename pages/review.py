"""Review a run: one row at a time with the keyboard, people's verdicts beside the judge's, and how far they agree."""
import streamlit as st

from evaluators.core.registry import all_metrics
from evaluators.core.scales import reviewable
from evaluators.run.spec import run_metric
from ui import align_tab, loaders, review_page, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Review")
with w.guard():
    known = {s.name for s in all_metrics()}
    # only runs with a judged metric: a classic metric (F1, BLEU...) is a formula, with no verdict to answer
    runs = [r for r in loaders.runs(st.query_params.get("run")) if r["status"] == "completed"
            and any(reviewable(run_metric(r["spec"], m)) for m in (r["spec"] or {}).get("metrics", [])
                    if m in known or m in ((r["spec"] or {}).get("definitions") or {}))]
    if not runs:
        st.info("No completed run with a judged metric (coherence, groundedness, violence...) to review yet: the "
                "sample's classic metrics (F1, BLEU, ROUGE) are formulas over the text, with no verdict for a "
                "person to answer. A judged run needs a judge model (any OpenAI-compatible server, e.g. Ollama).")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    run_id = w.run_picker(runs)
    run = loaders.run(run_id)
    res = loaders.results(run, w.threshold_bar(run, shown=False))
    if not any(reviewable(s) for s in res.specs):
        st.info("This run has no judged metric: classic metrics (F1, BLEU, ROUGE...) are formulas over the text, "
                "with no verdict for a person to answer. Pick a run with a judged metric (coherence, groundedness, "
                "violence...), or start one: it needs a judge model (any OpenAI-compatible server, e.g. Ollama).")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    tab_review, tab_agreement, tab_queues, tab_align = st.tabs(["Review", "Agreement", "Queues", "Align"], key="view",
                                                               bind=state.URL)
    if tab_review.open is not False:
        with tab_review:
            who = review_page.reviewer()  # asked here only: reading the agreement needs no name
            queue = review_page.pick_queue(run_id, loaders.queues(run_id), who) if who else None
            if who and queue is None and state.read_row() is None:
                st.info("This run has no review queue yet: make one (which rows, for which metrics, who reviews "
                        "them) in the Queues tab, or open a row from the Results page to review it alone.")
            elif who:
                review_page.review_rows(run, res, queue, who)
    if tab_agreement.open is not False:
        with tab_agreement:
            review_page.agreement_panel(run, res)
    if tab_queues.open is not False:
        with tab_queues:
            review_page.new_queue_form(run, res, review_page.reviewer_if_known())
    if tab_align.open is not False:
        with tab_align:
            align_tab.align_panel(run, res)
