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


# ---------------------------------------------------------------- import of published judgments
IMPORT_HELP = ("WildBench's published eval-result files (the files the command line's WildBench import takes): "
               "score files (eval_results/v2.0625/score.v2/eval=JUDGE/MODEL.json) and pairwise files "
               "(pairwise.v2/eval=JUDGE/ref=REFERENCE/MODEL.json); a JSON array or JSON lines.")


def _folder(label: str, value: str) -> str | None:
    """A judge or reference name as the folder name the CLI reads it from (``eval=NAME``, ``ref=NAME``)."""
    value = value.strip()
    if any(ch in value for ch in "/\\\0") or value in (".", ".."):
        raise ValueError(f"the {label} is a name as in WildBench's folders (no '/'), got {value!r}")
    return value or None


def _staged(uploads: list, root, judge: str | None, reference: str | None) -> dict:
    """Each upload written under ``root`` where the CLI would find it (``eval=JUDGE/ref=REFERENCE/NAME``), one
    folder each (two files of one name do not meet); returns path -> the name the user uploaded."""
    from pathlib import Path

    out = {}
    for k, up in enumerate(uploads):
        folder = Path(root) / str(k)
        for part in (judge and f"eval={judge}", reference and f"ref={reference}"):
            folder = folder / part if part else folder
        folder.mkdir(parents=True)
        path = folder / Path(up.name).name
        path.write_bytes(up.getvalue())
        out[str(path)] = up.name
    return out


def import_uploads(store, uploads: list, judge: str, reference: str, length_penalty: int):
    """Import uploaded eval-result files with the engine's own ``import_files`` (the CLI's), all or nothing.

    Every file is first imported into a scratch store in a temporary folder: a file the engine cannot
    convert fails there, so the real store gets every file or none. Messages name the uploaded file (not
    the temporary path), and the record and field where the engine names them.

    Returns:
        (the imported runs, each with ``path`` set to the uploaded name; None) or (None, the error message).
    """
    import tempfile

    from evaluators.store.store import Store
    from evaluators.suites.wildbench import ImportFormatError, import_files

    with tempfile.TemporaryDirectory(prefix="wb-import-") as root:
        try:
            names = _staged(uploads, root, _folder("judge", judge), _folder("reference model", reference))
        except ValueError as e:
            return None, str(e)

        def told(e: Exception) -> str:
            msg = str(e)
            for path, name in names.items():
                msg = msg.replace(path, name)
            return msg

        scratch = Store(f"sqlite:///{root}/check.db")
        try:
            for path, name in names.items():  # one at a time: an error the engine does not place names its file
                try:
                    import_files(scratch, [path], length_penalty)
                except ImportFormatError as e:
                    return None, told(e)
                except Exception as e:  # noqa: BLE001 — a record the engine could not convert: said, nothing stored
                    return None, (f"{name}: not a WildBench eval-result file the import can read "
                                  f"({type(e).__name__}: {told(e)})")
        finally:
            scratch.engine.dispose()  # before its folder goes
        runs, _ = import_files(store, list(names), length_penalty)
    for r in runs:
        r.path = names[r.path]
    return runs, None


def import_panel(store, length_penalty: int, expanded: bool) -> bool:
    """An uploader for published WildBench judgments on the Leaderboard page; True when runs were imported."""
    from ui.widgets import literal

    with st.expander("Import published WildBench judgments", expanded=expanded, icon=":material/upload:"):
        st.caption(IMPORT_HELP + " Every file is checked before any is stored; a file stored before is kept once.")
        uploads = st.file_uploader("Eval-result files", type=["json", "jsonl"], accept_multiple_files=True,
                                   key="wb.upload")
        c1, c2 = st.columns(2)
        judge = c1.text_input("Judge model (the eval= folder the files came from)", key="wb.judge",
                              placeholder="e.g. gpt-4o-2024-05-13", help="recorded with each run as its judge")
        reference = c2.text_input("Reference (pairwise files: the ref= folder)", key="wb.ref",
                                  placeholder="e.g. claude-3-haiku-20240307",
                                  help="Needed only when a pairwise file is not named after the tested model "
                                       "(MODEL.json), as WildBench names them.")
        go = st.button("Import", type="primary", key="wb.import", disabled=not uploads,
                       help=None if uploads else "Add one or more eval-result files above first.")
        if not uploads:
            st.caption("Add one or more eval-result files to import them.")
        if not go:
            return False
        with st.spinner("Checking and importing…"):
            runs, error = import_uploads(store, uploads, judge, reference, length_penalty)
        if error:
            st.error("Nothing was imported: " + literal(error))
            return False
        st.session_state["wb.imported"] = [{"file": r.path, "kind": r.mode, "model": r.model,
                                            "reference": r.reference or "", "records": r.records,
                                            "stored": "already stored, kept once" if r.reused else "imported"}
                                           for r in runs]
        return True


def imported_note() -> None:
    """What the last import in this browser session stored (one line a file), under the uploader."""
    done = st.session_state.pop("wb.imported", None)  # said once, after the import's own rerun
    if done:
        st.success(f"{len(done)} file{'' if len(done) == 1 else 's'} imported; the leaderboard below includes them.")
        st.dataframe(pd.DataFrame(done), hide_index=True, key="wb.imported_table",
                     column_config={"file": "File", "kind": "Kind", "model": "Model", "reference": "Reference",
                                    "records": "Records", "stored": "Stored"})
