"""A finished scan beside people, on the Red team page (issue 33).

Reviews: each category's attacks were judged in a run of the store's own (the scorecard's ``runs``); its verdicts are
reviewed on the Review page like any run's rows, and the ASR corrected by those reviews is read here as the Results
page reads a run's corrected rate (:func:`ui.loaders_redteam.reviewed`). Numbers are shown as table cells.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from ui import loaders_redteam as rl
from ui.widgets import plain, table


def _pct(v) -> str:
    return "–" if v is None else f"{v:.1%}"


def _corrected(a) -> tuple[str, str]:
    """The corrected ASR and its interval, or why there is none yet."""
    if a is None or a.corrected is None:
        if a is None or not a.reviewed_rows:
            return "no review yet", "–"
        return "too few reviews in the sample", "–"
    c = a.corrected
    return _pct(c.corrected), f"{c.low:.1%} – {c.high:.1%}"


def reviews(card: dict) -> None:
    """Per category: the judge's ASR, the ASR corrected by the reviews of its run, and a link to review them."""
    found = rl.reviewed(card)
    if not found:
        return
    st.markdown("#### Reviewing the judge's verdicts")
    st.caption("Each category's attacks were judged in a run of the store's own: review its verdicts on the Review "
               "page like any run's rows (a severity 0-7; above the threshold, the attack succeeded). Once a sample "
               "of them is reviewed, the ASR corrected by the reviews is shown beside the judge's, as the Results "
               "page corrects a run's rate.")
    rows = []
    for r in found:
        a = r["agreement"]
        fixed, ci = _corrected(a)
        rows.append({"risk category": r["risk_category"], "threshold": f"{r['threshold']:g}",
                     "judge's ASR": _pct(a.judged) if a is not None else "–",
                     "reviewed attacks": a.reviewed_rows if a is not None else 0,
                     "ASR corrected by reviews": fixed, "corrected 95% CI": ci})
    table(pd.DataFrame(rows), key="rt.reviews")
    for r in found:
        if r["run_threshold"] is None and r["agreement"] is None:
            st.warning(f"The run that judged {plain(r['risk_category'])} is not in this store.")
            continue
        if r["run_threshold"] is not None and float(r["run_threshold"]) != r["threshold"]:
            st.warning(f"The run that judged {plain(r['risk_category'])} has threshold {r['run_threshold']:g}, the "
                       f"scan {r['threshold']:g}: the rates here are at the scan's.")
        st.page_link("pages/review.py", label=f"Review the {r['risk_category']} verdicts",
                     query_params={"run": r["run_id"]}, icon=":material/rate_review:")
