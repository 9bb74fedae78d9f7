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
