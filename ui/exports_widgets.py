"""The Results page's Share & export tab: the view's link and the run's downloads."""
from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from evaluators.read.exports import write_export
from evaluators.read.results import RunResults
from ui import state


def _download(res: RunResults, run: dict, fmt: str):
    """What a download button hands Streamlit: a function it calls on the click (never on a rerun) that
    writes the export to a temporary file a chunk of rows at a time and returns the file's bytes.

    Streamlit 1.67 reads whatever ``data`` gives (a string, bytes or a file opened for reading) into
    one bytes object and serves that from memory (``download_data_util.convert_data_to_bytes_and_infer_mime``,
    ``MemoryMediaFileStorage``): the bytes of the file are held once, not the run's rows as dicts nor
    the text beside its encoding."""
    def make() -> bytes:
        with tempfile.TemporaryDirectory(prefix="evaldash-export-") as folder:
            return write_export(res, fmt, Path(folder) / f"export.{fmt}", run).read_bytes()
    return make


def exports(res: RunResults, run: dict) -> None:
    name = "".join(ch if ch.isalnum() else "_" for ch in run["name"])[:60] or run["id"]
    c1, c2, c3 = st.columns(3)
    c1.download_button("Rows as CSV", _download(res, run, "csv"), f"{name}.csv", "text/csv", key="dl.csv")
    c2.download_button("Rows as JSONL", _download(res, run, "jsonl"), f"{name}.jsonl", "application/jsonl", key="dl.jsonl")
    c3.download_button("HTML report", _download(res, run, "html"), f"{name}.html", "text/html", key="dl.html")


# The copy button of st.code shows only while the pointer is over the code; this one is always shown.
# Our own style sheet (no data in it), scoped to the share link's container.
ALWAYS_COPY = """<style>
.st-key-share_link [data-testid="stCode"] div:has([data-testid="stElementToolbarButton"]) {
    visibility: visible !important; opacity: 1 !important; }
</style>"""


def share_link(views: list[str], came_from: str | None) -> None:
    """This view's link (URL-encoded: the run, thresholds, filters, page and selected row) with a copy
    button always shown. The link opens the tab the reader came from (``came_from``; or one of ``views``
    they pick), never this one: a reader of a shared link wants the view, not the link to it."""
    opens = st.radio("The link opens", views, index=views.index(came_from) if came_from in views else 0,
                     horizontal=True, key="share.opens")
    st.caption(f"This link opens the {opens} tab of this run, with its thresholds, filters, page and selected row, "
               "for anyone who can open the dashboard. Copy it with the button at its right.")
    with st.container(key="share_link"):
        st.html(ALWAYS_COPY)
        st.code(state.link(view=None if opens == views[0] else opens), language=None, wrap_lines=True)
