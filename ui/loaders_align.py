"""The Align tab's cached read (issue 34), beside ui/loaders.py (which is at its size limit): a metric's baseline
card (evaluators.review.align.align_baseline), read again when the run's reviews or the test split's uses change."""
from __future__ import annotations

import streamlit as st

from ui.loaders import store


@st.cache_data(show_spinner=False, max_entries=16, ttl=600)
def _baseline(url: str, run_id: str, metric: str, reviews: tuple, uses: int) -> dict:
    from evaluators.review.align import align_baseline

    return align_baseline(store(), run_id, metric)


def baseline(run_id: str, metric: str) -> dict:
    """The current judge's card for ``metric`` of run ``run_id``: splits, dev and test numbers, test split uses.

    Raises:
        UsageError: the run's dataset is made of conversations, or the metric is not a judge metric of the run.
    """
    s = store()
    return _baseline(s.url, run_id, metric, tuple(s.review_state(run_id)), s.test_split_uses(metric))
