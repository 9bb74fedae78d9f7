"""ui.downloads without a browser: a token is single-use, unguessable and short-lived; a file not fetched in
time is deleted; a file whose writing failed is neither kept nor offered; a sign-in configured but unusable
serves nothing. The browser tests (tests/test_exports_download.py) serve the same registry through the route."""
from __future__ import annotations

import re
import secrets
import time

import pytest
from starlette.requests import Request

from tests.procs import wait_until
from ui import downloads
from ui.auth import PASSWORD_ENV
from ui.downloads import Export, Issued, browser_key

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "evalhome"))
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    return tmp_path / "evalhome"


def _written(text: str):
    def write(path):
        path.write_bytes(text.encode())
        return path
    return write


def test_a_token_serves_once_and_only_its_session_sees_it_ready(home):
    issued = Issued()
    token = issued.issue(_written("a,b\r\n1,2\r\n"), "run.csv", "text/csv", "session-1")
    assert issued.peek(token, "session-2") is None and issued.peek(token, "session-1").size == 10
    export = issued.take(token)
    assert export.path.read_bytes() == b"a,b\r\n1,2\r\n" and export.path.parent == home / "exports"
    assert export.path.name != "run.csv" and export.path.suffix == ".csv"  # a random name on disk, never the given one
    assert issued.take(token) is None  # a second request gets nothing


def test_a_link_bound_to_a_browser_serves_only_that_browser_and_a_refusal_does_not_spend_it(home):
    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    mine, theirs = secrets.token_bytes(32), secrets.token_bytes(32)
    first, later = generate_xsrf_token_string(mine, 1), generate_xsrf_token_string(mine, 1)
    assert first != later  # Streamlit masks the same secret differently on each page it serves
    issued = Issued()
    token = issued.issue(_written("x"), "r.csv", "text/csv", "s", browser_key(first))
    for other in (None, "", "garbage", generate_xsrf_token_string(theirs, 1)):
        assert issued.take(token, browser_key(other)) is None
    assert issued.take(token, browser_key(later)).path.read_text() == "x"  # the same browser, another page's mask
    assert issued.take(token, browser_key(later)) is None


def test_tokens_carry_256_random_bits(home):
    issued = Issued()
    tokens = {issued.issue(_written("x"), "r.csv", "text/csv", "s") for _ in range(200)}
    assert len(tokens) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{43}", t) for t in tokens)  # token_urlsafe(32): 43 characters of 6 bits
    for t in tokens:
        issued.drop(t)
    assert list((home / "exports").iterdir()) == []


def test_a_file_not_fetched_in_time_is_deleted_and_its_token_dropped(home):
    issued = Issued()
    path = home / "exports" / "waiting.csv"
    path.parent.mkdir(parents=True)
    path.write_text("a\r\n")
    token = issued.add(Export(path, "run.csv", "text/csv", "s", None, 3, time.monotonic() + 0.2))
    wait_until(lambda: not path.exists(), timeout=30, what="the file deleted at its time limit")
    assert issued.take(token) is None


def test_a_file_whose_writing_fails_is_neither_kept_nor_offered(home):
    issued = Issued()

    def half_then_fail(path):
        path.write_text("inputs.query\r\nfirst row\r\n")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        issued.issue(half_then_fail, "run.csv", "text/csv", "s")
    assert list((home / "exports").iterdir()) == []
    assert issued.drop_session("s") is None and issued._exports == {}


def test_an_unusable_sign_in_serves_nothing_even_for_a_valid_token(home, monkeypatch):
    token = downloads.issued().issue(_written("secret row\r\n"), "run.csv", "text/csv", "s")
    monkeypatch.setenv(PASSWORD_ENV, "not a digest")
    request = Request({"type": "http", "method": "GET", "path": f"/exports/{token}", "headers": [],
                       "query_string": b"", "path_params": {"token": token}})
    response = downloads.serve(request)
    assert response.status_code == 403 and b"secret row" not in response.body
    assert "content-disposition" not in response.headers
    downloads.issued().drop(token)


def test_a_links_download_is_written_on_each_request_bound_to_its_browser_and_dropped_with_its_session(home):
    """One click saves a file (issue 35): a link's token names what to write; each request it serves writes a new
    file (what the store holds then), only for its own browser, and a session gone loses its links."""
    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    mine = browser_key(generate_xsrf_token_string(secrets.token_bytes(32), 1))
    issued, clicks = Issued(), []

    def write(path):
        clicks.append(path)
        path.write_text(f"click {len(clicks)}")

    token = issued.later(write, "run.csv", "text/csv", "s1", mine)
    assert clicks == []  # nothing written before a request
    assert issued.take(token, None) is None and clicks == []  # another browser: nothing written
    first = downloads.written(**_fields(issued.take(token, mine)))
    second = downloads.written(**_fields(issued.take(token, mine)))
    assert (first.path.read_text(), second.path.read_text()) == ("click 1", "click 2") and first.path != second.path
    other = issued.later(write, "run.jsonl", "application/jsonl", "s2", mine, alive=lambda s: s == "s2")
    assert issued.take(token, mine) is None and issued.take(other, mine) is not None  # s1's link dropped


def _fields(later) -> dict:
    return {"write": later.write, "filename": later.filename, "media_type": later.media_type,
            "session": later.session, "browser": later.browser}
