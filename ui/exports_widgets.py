"""The Results page's Share & export tab: the view's link and the run's downloads."""
from __future__ import annotations

import streamlit as st

from evaluators.exports import csv_text, jsonl_text
from evaluators.report import html_report
from evaluators.results import RunResults
from ui import state


def exports(res: RunResults, run: dict) -> None:
    name = "".join(ch if ch.isalnum() else "_" for ch in run["name"])[:60] or run["id"]
    c1, c2, c3 = st.columns(3)
    c1.download_button("Rows as CSV", lambda: csv_text(res.rows()), f"{name}.csv", "text/csv", key="dl.csv")
    c2.download_button("Rows as JSONL", lambda: jsonl_text(res.rows()), f"{name}.jsonl", "application/jsonl", key="dl.jsonl")
    c3.download_button("HTML report", lambda: html_report(res, run), f"{name}.html", "text/html", key="dl.html")


def share_link() -> None:
    """This view's link (URL-encoded; run, tab, filters, thresholds, page and row), with a copy button."""
    st.code(state.link(), language=None, wrap_lines=True)
