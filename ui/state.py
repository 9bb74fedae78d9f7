"""View state in the URL's query string, so a copied link opens the same view.

Widgets are bound with Streamlit's own ``bind="query-params"`` (the widget key is the
parameter name). This module covers the rest: what a view is *of* (pinned even at its
default) and state that is no widget's (the selected row).
"""
from __future__ import annotations

from typing import Any, Callable
from urllib.parse import quote, urlencode

import streamlit as st

URL = "query-params"  # the value of a widget's ``bind``


def read(param: str, default: Any = None, parse: Callable[[str], Any] = str) -> Any:
    raw = st.query_params.get(param)
    try:
        return parse(raw) if raw is not None else default
    except (TypeError, ValueError):
        return default


def write(param: str, value: Any) -> None:
    """Put a value that no widget owns in the URL (None takes it out)."""
    if value is None:
        st.query_params.pop(param, None)
    elif st.query_params.get(param) != str(value):
        st.query_params[param] = str(value)


def read_row() -> int | None:
    """The selected row's index (from 0) the URL names: ``row`` counts from 1, as every page does ("Row 1"), so
    that a link's number is the one a reader sees. None: the URL names no row (or not a number); a number below 1
    gives a negative index, which every page's bounds check reports as a row it does not have."""
    n = read("row", None, int)
    return None if n is None else n - 1


def row_param(index: int) -> str:
    """The URL's ``row`` for the row at ``index`` (from 0): counted from 1. The one place the two countings meet."""
    return str(index + 1)


def write_row(index: int | None) -> None:
    """Select the row at ``index`` (from 0) in the URL (None takes the selection out)."""
    write("row", None if index is None else row_param(index))


def pick(label: str, param: str, options: list[str], newest: str | None, **kwargs: Any) -> str | None:
    """A selectbox for what a view is *of* (a run, a dataset), pinned in the URL.

    The URL is the source of truth (a link or ``switch_page`` sets it); the newest option is
    written in when none is given, so a shared link keeps pointing at the same thing after
    newer ones appear. Not bound natively: a bound widget drops its parameter at its default.
    """
    if not options:
        if st.query_params.get(param) is not None:
            not_found(label, param, st.query_params.get(param))
        return None
    value = st.selectbox(label, options, index=options.index(current(param, options, newest, label)), **kwargs)
    write(param, value)
    return value


def current(param: str, options: list[str], newest: str | None, what: str | None = None) -> str:
    """The option the URL names, else the newest (then written in: a shared link keeps pointing at it).

    A URL naming something this page does not have (a mistyped link, a deleted run) stops the page with
    :func:`not_found`: showing the newest in its place would have a teammate read another run's numbers
    as the linked one's.
    """
    chosen = st.query_params.get(param)
    if chosen is None:
        chosen = newest if newest in options else options[0]
        write(param, chosen)
    elif chosen not in options:
        not_found(what or param, param, chosen)
    return chosen


def not_found(what: str, param: str, value: str) -> None:
    """Say that the link names a ``what`` this page does not have, offer the page without it, and stop."""
    st.error(f"{what.capitalize()} not found: the link names one this page does not have (it may have been deleted, "
             "or it is not of the kind this page shows).")
    st.text(f"{param} = {value}")  # as text: a link's value is anyone's
    if st.button(f"Open this page without it (the newest {what.lower()})", key=f"state.not_found.{param}"):
        st.query_params.pop(param, None)
        st.rerun()
    st.stop()


def choose(label: str, param: str, options: list[str], format_func: Callable[[str], str], where: Any = st,
           **kwargs: Any) -> str:
    """A selectbox whose choice lives in the URL as the option itself (a metric's key), shown through ``format_func``
    (its readable name): Streamlit's own binding would put the shown text in the URL, and a link would then break
    when a name is reworded. The first option is the default and leaves the URL; one the URL names that is not an
    option is read as the default. ``where``: a column or container to draw it in."""
    named = st.query_params.get(param)
    value = named if named in options else options[0]
    # keyed by the URL's value: a link or another widget changing it is the value shown, never a stale one
    picked = where.selectbox(label, options, index=options.index(value), format_func=format_func,
                             key=f"{param}.{value}", **kwargs)
    write(param, None if picked == options[0] else picked)
    return picked


def pick_many(label: str, param: str, options: list[str], **kwargs: Any) -> list[str]:
    """A multiselect whose choice lives in the URL as comma-separated values (order kept)."""
    named = [x for x in (st.query_params.get(param) or "").split(",") if x]
    chosen = [x for x in named if x in options]
    if len(chosen) < len(named):
        not_found(label, param, ",".join(x for x in named if x not in options))
    value = st.multiselect(label, options, default=chosen, **kwargs)
    write(param, ",".join(value) or None)
    return value


def selected(event, n_rows: int) -> int | None:
    """The position a table's single-row selection points at, if it is still inside the table.

    A selection outlives the table it was made in: filter the table and Streamlit hands back the
    old position, which may now be past the end (or name another row, so views keep the row's id
    in the URL, not its position).
    """
    rows = event.selection.rows if event is not None and event.selection else []
    return rows[0] if rows and 0 <= rows[0] < n_rows else None


def link(**changes: str | None) -> str:
    """This view's address: the page's URL and every query parameter, URL-encoded (a value such as
    ``Share & export`` stays one value), so that opening it in another browser shows the same view;
    ``changes`` set parameters to other values (None leaves one out)."""
    base = str(getattr(st.context, "url", "") or "").split("?")[0]
    params = {**st.query_params.to_dict(), **changes}
    query = urlencode([(k, v) for k, v in params.items() if v is not None], quote_via=quote)
    return f"{base}?{query}" if query else base
