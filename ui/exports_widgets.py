"""The Results page's Share & export tab: the view's link and the run's downloads."""
from __future__ import annotations

import streamlit as st

from evaluators.read.exports import csv_text, jsonl_text
from evaluators.read.report import html_report
from evaluators.read.results import RunResults
from ui import state


def exports(res: RunResults, run: dict) -> None:
    name = "".join(ch if ch.isalnum() else "_" for ch in run["name"])[:60] or run["id"]
    c1, c2, c3 = st.columns(3)
    c1.download_button("Rows as CSV", lambda: csv_text(res.rows()), f"{name}.csv", "text/csv", key="dl.csv")
    c2.download_button("Rows as JSONL", lambda: jsonl_text(res.rows()), f"{name}.jsonl", "application/jsonl", key="dl.jsonl")
    c3.download_button("HTML report", lambda: html_report(res, run), f"{name}.html", "text/html", key="dl.html")


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
