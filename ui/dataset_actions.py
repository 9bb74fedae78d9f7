"""Renaming, archiving and deleting the dataset open on the Datasets page, each confirmed, and under sign-in offered
only to its author or an administrator (ui.auth.may_change, checked again when confirmed). A dataset that runs use
is not deleted: the page names them (the store refuses it too: evaluators.store.manage.DatasetInUse)."""
from __future__ import annotations

import streamlit as st

from evaluators import EvalError
from ui import auth, loaders, widgets as w

ASK = "datasets.confirm"  # session state: (action, dataset id) waiting for "Yes"


def actions(d: dict) -> None:
    """Rename, archive (or show again) and delete ``d`` (a row of loaders.datasets)."""
    if not auth.may_change(d.get("created_by")):
        st.caption("Only a dataset's author or an administrator may rename, archive or delete it: "
                   + w.plain(f"{d['name']} by {d.get('created_by') or 'nobody recorded'}"))
        return
    with st.expander("Rename, archive or delete this dataset", icon=":material/edit:"):
        with st.form(f"datasets.rename.{d['id']}", border=False):
            c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
            name = c1.text_input("New name", d["name"], key=f"datasets.new_name.{d['id']}", max_chars=300)
            if c2.form_submit_button("Rename"):
                _apply("rename", d, name)
        archived = bool(d.get("archived_at"))
        c1, c2 = st.columns(2)
        c1.button("Show again" if archived else "Archive", key="datasets.archive",
                  on_click=_ask, args=("unarchive" if archived else "archive", d["id"]))
        c2.button("Delete", key="datasets.delete", on_click=_ask, args=("delete", d["id"]))
        _confirm(d)


def outcome() -> None:
    """What the last change did (once, after the rerun it made)."""
    said = st.session_state.pop("datasets.done", None)
    if said:
        st.success(said, icon=":material/check:")


def _ask(action: str, dataset_id: str) -> None:
    st.session_state[ASK] = (action, dataset_id)


def _confirm(d: dict) -> None:
    asked = st.session_state.get(ASK)
    if not asked or asked[1] != d["id"]:
        return
    action = asked[0]
    if action == "delete":
        users = loaders.store().runs_of_dataset(d["id"])
        if users:  # refused before any "Yes": the runs that would lose their rows are named
            st.session_state.pop(ASK, None)
            st.error(f"{w.count(len(users), 'run')} {'uses' if len(users) == 1 else 'use'} this dataset, so it cannot be deleted: delete those runs first "
                     "(on Runs), or archive the dataset (it stays whole).")
            st.text("\n".join(f"{name} ({rid})" for rid, name in users))
            return
        st.warning("Delete this dataset and its rows? This cannot be undone.", icon=":material/help:")
    else:
        st.warning("Archive this dataset? It is hidden from lists and pickers, kept whole (Show archived lists it)."
                   if action == "archive" else "Show this dataset again in lists and pickers?", icon=":material/help:")
    verb = {"delete": "delete", "archive": "archive", "unarchive": "show it again"}[action]
    if w.yes_or_cancel("datasets", verb, ASK):
        _apply(action, d)


def _apply(action: str, d: dict, name: str = "") -> None:
    if not auth.may_change(d.get("created_by")):  # a sign-out in another tab since the page was drawn
        st.error("Only a dataset's author or an administrator may change it.")
        return
    store = loaders.store()
    try:
        if action == "rename":
            store.rename_dataset(d["id"], name)
        elif action == "delete":
            store.delete_dataset(d["id"])
            st.query_params.pop("dataset", None)
        else:
            store.archive_dataset(d["id"], archived=action == "archive")
    except EvalError as e:
        st.error(w.literal(e))
        return
    loaders.forget_lists()
    st.session_state["datasets.done"] = {"rename": "Renamed.", "delete": "Deleted.", "archive": "Archived.",
                                         "unarchive": "Shown again."}[action]
    st.rerun()
