"""The Runs page's table (name, dataset, status, each metric's rate with what it rests on, cost, author, date) and
what can be done with the runs selected in it: open, compare, rename, archive, delete.

Rates are Results' cards' (loaders.run_rates: the read layer's ``rate_of`` over the run's summary, at the run's
own thresholds), their n said as the cards say it (ui.widgets.rate_counts, too_few). Changes are confirmed, and
under sign-in offered only to a run's author or an administrator (ui.auth.may_change), checked again when
confirmed. A selection is of runs by id: the table's key changes with the runs it shows, so a run arriving or
leaving never moves a selection onto another run.
"""
from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from evaluators import EvalError
from evaluators.read.columns import forget_views
from ui import auth, loaders, widgets as w

CONFIRM = "runs.confirm"  # session state: (action, run ids) waiting for its confirmation


def rows(runs: list[dict], dataset_names: dict[str, str]) -> pd.DataFrame:
    """One row per run: what the table shows, rates as percentages (numbers, so that they sort) with a column of
    what each rests on ("6 of 8 scored, 2 errored", "too few to say" under ui.widgets.MIN_N scored rows)."""
    out = []
    for r in runs:
        row = {"id": r["id"], "name": r["name"], "dataset": dataset_names.get(r["dataset_id"], r["dataset_id"]),
               "status": w.status_word(r) + (" · archived" if r.get("archived_at") else "")}
        for metric, measure, rate, scored, n, errored in loaders.run_rates(r):
            row[f"{metric} {measure}"] = None if rate is None else round(rate * 100, 1)
            row[f"{metric} n"] = w.rate_counts(scored, n, errored) + (" · too few to say" if w.too_few(scored) else "")
        cost = loaders.run_cost(r).get("cost.usd") if (r["spec"] or {}).get("judge") else None
        row.update({"cost (USD)": cost, "author": r.get("created_by") or "", "created": r["created_at"]})
        out.append(row)
    return pd.DataFrame(out)


WIDTHS = {"name": 180, "dataset": 150, "status": 170, "rate": 150, "n": 200}  # px: each heading and value read whole


def _config(frame: pd.DataFrame) -> dict:
    config = {"id": None, "name": st.column_config.TextColumn("Name", width=WIDTHS["name"]),
              "dataset": st.column_config.TextColumn("Dataset", width=WIDTHS["dataset"]),
              "status": st.column_config.TextColumn("Status", width=WIDTHS["status"]),
              "cost (USD)": st.column_config.NumberColumn("Cost (USD)", format="$%.4f"),
              "author": st.column_config.TextColumn("Author"),
              "created": st.column_config.DatetimeColumn("Created", format="YYYY-MM-DD HH:mm")}
    for col in frame.columns:
        if col.endswith((" pass rate", " defect rate")):
            config[col] = st.column_config.ProgressColumn(col, format="%.1f%%", min_value=0, max_value=100,
                                                          width=WIDTHS["rate"])
        elif col.endswith(" n"):
            config[col] = st.column_config.TextColumn(col[:-2] + ": n", width=WIDTHS["n"])
    return config


def table(runs: list[dict], dataset_names: dict[str, str]) -> list[dict]:
    """The table of ``runs`` with a checkbox per row; returns the runs selected (in the table's order)."""
    frame = rows(runs, dataset_names)
    ids = [r["id"] for r in runs]
    gen = st.session_state.get("runs.gen", 0)  # bumped by every change: no selection outlives one
    key = "runs.table." + hashlib.sha256(f"{gen}:{','.join(ids)}".encode()).hexdigest()[:12]
    event = st.dataframe(frame, column_config=_config(frame), hide_index=True, on_select="rerun",
                         selection_mode="multi-row", key=key)
    picked = sorted({k for k in (event.selection.rows if event and event.selection else []) if 0 <= k < len(runs)})
    return [runs[k] for k in picked]


def actions(chosen: list[dict]) -> None:
    """What can be done with the selected runs: open one, compare several, rename one, archive or delete any."""
    asked = st.session_state.get(CONFIRM)
    if asked and asked[1] != [r["id"] for r in chosen]:  # asked of another selection: not left waiting
        st.session_state.pop(CONFIRM, None)
    if not chosen:
        st.caption("Select runs (the boxes at the left) to open, compare, rename, archive or delete them.")
        return
    names = ", ".join(r["name"] for r in chosen)
    st.text(f"Selected: {names}")  # names are data: text
    refused = [r for r in chosen if not auth.may_change(r.get("created_by"))]
    with st.container(horizontal=True, gap="small", vertical_alignment="bottom"):
        if len(chosen) == 1:
            st.page_link("pages/results.py", label="Open its results", icon=":material/bar_chart:",
                         query_params={"run": chosen[0]["id"]})
        _compare(chosen)
        archived = all(r.get("archived_at") for r in chosen)
        st.button("Show again" if archived else "Archive", key="runs.archive", disabled=bool(refused),
                  icon=":material/unarchive:" if archived else ":material/archive:",
                  on_click=_ask, args=("unarchive" if archived else "archive", chosen))
        st.button("Delete", key="runs.delete", disabled=bool(refused), icon=":material/delete:",
                  on_click=_ask, args=("delete", chosen))
    if refused:
        who = "; ".join(f"{r['name']} by {r.get('created_by') or 'nobody recorded'}" for r in refused)
        st.caption("Only a run's author or an administrator may rename, archive or delete it: " + w.plain(who))
    elif len(chosen) == 1:
        _rename(chosen[0])
    _confirm()


def _compare(chosen: list[dict]) -> None:
    if len(chosen) < 2:
        return
    ended = [r for r in chosen if r["status"] == "completed"]
    if len(ended) < len(chosen):
        st.button("Compare", key="runs.compare", disabled=True, icon=":material/compare_arrows:",
                  help="Compare reads completed runs only: " + w.plain(", ".join(
                      r["name"] for r in chosen if r["status"] != "completed")) + " not completed")
        return
    oldest = sorted(chosen, key=lambda r: r["created_at"])  # the oldest is the baseline, as Compare's default
    if st.button("Compare", key="runs.compare", type="primary", icon=":material/compare_arrows:"):
        st.switch_page("pages/compare.py", query_params={"base": oldest[0]["id"],
                                                         "runs": ",".join(r["id"] for r in oldest[1:])})


def _rename(run: dict) -> None:
    with st.form("runs.rename", border=False, enter_to_submit=True):
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        name = c1.text_input("New name", run["name"], key=f"runs.rename.{run['id']}", max_chars=300)
        if c2.form_submit_button("Rename"):
            _apply("rename", [run], name)


def _ask(action: str, chosen: list[dict]) -> None:
    st.session_state[CONFIRM] = (action, [r["id"] for r in chosen])


WORDS = {"delete": ("Delete", "and everything of them (results, reviews, review queues): this cannot be undone"),
         "archive": ("Archive", ": hidden from lists and pickers, kept whole (Show archived lists them)"),
         "unarchive": ("Show again", "in lists and pickers")}


def _confirm() -> None:
    """The change asked for, said in full with the runs it touches, and its confirmation."""
    asked = st.session_state.get(CONFIRM)
    if not asked:
        return
    action, ids = asked
    runs = [r for r in (loaders.run(i) for i in ids) if r is not None]
    verb, what = WORDS[action]
    with st.container(border=True, key="runs.confirm_box"):
        st.warning(f"{verb} {w.count(len(runs), 'run')} {what}?", icon=":material/help:")
        st.text("\n".join(r["name"] for r in runs))
        if w.yes_or_cancel("runs", verb.lower(), CONFIRM):
            _apply(action, runs)


def _apply(action: str, runs: list[dict], name: str = "") -> None:
    """Do it, each run's author checked again (a selection may be older than a sign-out); then a new table."""
    store = loaders.store()
    done, problems = 0, []
    for r in runs:
        if not auth.may_change(r.get("created_by")):
            problems.append(f"{r['name']}: only its author or an administrator may change it")
            continue
        try:
            if action == "rename":
                store.rename_run(r["id"], name)
            elif action == "delete":
                store.delete_run(r["id"])
                forget_views(store, r["id"])  # its columns and cost kept beside the store
            else:
                store.archive_run(r["id"], archived=action == "archive")
            done += 1
        except EvalError as e:
            problems.append(str(e))
    loaders.forget_lists()
    st.session_state["runs.gen"] = st.session_state.get("runs.gen", 0) + 1
    st.session_state["runs.done"] = (action, done, problems)
    st.rerun()


def outcome() -> None:
    """What the last change did (shown once, after the rerun it made)."""
    said = st.session_state.pop("runs.done", None)
    if not said:
        return
    action, done, problems = said
    past = {"rename": "Renamed", "delete": "Deleted", "archive": "Archived", "unarchive": "Shown again"}[action]
    if done:
        st.success(f"{past}: {w.count(done, 'run')}.", icon=":material/check:")
    for p in problems:
        st.error(w.literal(p))
