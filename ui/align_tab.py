"""The Review page's Align tab (issue 34): make a metric's judge agree with its reviewers, honestly.

The baseline card (the current judge on the dev and test splits), a button that builds candidates from the train
rows (rules, examples or both, by the run's judge or another), each with its dev numbers and a diff of its
template; the one gate on the test split, in numbers and a sentence; and Promote, enabled only when the gate
says "better", which saves the metric's next version and shows the run's corrected rate with the new judge
beside the old one. The judge's replies are the engine's (evaluators.review.align); each result is kept in this
browser session, so a rerun calls no judge. What a model or a dataset wrote is shown as text.
"""
from __future__ import annotations

import difflib
import math

import streamlit as st

from evaluators import EvalError
from evaluators.core.scales import reviewable
from evaluators.judge.config import JudgeConfig, judge_url
from evaluators.read.results import RunResults
from ui import loaders, loaders_align
from ui.judge_form import _SECRET, judge_settings
from ui.widgets import count, literal, plain, plain_table, session_key

RESULT = "align.result"  # session state: (run, metric) -> what Build candidates and Promote gave
METHODS = {"both": "Rules, examples, and both together (the best on dev is gated)",
           "rules": "Rules from the reviewers' notes", "examples": "Worked examples"}


def num(v, digits: int = 3) -> str:
    """A statistic as the tab shows it ("–" when undefined)."""
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def pvalue(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"


def pct(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


def with_ci(triple) -> str:
    """[value, low, high] as "0.512 [0.301, 0.702]"."""
    v, lo, hi = (list(triple or []) + [None, None, None])[:3]
    return num(v) + ("" if lo is None else f" [{num(lo)}, {num(hi)}]")


def card_rows(card: dict) -> dict[str, str]:
    """One split's card as the table's column (statistic -> text)."""
    return {"rows": str(card["rows"]), "Cohen's κ (pass/fail) [95% CI]": with_ci(card.get("kappa")),
            "weighted κ (scale) [95% CI]": with_ci(card.get("weighted_kappa")),
            "true-positive rate (passes what people pass)": pct(card.get("tpr")),
            "true-negative rate (fails what people fail)": pct(card.get("tnr")),
            "accuracy": pct(card.get("accuracy")),
            "majority baseline (always the commoner verdict)":
                "–" if card.get("majority_verdict") is None else
                f"{pct(card['majority_accuracy'])} (always {card['majority_verdict']})"}


def said(error: Exception, api_key: str | None) -> str:
    """An error's message with no key in it (a provider may echo the key, or a masked one, in its error)."""
    msg = str(error).replace(api_key, "***") if api_key else str(error)
    return _SECRET.sub(r"\1***", msg)


def _times(n: int) -> str:
    return f"{n} time{'' if n == 1 else 's'}"


def baseline_card(base: dict) -> None:
    import pandas as pd

    s, b = base["splits"], base["baseline"]
    st.markdown("#### Baseline: the current judge against your reviewers")
    st.caption(f"Splits: {s['train']} train, {s['dev']} dev, {s['test']} test rows (each reviewed row dealt once, "
               f"by its reviewers' verdict, and never moved) · test split used {_times(base['test_uses'])} · judge "
               + (literal(b["judge_model"]) if b.get("judge_model") else "not recorded"))
    st.table(plain_table(pd.DataFrame({"dev": card_rows(b["dev"]), "test": card_rows(b["test"])})))
    st.caption(bias_line("Length bias", b["length_bias"]))
    sc = b.get("self_consistency")
    if sc:
        st.caption(f"Self-consistency: asked {sc.get('repeat')} times, the judge changed its verdict on "
                   f"{pct(sc.get('flip_share'))} of {sc.get('rows')} rows.")


def bias_line(lead: str, lb: dict) -> str:
    """The length bias in a sentence (evaluators.review.align_stats.length_bias)."""
    if lb.get("slope_per_1000_chars") is None:
        return f"{lead}: not measurable here (the answers' lengths do not vary)."
    return (f"{lead}: the judge's score minus the reviewers' changes by {lb['slope_per_1000_chars']:+.3f} per 1,000 "
            f"characters of answer [{num(lb['ci95_low'])}, {num(lb['ci95_high'])}] over {lb['rows']} reviewed rows "
            "(above 0: kinder to longer answers).")


def _judge(run: dict) -> tuple[JudgeConfig | None, str | None, bool]:
    """(judge, key, ready): the run's own judge by default (the key typed on New evaluation in this browser
    session), or another one set here (its key kept in this browser session only)."""
    spec_judge = (run["spec"] or {}).get("judge")
    current = JudgeConfig.from_dict(spec_judge) if spec_judge else None
    if current is not None:
        where = "a server judge" if current.judge_name else judge_url(current)
        st.caption(f"Judge: the run's own, model {literal(current.model)} at {literal(where)}.")
    if not st.toggle("Use another judge", key="align.other", value=current is None,
                     help="The candidates are judged, and compared with the current template, by this judge"):
        return None, session_key(), current is not None
    judge, typed = judge_settings("align.judge", current)
    if judge is None:
        return None, typed, False
    same = current is not None and (judge.provider, judge.judge_name, judge_url(judge)) == \
        (current.provider, current.judge_name, judge_url(current))
    return judge, typed or (session_key() if same else None), True  # a key goes to no other address than its own


def candidate(c: dict, current: str, selected: bool) -> None:
    import pandas as pd

    st.markdown(f"##### Candidate: {c['method']}" + (" · chosen on dev" if selected else ""))
    st.table(plain_table(pd.DataFrame({"dev": card_rows(c["dev"])})))
    if c["rules"]:
        st.caption("Rules (written by the proposer model from your reviewers' notes on train rows):")
        st.text("\n".join(f"- {r['rule']}  (from {count(len(r.get('rows') or []), 'train row')})" for r in c["rules"]))
    if c["examples"]:
        st.caption(f"{count(len(c['examples']), 'worked example')} from train rows: "
                   + ", ".join(f"row {e['row_idx'] + 1} ({e['human']})" for e in c["examples"]))
    diff = "".join(difflib.unified_diff(current.splitlines(keepends=True), c["template"].splitlines(keepends=True),
                                        "current template", f"candidate ({c['method']})"))
    with st.expander(f"Its template against the current one ({c['method']})", expanded=selected):
        st.code(diff or "(the same text)", language="diff")


def gate_panel(g: dict) -> None:
    import pandas as pd

    st.markdown("#### The gate, once, on the held-out test rows")
    (st.success if g["verdict"] == "better" else st.warning)(plain(g["sentence"]))
    st.table(plain_table(pd.DataFrame({"value": {
        "κ of the current judge": num(g["kappa_current"]), "κ of the candidate": num(g["kappa_candidate"]),
        "difference": num(g["delta"]), "95% interval of the difference (paired bootstrap)":
            f"[{num(g['delta_ci95_low'])}, {num(g['delta_ci95_high'])}]",
        "McNemar's p": pvalue(g["mcnemar_p"]), "rows the two judges disagree on": str(g["disagreements"]),
        "test rows": str(g["test_rows"]), "verdict": g["verdict"]}})))
    st.caption(f"Test split used {_times(g['test_uses'])}: each gate is one more look at the held-out rows, and "
               "the more looks, the likelier one of them is lucky.")


def rates_panel(saved: dict, rates: dict) -> None:
    """The promoted version, the run's corrected rate with each judge, and the length bias measured again."""
    import pandas as pd

    what = rates["rate"].replace("_", " ")
    st.success(f"Saved {plain(saved['name'])} version {saved['version']}, with where it came from (the reviews, "
               "rules, examples and the gate's numbers).")
    st.markdown(f"#### The run's {what}, corrected by its reviews, with each judge")
    table = {}
    for who, x in (("current judge", rates["current"]), (f"promoted judge (version {saved['version']})",
                                                          rates["candidate"])):
        table[who] = {"judged": pct(x["judged"]), "corrected": pct(x["corrected"]),
                      "95% interval": f"[{pct(x['ci95_low'])}, {pct(x['ci95_high'])}]",
                      "reviews correcting it": "–" if x["reviewed_rows"] is None else str(x["reviewed_rows"])}
    st.table(plain_table(pd.DataFrame(table).T))
    st.caption(f"The promoted judge judged {count(rates['judged_rows'], 'row')} of the run (replies already asked "
               "for were read from the cache). A judge that agrees with your reviewers more lets the same reviews "
               "correct its rate with a narrower interval (where every row is reviewed, the reviews alone make the "
               "rate, whichever the judge).")
    if rates.get("length_bias"):
        st.caption(bias_line("Length bias with the promoted judge", rates["length_bias"]))


def align_panel(run: dict, res: RunResults) -> None:
    """The Align tab for ``run``: a metric, its baseline card, candidates, the gate and Promote."""
    from evaluators.review.align import align, promote, promoted_rates
    from ui.review_page import reviewer_if_known

    names = [s.name for s in res.specs if s.is_judge and reviewable(s)]
    if not names:
        st.info("This run has no judge metric to align.")
        return
    metric = st.selectbox("Metric to align", names, key="align.metric")
    try:
        base = loaders_align.baseline(run["id"], metric)
    except EvalError as e:
        st.info("Alignment cannot read this run: " + literal(e))
        return
    baseline_card(base)
    short = min(base["splits"].values()) < 2
    if short:
        st.info(f"Review more rows of {plain(metric)} first: each split needs at least 2 reviewed rows, and the "
                "gate's interval needs many more to call a candidate better.")
    method = st.radio("Method", list(METHODS), format_func=METHODS.get, key="align.method", horizontal=True)
    judge, key, ready = _judge(run)
    kept = st.session_state.setdefault(RESULT, {})
    here = kept.get((run["id"], metric))
    st.caption("Candidates learn from the train rows only and are compared on dev; the chosen one is then gated "
               "once on the test rows, which counts as one use of the test split.")
    if st.button("Build candidates", key="align.build", type="primary", disabled=short or not ready,
                 help="Review more rows first" if short else None if ready else "Give the judge's settings first"):
        try:
            with st.status("Building candidates: the proposer, then each candidate on dev, then the gate…",
                           expanded=False) as status:
                out = align(loaders.store(), run["id"], metric, judge, api_key=key, method=method)
                status.update(label="Candidates built and gated", state="complete")
        except EvalError as e:
            st.error("Alignment stopped: " + literal(said(e, key)))
        else:
            kept[(run["id"], metric)] = {"alignment": out, "judge": judge, "key": key}
            st.rerun()  # drawn again from the session: the card above then counts this use of the test split
    if here is None:
        return
    out = here["alignment"]
    for note in out.get("notes", []) + ([out["note"]] if out.get("note") else []):
        st.caption(plain(note))
    st.markdown("#### Candidates, on the dev rows")
    for c in out["candidates"]:
        candidate(c, out["current_template"], c["method"] == out["selected"])
    g = out.get("gate")
    if g is None:
        return
    gate_panel(g)
    better = g["verdict"] == "better"
    if st.button("Promote", key="align.promote", type="primary", disabled=not better or "rates" in here,
                 help=None if better else "Only a candidate the gate calls better is promoted"):
        try:
            with st.spinner("Saving the next version, then judging the run's rows with it…"):
                saved = promote(loaders.store(), out, created_by=reviewer_if_known())
                loaders.forget_saved_metrics()  # New evaluation's picker offers the new version at once
                here["saved"] = saved
                here["rates"] = promoted_rates(loaders.store(), out, here["judge"], api_key=here["key"])
        except EvalError as e:
            st.error("Not promoted: " + literal(said(e, here["key"])))
        else:
            st.rerun()  # drawn again with Promote done (disabled) and the rates below
    if here.get("rates"):
        rates_panel(here["saved"], here["rates"])
