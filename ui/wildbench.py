"""Widgets of the WildBench pages: leaderboard tables and charts, and the pairwise inspector.

Everything a model or a dataset wrote (responses, analyses, model names, checklists) is shown as
text (``st.text``, dataframes), never as Markdown.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from evaluators.read.results import RunResults
from evaluators.core.wb_rules import GROUPS, OUTCOMES, conversation_of

WTL_COLOURS = {"win_much": "#1b5e20", "win": "#66bb6a", "tie": "#bdbdbd", "lose": "#ef9a9a", "lose_much": "#b71c1c"}


def score_table(board: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per model with a WB-Score: the score, its interval, the task macro and categories."""
    recs = []
    for model, a in board.items():
        if a.get("WB_score") is None:
            continue
        lo, hi = a.get("WB_score_ci95") or [None, None]
        rec = {"model": model, "WB_score": a["WB_score"], "ci95_low": lo, "ci95_high": hi,
               "task_macro": a.get("WB_score.task_macro"), "records": a.get("records"), "length": a.get("Length")}
        for g in GROUPS:
            if f"WB_score.{g}" in a:
                rec[g] = a[f"WB_score.{g}"]
        recs.append(rec)
    df = pd.DataFrame(recs)
    return df.sort_values("WB_score", ascending=False, kind="stable") if not df.empty else df


def references(board: dict[str, dict[str, Any]]) -> list[str]:
    return sorted({ref for a in board.values() for ref in (a.get("rewards") or {})})


def reward_table(board: dict[str, dict[str, Any]], reference: str) -> pd.DataFrame:
    """One row per model judged against ``reference`` (or "mixture"): reward, interval, win/tie/loss."""
    recs = []
    for model, a in board.items():
        refs = a.get("rewards") or {}
        if reference == "mixture":
            if a.get("mixture_of_rewards") is None:
                continue
            lo, hi = a.get("mixture_of_rewards_ci95") or [None, None]
            rec = {"model": model, "WB_reward": a["mixture_of_rewards"], "ci95_low": lo, "ci95_high": hi,
                   "references": len(refs), "K": a.get("pairwise_K")}
            for o in OUTCOMES:
                rec[o] = sum(r.get(o, 0) for r in refs.values())
        elif reference in refs:
            r = refs[reference]
            lo, hi = r.get("WB_reward_ci95") or [None, None]
            rec = {"model": model, "WB_reward": r["WB_reward"], "ci95_low": lo, "ci95_high": hi,
                   "records": r["records"], "K": r["K"], **{o: r[o] for o in OUTCOMES}}
        else:
            continue
        recs.append(rec)
    df = pd.DataFrame(recs)
    return df.sort_values("WB_reward", ascending=False, kind="stable") if not df.empty else df


def score_chart(df: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=df["WB_score"], y=df["model"], orientation="h", marker_color="#1565c0",
                           error_x=dict(type="data", symmetric=False, array=df["ci95_high"] - df["WB_score"],
                                        arrayminus=df["WB_score"] - df["ci95_low"]),
                           hovertemplate="%{y}: %{x:.2f}<extra></extra>"))
    fig.update_layout(height=80 + 36 * len(df), margin=dict(l=10, r=10, t=10, b=10), xaxis_title="WB-Score (95% CI)",
                      yaxis=dict(autorange="reversed"))
    return fig


def wtl_chart(df: pd.DataFrame):
    """Win / tie / loss shares per model as stacked horizontal bars."""
    import plotly.graph_objects as go

    total = df[list(OUTCOMES)].sum(axis=1).replace(0, 1)
    fig = go.Figure()
    for o in OUTCOMES:
        fig.add_bar(x=df[o] / total * 100, y=df["model"], orientation="h", name=o.replace("_", " "),
                    marker_color=WTL_COLOURS[o], customdata=df[o],
                    hovertemplate="%{y} " + o.replace("_", " ") + ": %{customdata} (%{x:.1f}%)<extra></extra>")
    fig.update_layout(barmode="stack", height=100 + 36 * len(df), margin=dict(l=10, r=10, t=10, b=10),
                      xaxis_title="% of counted pairs", yaxis=dict(autorange="reversed"), legend=dict(orientation="h"))
    return fig


# ---------------------------------------------------------------- pairwise inspector
def pairs_table(res: RunResults, spec) -> pd.DataFrame:
    """Rows of a pairwise run: models, the verdict, the reward for A, whether the order flipped it."""
    p = spec.prefix
    recs = []
    for i, cell in enumerate(res.cells[spec.name]):
        o = cell.outputs if cell and cell.status == "ok" else {}
        rec = res.dataset.records[i]
        recs.append({"#": res.dataset.row_no(i), "model_A": o.get("model_A") or rec.get("model_A"),
                     "model_B": o.get("model_B") or rec.get("model_B"), "choice": o.get(f"{p}_choice"),
                     "swapped": o.get(f"{p}_choice_swapped"), "reward_A": o.get(spec.primary) if o else None,
                     "flipped": o.get(f"{p}_flipped"), "status": cell.status if cell else "pending"})
    return pd.DataFrame(recs)


def _details(turn, swapped: bool) -> dict[str, str | None]:
    """A turn's analyses in the row's terms: in the swapped order the judge's 'A' is the row's B."""
    o = turn.outputs or {}
    a, b = ("analysis_B", "analysis_A") if swapped else ("analysis_A", "analysis_B")
    ra, rb = ("reason_B", "reason_A") if swapped else ("reason_A", "reason_B")
    return {"A": o.get(a), "B": o.get(b), "A better": o.get(ra), "B better": o.get(rb), "equal": o.get("reason_tie")}


def pair_view(res: RunResults, spec, i: int) -> None:
    """The conversation, the checklist, both responses side by side with each analysis, and the verdicts."""
    ds, cell = res.dataset, res.cells[spec.name][i]
    rec, canon = ds.records[i], ds.canonical(i)
    history, query = conversation_of(rec, canon.get("query"))
    st.markdown("##### Conversation")
    if history:
        st.text(history.rstrip())
    st.text(f"USER (current request): {query or ''}")
    if canon.get("checklist"):
        st.markdown("##### Checklist")
        st.text("\n".join(f"- {x}" for x in canon["checklist"]))
    turns = {t.turn: t for t in (cell.turns if cell else []) if t.status == "ok"}
    left, right = st.columns(2)
    for col, side, text, model in ((left, "A", canon.get("response"), rec.get("model_A")),
                                   (right, "B", rec.get("candidate_B"), rec.get("model_B"))):
        with col:
            st.markdown(f"##### Response {side}")
            st.text(f"model: {model or '-'} · {len(text or '')} characters")
            st.text(text or "")
            for order, t in sorted(turns.items()):
                label = "analysis (A/B order)" if order == 0 else "analysis (swapped order)"
                note = _details(t, swapped=order == 1)[side]
                if note:
                    st.caption(label)
                    st.text(note)
    st.markdown("##### Verdict")
    if cell is None:
        st.info("Not judged yet.")
        return
    if cell.status != "ok":
        st.error(f"{cell.status}:")
        st.text(cell.error or "")  # an error can quote the judge's reply: text, never Markdown
        for t in cell.turns:
            if t.raw:
                st.code(t.raw, language=None, wrap_lines=True)
        return
    p, o = spec.prefix, cell.outputs
    rows = []
    for order, t in sorted(turns.items()):
        d = _details(t, swapped=order == 1)
        rows.append({"order": "A/B" if order == 0 else "swapped (B shown first)", "judge's label": t.outputs.get("choice"),
                     "A better": d["A better"], "B better": d["B better"], "equal": d["equal"]})
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    facts = [f"verdict for A: {o.get(f'{p}_choice')}", f"reward for A: {o.get(spec.primary):+g}"]
    if o.get(f"{p}_flipped") is not None:
        facts.append("the verdict flipped with the order (counted as a tie)" if o[f"{p}_flipped"]
                     else "both orders agree")
    if o.get(f"{p}_length_adjusted"):
        facts.append(f"length rule: a slight win by the longer response counts as a tie (K={dict(spec.params).get('length_penalty')})")
    if o.get("excluded"):
        facts.append("a response is empty or truncated: left out of the win/tie/loss counts")
    st.text(" · ".join(facts))
    with st.expander("Raw judge replies"):
        for order, t in sorted(turns.items()):
            st.code(t.raw or "", language=None, wrap_lines=True)


def metric_options(spec) -> dict[str, Any]:
    """Widgets for the params a run may set (a checkbox for a flag, a number for a number)."""
    out: dict[str, Any] = {}
    for name, default in spec.params:
        if name not in spec.run_options:
            continue
        label, key = f"{spec.name}: {name.replace('_', ' ')}", f"new.opt.{spec.name}.{name}"
        if isinstance(default, bool):  # kept for the browser session, as the metrics' ticks (pages/new.py)
            out[name] = st.checkbox(label, default, key=key, persist_state="session")
        elif isinstance(default, (int, float)):
            out[name] = type(default)(st.number_input(label, value=default, key=key, persist_state="session"))
    return out
