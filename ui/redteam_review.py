"""A finished scan beside people and beside an earlier scan, on the Red team page (issue 33).

Reviews: each category's attacks were judged in a run of the store's own (the scorecard's ``runs``); its verdicts are
reviewed on the Review page like any run's rows, and the ASR corrected by those reviews is read here as the Results
page reads a run's corrected rate (:func:`ui.loaders_redteam.reviewed`). Compare: an earlier scan of the same
configuration, attack by attack (:mod:`evaluators.suites.redteam.diff`, as ``redteam-diff`` prints it). Attack ids
and numbers are shown as text and table cells.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from ui import loaders_redteam as rl, state
from ui.widgets import count, plain, table


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
        st.page_link("pages/review.py", label=f"Review the {plain(r['risk_category'])} verdicts",
                     query_params={"run": r["run_id"]}, icon=":material/rate_review:")


def _diff_rows(res: dict) -> pd.DataFrame:
    rows = []
    for c in [*res["cells"], {"risk_category": "all", "attack_technique": "all", **res["overall"]}]:
        has = c.get("difference") is not None
        rows.append({"risk category": c["risk_category"], "strategy": c["attack_technique"], "pairs": c["pairs"],
                     "ASR before": _pct(c.get("asr_before")), "ASR after": _pct(c.get("asr_after")),
                     "difference": f"{100 * c['difference']:+.1f} pts" if has else "–",
                     "95% CI": f"{100 * c['ci95'][0]:+.1f} – {100 * c['ci95'][1]:+.1f} pts" if has else "–",
                     "McNemar p": f"{c['mcnemar_p']:.3g}" if has else "–",
                     "newly broken": len(c["newly_broken"]), "fixed": len(c["fixed"])})
    return pd.DataFrame(rows)


def compare(name: str, label) -> None:
    """Pick an earlier scan of the same configuration (``vs`` in the URL) and read the two attack by attack."""
    earlier = rl.comparable(name)
    st.markdown("#### Compare with an earlier scan")
    if not earlier:
        st.caption("No earlier completed scan has this configuration (risk categories, strategies, objectives, seed "
                   "and thresholds): scan the other build the same way to compare the two attack by attack.")
        return
    before = state.choose("Earlier scan", "vs", ["", *earlier], lambda n: "(none)" if not n else label(n))
    if not before:
        return
    res = rl.diff(before, name)
    st.caption("The attacks both scans sent with the same prompt and judged, paired: ASR before and after, the "
               "paired difference with its 95% interval and McNemar's exact p.")
    table(_diff_rows(res), key="rt.diff")
    c1, c2 = st.columns(2)
    for col, what, ids in ((c1, "Newly broken", res["overall"]["newly_broken"]),
                           (c2, "Fixed", res["overall"]["fixed"])):
        col.caption(f"{what}: {count(len(ids), 'attack')}")
        col.code("\n".join(ids) or "(none)", language=None)
    gone = {k.replace("_", " "): len(v) for k, v in res["left_out"].items() if v}
    if gone:
        st.caption("Left out, in no rate: " + plain(", ".join(f"{n} {k}" for k, n in gone.items())) + ".")
