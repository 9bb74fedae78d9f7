"""``app()``: runs app.py under Streamlit's AppTest and opens a page with query parameters, as a
browser would (the fixtures ``fresh_caches`` and ``home_store`` are in conftest.py)."""
from __future__ import annotations

import pytest

from tests.conftest import ROOT

st_testing = pytest.importorskip("streamlit.testing.v1")


def app(path: str | None = None, at=None, allow_errors: bool = False, **params):
    """Run app.py (in ``at``, or a new AppTest), then open the page at ``path`` with ``params`` in the URL.

    Fails on any exception, and on any error message unless ``allow_errors`` (pages that are
    expected to say what went wrong)."""
    if at is None:  # (not `at or`: an AppTest that has not run yet is falsy)
        at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    if path:
        at.switch_page(path)
        at.query_params.update(params)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    if not allow_errors:
        assert not at.error, [e.value for e in at.error]
    return at


def configured_app(page: str | None = None, secrets: dict | None = None, user: dict | None = None, **params):
    """tests.apptest.app with the server's secrets and the signed-in user set first (error messages allowed:
    these tests read what the pages say)."""
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if secrets:
        at.secrets.update(secrets)
    if user is not None:
        at.user = user
    return app(page, at, allow_errors=True, **params)


def shown_text(at) -> str:
    """Everything the page rendered as text, Markdown, captions, alerts, tables and labels."""
    parts = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader"):
        parts += [as_read(e.value) for e in getattr(at, kind)]
    parts += [str(e.value) for kind in ("text", "code") for e in getattr(at, kind)]
    parts += [e.value.to_csv() for e in at.dataframe]
    parts += [as_read(e.label) for e in at.expander] + [as_read(e.label) for e in at.metric]
    return "\n".join(parts)


def as_read(markdown: object) -> str:
    """Markdown's source as a person reads it: the escapes of ui.widgets.plain undone (backslashes before
    punctuation, the invisible word joiners)."""
    import re

    from ui.widgets import JOINER

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown)).replace(JOINER, "")
