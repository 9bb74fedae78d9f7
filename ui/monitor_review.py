"""The Monitoring page's "Review a sample" control (issue 32): draws k judged traces a window of the series shown
(``evaluators.review.production.sample_production``, one implementation with ``monitor review-sample``) and
links each queue made to the Review page, where people review them as any queue (blind, by keyboard). The lead
places :func:`review_sample` on the page beside the series."""
from __future__ import annotations

import streamlit as st

from evaluators.core.errors import EvalError
from evaluators.review.production import sample_production
from ui import auth, loaders, widgets as w
from ui.review import review_link

MADE = "monitor.review_sample.made"  # session state: the queues the last click made


def _draw(project: str, rule: str, metric: str, since_ns: int, until_ns: int, window_s: int) -> None:
    per = int(st.session_state.get("monitor.review_sample.k") or 10)
    try:
        st.session_state[MADE] = sample_production(loaders.store(), project, rule, metric, since_ns, until_ns,
                                                   window_s, per, created_by=auth.current_user())
    except (EvalError, ValueError) as e:
        st.session_state[MADE] = str(e)


def review_sample(project: str, rule: str, metric: str, since_ns: int, until_ns: int, window_s: int) -> None:
    """A number of traces a window and a button that makes the review queues; then a link to each."""
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    c1.number_input("Traces to review a window", 1, 1000, 10, key="monitor.review_sample.k")
    c2.button("Review a sample of these windows", key="monitor.review_sample.go", on_click=_draw,
              args=(project, rule, metric, since_ns, until_ns, window_s),
              help="Draw that many judged traces at random in each window and put them in a review queue. Their "
                   "reviews correct each window's rate and measure the judge's agreement with people.")
    made = st.session_state.get(MADE)
    if isinstance(made, str):
        st.error(f"No sample was made: {w.plain(made)}")
    elif made:
        st.success(f"{sum(len(q['rows']) for q in made):,} traces to review in {len(made)} queue(s).")
        for q in made:
            # (ids are hex: nothing in the link is anyone's text)
            st.markdown(f"[Review {len(q['rows']):,} traces (queue {q['queue_id']})]"
                        f"({review_link(q['run_id'], queue=q['queue_id'])})")
