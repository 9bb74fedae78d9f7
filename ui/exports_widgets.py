"""The Results page's Share & export tab: the view's link and the run's downloads."""
from __future__ import annotations

import streamlit as st

from evaluators.read.exports import write_export
from evaluators.read.results import RunResults
from evaluators.review.io import review_keys
from ui import downloads, loaders, state

# format -> (link, content type)
FORMATS = {"csv": ("Rows as CSV", "text/csv"), "jsonl": ("Rows as JSONL", "application/jsonl"),
           "html": ("HTML report", "text/html")}


def exports(res: RunResults, run: dict) -> None:
    """The run's downloads, one link each: a click has the server write the export then, a chunk of rows at a time,
    to a file that the same request streams from disk (ui.downloads). Streamlit's own download button would hold
    the whole file in the server's memory (1.4 GB for a 100,000-row CSV)."""
    name = "".join(ch if ch.isalnum() else "_" for ch in run["name"])[:60] or run["id"]
    rows, filters = _filtered(res, run)
    # what a file holds: a link made for other thresholds, rows or results is not kept
    view = [run["id"], getattr(res, "state", None), sorted(res.thresholds.items()),
            None if rows is None else repr(sorted(filters.items()))]
    store, rid = loaders.store(), run["id"]  # people's verdicts beside the judge's, in CSV and JSONL
    for col, fmt in zip(st.columns(3), FORMATS):
        label, media_type = FORMATS[fmt]

        def write(path, fmt=fmt):
            write_export(res, fmt, path, run, rows, lambda idx: review_keys(store, rid, res, idx))

        with col:
            downloads.link(downloads.later(f"export.{fmt}", view, write, f"{name}.{fmt}", media_type),
                           f"{name}.{fmt}", label)
    n = len(res.dataset) if rows is None else len(rows)
    st.caption(f"A click writes the file ({n:,} rows; the HTML report's summary is every row's) and saves it. "
               "These links work from this page, in this browser.")


def _filtered(res: RunResults, run: dict) -> tuple[list[int] | None, dict]:
    """The rows the Rows tab's filters (as last set there in this session) leave, when the user asks for only
    them and they are not every row: (their indices, the filters); else (None, {})."""
    from ui.rows import matching

    kept = st.session_state.get("results.filters")
    if not kept or kept[0] != run["id"]:
        return None, {}
    ids = [int(i) for i in matching(res, kept[1])]
    if len(ids) == len(res.dataset):
        return None, {}
    if st.toggle(f"Only the filtered rows: {len(ids):,} of {len(res.dataset):,}, as the Rows tab's filters leave "
                 "them", key="export.filtered"):
        return ids, kept[1]
    return None, {}


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
