"""A freshly started server's first request, straight to a page's address (a shared link, a bookmark).

Streamlit serves that request from the pages/ folder by file name before app.py has routed once; the page must
draw nothing of its own before it goes through app.py (sign-in first, when it is on), and every address must
be found. Each test starts its own server, since only the first request of a process meets this.
"""
from __future__ import annotations

import ast
import hashlib

from tests.browser import Dashboard, needs_chromium, settle
from tests.conftest import ROOT

# every text the page showed while it loaded, not only the last (a page drawn, then replaced, counts)
SEEN = """window.__seen = [];
new MutationObserver(() => { if (document.body) window.__seen.push(document.body.innerText); })
    .observe(document, {subtree: true, childList: true, characterData: true});"""


def _first_visit(browser, dash: Dashboard, path: str, text: str) -> tuple[str, object]:
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.add_init_script(SEEN)
    page.goto(dash.url + path)
    settle(page, text)
    settle(page)
    return page.evaluate("() => window.__seen.join('\\n')") + page.locator("body").inner_text(), page


@needs_chromium
def test_with_sign_in_on_the_first_request_to_a_page_shows_only_the_form(browser, recorder, tmp_path):
    digest = hashlib.sha256(b"a long shared secret").hexdigest()
    dash = Dashboard(tmp_path / "home", tmp_path / "logs", recorder, EVAL_DASHBOARD_PASSWORD_SHA256=digest)
    try:
        seen, page = _first_visit(browser, dash, "/compare?run=abc&with=def", "sign in to continue")
        assert "Compare runs" not in seen and "Pick" not in seen  # nothing of the page, not even its title
        assert page.get_by_role("button", name="Sign in").count() == 1
        assert page.url == dash.url + "/compare?run=abc&with=def"  # the link is kept for after signing in
    finally:
        dash.stop()


@needs_chromium
def test_without_sign_in_the_first_request_to_every_named_page_finds_it(browser, recorder, tmp_path):
    dash = Dashboard(tmp_path / "home", tmp_path / "logs", recorder)
    try:
        seen, page = _first_visit(browser, dash, "/new", "New evaluation")
        assert "Page not found" not in seen and "You have requested a page that does not exist" not in seen
        assert page.locator("h1").first.inner_text() == "New evaluation"
    finally:
        dash.stop()


def test_every_page_goes_through_the_router_before_it_draws():
    """The first statement after a page's imports is ``w.entry()``: a new page that forgets it would draw its
    own output to a fresh server's first visitor, signed in or not."""
    pages = sorted((ROOT / "pages").glob("*.py"))
    assert len(pages) == 14
    for page in pages:
        body = [n for n in ast.parse(page.read_text()).body
                if not isinstance(n, (ast.Import, ast.ImportFrom)) and not (isinstance(n, ast.Expr)
                                                                            and isinstance(n.value, ast.Constant))]
        first = ast.unparse(body[0])
        assert first == "w.entry()", f"{page.name}: first statement is {first!r}"
