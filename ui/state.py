"""View state that lives in the URL's query string, so a copied link opens the same view.

A widget bound with :func:`bound` takes its first value from the URL, writes its
value back on every run, and follows the URL when a link changes it.
"""
from __future__ import annotations

from typing import Any, Callable

import streamlit as st


def _seed(param: str, default: Any, parse: Callable[[str], Any], options: list | None) -> None:
    wkey, last = f"url:{param}", f"url-last:{param}"
    raw = st.query_params.get(param)
    stale = wkey not in st.session_state or (raw is not None and raw != st.session_state.get(last))
    if stale:
        try:
            value = parse(raw) if raw is not None else default
        except (TypeError, ValueError):
            value = default
        st.session_state[wkey] = value
    if options is not None and st.session_state[wkey] not in options:
        st.session_state[wkey] = default if default in options else (options[0] if options else None)


def write(param: str, value: Any, default: Any = None, fmt: Callable[[Any], str] = str) -> None:
    """Put a value in the URL (or take it out when it is the default)."""
    if value is None or value == default or value == [] or value == "":
        if param in st.query_params:
            del st.query_params[param]
        st.session_state.pop(f"url-last:{param}", None)
    else:
        text = fmt(value)
        if st.query_params.get(param) != text:
            st.query_params[param] = text
        st.session_state[f"url-last:{param}"] = text


def bound(widget: Callable, label: str, param: str, default: Any = None, *, parse: Callable[[str], Any] = str,
          fmt: Callable[[Any], str] = str, options: list | None = None, **kwargs: Any) -> Any:
    """Render ``widget`` with its value kept in the query parameter ``param``."""
    _seed(param, default, parse, options)
    if options is not None:
        kwargs["options"] = options
    value = widget(label, key=f"url:{param}", **kwargs)
    write(param, value, default, fmt)
    return value


def read(param: str, default: Any = None, parse: Callable[[str], Any] = str) -> Any:
    raw = st.query_params.get(param)
    try:
        return parse(raw) if raw is not None else default
    except (TypeError, ValueError):
        return default


def as_list(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def join(values: list[str]) -> str:
    return ",".join(values)


def current(param: str, default: Any = None, parse: Callable[[str], Any] = str) -> Any:
    """A bound widget's value as of this rerun (its new value if just changed), else the URL's."""
    key = f"url:{param}"
    if key in st.session_state:
        return st.session_state[key]
    return read(param, default, parse)
