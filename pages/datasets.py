"""Datasets: upload, check, map columns, save; browse what is stored."""
import dataclasses
import json

import pandas as pd
import streamlit as st

from evaluators.data.loading import bad_rows, rows_text
from evaluators.data.reading import max_upload_bytes
from evaluators.core.registry import FIELDS
from ui import auth, dataset_actions, loaders, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Datasets")


def as_text(v) -> str:
    """A cell as text (JSON for lists and objects): a column mixing numbers and text still renders."""
    return "" if v is None else json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else str(v)


def preview(checked) -> None:
    """Preview rows as the mapping reads them: each field, under the column it comes from when that is
    named otherwise ("response ← answer"), then the columns no field reads; indexed by the source file's row number,
    the same number the problem list names. Fields and columns are kept apart: a column named like a field
    ("response") that the mapping leaves unread is its own heading beside the field read from elsewhere."""
    fields = [f for f in FIELDS if f in checked.mapping]
    unread = [c for c in checked.columns if c not in checked.mapping.values()]
    heads = [(f"{f}" if checked.mapping[f] == f else f"{f} ← {checked.mapping[f]}", checked.mapping[f]) for f in fields]
    heads += [(f"{c} (not used)", c) for c in unread]
    frame = pd.DataFrame([[as_text(r.get(column)) for _, column in heads] for r in checked.preview],
                         index=pd.Index(checked.preview_rows, name="row"), columns=[h for h, _ in heads])
    named = " and the rows named in the problems" if checked.problems else ""
    st.caption(f"Preview: the first rows{named} as the mapping reads them ('field ← column'); 'row' is the row "
               "in the file, as in the problem list")
    st.dataframe(frame.fillna(""), hide_index=False)


def column_mapping(upload, first) -> dict[str, str | None]:
    """A selectbox per field, starting from the detected mapping; returns the user's changes to it
    (field -> column, or None for "(none)": that field is not read, even if detection found it)."""
    st.caption("Column mapping (detected automatically; change any field: the preview and the checks follow)")
    changes = {}
    per_row = 5  # ten fields (agents' included): two rows of five, each box wide enough to read its column
    boxes = [c for _ in range(0, len(FIELDS), per_row) for c in st.columns(per_row)]
    for col, field in zip(boxes, FIELDS):
        options = ["(none)"] + first.columns
        detected = first.mapping.get(field)
        chosen = col.selectbox(field, options, index=options.index(detected or "(none)"),
                               key=f"datasets.map.{upload.file_id}.{field}")
        chosen = None if chosen == "(none)" else chosen
        if chosen != detected:
            changes[field] = chosen
    return changes


def save(ds, name: str, reused: str) -> None:
    """Store the dataset and open New evaluation on it; datasets are kept once per content: an upload already
    stored is said so (under ``reused``), not switched to silently."""
    before = {d["id"] for d in loaders.store().list_datasets()}
    did = loaders.store().save_dataset(dataclasses.replace(ds, name=name), created_by=auth.current_user())
    loaders.forget_lists()
    if did not in before:
        st.switch_page("pages/new.py", query_params={"dataset": did})
    st.session_state[reused] = did


# How a file's columns were read, in words (the engine's layout names, evaluators.data.dataset.KNOWN_SCHEMAS, were
# shown as "detected schema: azure"): the saved datasets' column, and the sentence under an upload
LAYOUTS = {"azure": ("Azure AI evaluation", "read as an Azure AI evaluation file"),
           "deepeval": ("DeepEval", "read as a DeepEval test-case file"),
           "inspect": ("Inspect AI", "read as an Inspect AI sample file"),
           "openai-evals": ("OpenAI Evals", "read as an OpenAI Evals file"),
           "openai-messages": ("chat messages", "read as chat conversations (OpenAI messages)"),
           "common": ("common names", "read by common column names (question, answer…)"),
           "wildbench": ("WildBench", "read as WildBench rows"),
           "custom": ("columns of its own", "read as columns of its own (no known layout: map them below)")}


with w.guard():
    limit = max_upload_bytes() // 2**20
    upload = st.file_uploader(f"Upload JSONL, JSON, CSV or Parquet (up to {limit} MB)",
                              type=["jsonl", "ndjson", "json", "csv", "parquet"], key="datasets.upload")
    if upload is not None:
        first = loaders.inspect_upload(upload)
        # file and column names come from the upload: shown as text, never as Markdown
        st.text(f"{first.name} · {LAYOUTS.get(first.detected, ('', 'read as ' + first.detected))[1]} · columns: "
                f"{', '.join(first.columns) or '–'}")
        changes = column_mapping(upload, first) if first.columns else {}
        checked = loaders.inspect_upload(upload, changes) if changes else first
        if checked.preview:
            preview(checked)
        reused = f"datasets.reused.{upload.file_id}"
        if checked.problems:
            w.problems_table(checked.problems, checked.truncated)
            rows = bad_rows(checked.problems, checked.truncated)
            if rows:  # one click: the rest saved, the note of the rows left out kept in its source (and name)
                st.caption(f"Or save the other rows: the dataset is stored without {rows_text(rows)} of the file, "
                           "and says so; no run reads them.")
                if st.button(f"Leave out these {w.count(len(rows), 'row')} and save", key="datasets.leave_out"):
                    kept = loaders.inspect_upload(upload, changes, tuple(rows))
                    if kept.dataset is not None:
                        save(kept.dataset, kept.name, reused)
        else:
            ds = checked.dataset
            st.success(f"{w.count(len(ds), 'row')}, {ds.shape} shape, all checks passed.")
            if ds.questions_only():
                st.info("Questions only: this file has no answers to judge yet. Save it, then on New evaluation "
                        "choose \"Generate answers with a model\": a model (or two prompts to compare) answers "
                        "each question, then the answers are judged.", icon=":material/quiz:")
            for column, field in checked.near_misses.items():  # names are data: text
                st.info(f"Column {w.literal(column)} is read by no field: is it {field}? Choose it in the {field} box "
                        "above.", icon=":material/help:")
            name = st.text_input("Name", checked.name, key="datasets.name")
            if st.button("Save dataset", type="primary", key="datasets.save"):
                save(ds, name, reused)
            if st.session_state.get(reused):
                did = st.session_state[reused]
                same = next((d for d in loaders.datasets(did) if d["id"] == did), None)
                st.info("These rows (with this mapping) are already stored; nothing new was saved. Stored as:")
                st.text(same["name"] if same else did)  # a name is data: text
                c1, c2 = st.columns(2)
                c1.page_link("pages/datasets.py", label="Open the stored dataset", icon=":material/dataset:",
                             query_params={"dataset": did})
                c2.page_link("pages/new.py", label="Evaluate it", icon=":material/play_arrow:",
                             query_params={"dataset": did})
    st.subheader("Saved datasets")
    dataset_actions.outcome()
    archived = st.toggle("Show archived", key="ds_archived", bind=state.URL)
    saved = loaders.datasets(st.query_params.get("dataset"), archived=archived)
    table = [{"name": d["name"] + (" (archived)" if d.get("archived_at") else ""), "shape": d["shape"],
              "rows": d["rows"], "read as": LAYOUTS.get(d["detected"], (d["detected"],))[0], "columns": ", ".join(d["columns"]), "added": d["created_at"]}
             for d in saved]
    event = w.table(table, key="datasets.table", on_select="rerun", selection_mode="single-row")
    k = state.selected(event, len(saved))
    if k is not None:
        state.write("dataset", saved[k]["id"])
    chosen = state.read("dataset")
    if chosen is not None and chosen not in {d["id"] for d in saved}:
        state.not_found("dataset", "dataset", chosen)
    if chosen is not None:
        ds, listed = loaders.dataset(chosen), next(d for d in saved if d["id"] == chosen)
        st.markdown(f"**{w.plain(listed['name'])}** · {w.count(len(ds), 'row')} · {ds.shape}")  # a name: text (a rename is listed)
        if ds.source != ds.name:  # e.g. "a.jsonl without rows 3 and 7": the rows left out when it was saved
            st.text(f"From {ds.source}")
        st.caption("Column mapping: which column of the file each field is read from")
        st.table(w.plain_table(pd.DataFrame(  # st.table renders Markdown: a column is named by the file
            [{"Field": f, "Column": ds.mapping.get(f, "–")} for f in FIELDS if f in ds.mapping]
            + [{"Field": f, "Column": c} for f, c in ds.mapping.items() if f not in FIELDS])).style.hide(axis="index"))
        w.json_preview(ds.records[:20])
        st.page_link("pages/new.py", label="Evaluate this dataset", icon=":material/play_arrow:", query_params={"dataset": chosen})
        dataset_actions.actions(listed)
