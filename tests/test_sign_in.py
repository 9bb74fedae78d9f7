"""Sign-in: with a password or OIDC configured, every address shows only the sign-in form until the user
signs in; off without configuration; runs and datasets record who created them. AppTest on a real store
and loopback judge, and headless Chromium against a real `streamlit run` (browser tests at the end).
"""
from __future__ import annotations

import hashlib
from urllib.parse import urlencode

import pytest

from evaluators import JudgeConfig, Store, evaluate
from evaluators.data.loading import load_dataset
from tests.apptest import configured_app as app, shown_text
from tests.browser import LOCAL_HOSTS, Dashboard, hosts, needs_chromium, settle, watched_page
from tests.conftest import CONVERSATIONS, ROOT, SINGLE, app_pages, default_store, wait_for_run
from ui.auth import USER

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

PASSWORD = "correct horse battery staple"


# ---------------------------------------------------------------- sign-in, in AppTest

@pytest.fixture
def password_on(monkeypatch):
    monkeypatch.setenv("EVAL_DASHBOARD_PASSWORD_SHA256", hashlib.sha256(PASSWORD.encode()).hexdigest())


NAME = "quarterly-eval-do-not-leak"


def _runs_to_hide(store, judge_server) -> tuple[dict[str, str], list[str]]:
    """Two completed runs; a deep link's query naming them (every parameter a page reads), and what of them a
    signed-out page must never show."""
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    a = evaluate(SINGLE, ["coherence", "f1_score"], judge=judge, store=store).run_id
    b = evaluate(SINGLE, ["coherence", "f1_score"], judge=judge, store=store).run_id
    store.update_run(a, name=NAME)
    store.update_run(b, name=f"{NAME}-b")
    did = store.get_run(a)["dataset_id"]
    query = {"run": a, "base": a, "runs": b, "dataset": did, "row": "3", "view": "Rows", "q": "quarterly"}
    return query, [NAME, a, b, did, "coherence", "f1_score", load_dataset(SINGLE).name]


def _only_sign_in(at, hidden: list[str]) -> None:
    """The sign-in form and nothing else: no page of the app ran, nothing of ``hidden`` shows."""
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["evaldash"]
    assert [w.label for w in at.text_input] == ["Your name", "Password"] and [b.label for b in at.button] == ["Sign in"]
    assert not at.dataframe and not at.metric and not at.tabs and not at.get("page_link") and not at.sidebar.children
    assert "routed" not in at.session_state  # app.py's gate never let a page through (ui.widgets.guard)
    text = shown_text(at)
    assert [h for h in hidden if h in text] == []


@pytest.fixture
def routed_as_on_a_server(monkeypatch):
    """Runs go through app.py's router, as on a server. Because a pages/ folder exists, Streamlit serves its files
    directly ("legacy" multipage mode) until that is turned off, which a server does for good when ui is first
    imported (ui/__init__.py); AppTest turns it back on before every run, so off here too. (A fresh server's first
    request, still in that mode, is the browser test's first address.)"""
    from streamlit.runtime.pages_manager import PagesManager

    init = PagesManager.__init__

    def server_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", server_init)


def test_signed_out_every_address_and_deep_link_shows_only_the_sign_in_form(home_store, judge_server, password_on,
                                                                            routed_as_on_a_server):
    pages = app_pages()
    assert len(pages) == 14  # app.py's navigation (a page added there is tested here; update the count)
    # every page file is in it: Streamlit's legacy mode would serve a pages/ file that app.py does not route
    assert {file for file, _ in pages} == {f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py")}
    deep, hidden = _runs_to_hide(home_store, judge_server)
    for file, _ in pages:
        for query in ({}, deep):
            at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
            at.session_state[USER] = "Ana"
            at.run()  # signed in, app.py registers its pages: switch_page can then open each one's address
            at.switch_page(file)
            at.query_params.update(query)
            for key in (USER, "routed"):  # ...and signed out, as the Sign out button does (ui.auth._sign_out)
                del at.session_state[key]
            at.run()
            _only_sign_in(at, hidden)
            assert {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()} == query  # link kept




@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_signed_in_session_sees_the_views_and_is_recorded_as_creator(home_store, judge_server, password_on):
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = evaluate(SINGLE, ["coherence", "f1_score"], judge=judge, store=home_store).run_id
    # (typing the password is tested in the browser: AppTest reruns a page registered under two
    # addresses as a pages/ file). A signed-in session sees the views and is recorded as creator.
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state[USER] = "Ana"
    at.run()
    assert not at.exception and any(b.key == "home.sample" for b in at.button)  # the home page
    assert any(t.value == "Ana" for t in at.sidebar.text)
    at.switch_page("pages/results.py")
    at.query_params["run"] = rid
    at.run()
    assert {m.label for m in at.metric} >= {"Rows", "Coherence pass rate"}
    # runs and datasets record who created them; the Runs list shows it
    at.switch_page("pages/new.py").run()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at.query_params["dataset"] = did
    at.run()
    at.checkbox(key="new.metric.f1_score").check().run()
    at.button(key="new.start").click().run()
    new = home_store.list_runs()[0]
    assert new["created_by"] == "Ana"
    assert wait_for_run(home_store, new["id"])["status"] == "completed"
    at.switch_page("pages/runs.py").run()
    # a row a run, newest first, its author in a column of its own
    assert list(at.dataframe[0].value["author"])[:2] == ["Ana", ""]


def test_password_check_goes_through_hmac_compare_digest_on_equal_length_digests(monkeypatch):
    import hmac

    from ui import auth

    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    assert auth.check_password(PASSWORD, digest) is True
    assert auth.check_password(PASSWORD + " ", digest) is False
    assert auth.check_password("", digest) is False
    assert auth.check_password("é" * 500, digest) is False  # a long password: still one digest against the other
    assert len(calls) == 4  # every check went through it, none short-circuited before
    for given, expected in calls:
        assert type(given) is bytes and type(expected) is bytes and len(given) == len(expected) == 64
        assert expected == digest.encode()
    assert calls[0][0] == digest.encode()  # the typed password's digest against the configured one
    assert calls[1][0] == hashlib.sha256(f"{PASSWORD} ".encode()).hexdigest().encode()


OIDC = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "c" * 32, "client_id": "evaldash",
        "client_secret": "s", "server_metadata_url": "https://idp.example/.well-known/openid-configuration"}


@pytest.fixture
def authlib(monkeypatch):
    """Authlib>=1.3.2 present, as st.login needs (it is not a dependency: OIDC's operators install it)."""
    from ui import auth

    monkeypatch.setattr(auth, "authlib_ready", lambda: True)


def test_oidc_config_is_read_and_gates_every_page(home_store, authlib):
    at = app(secrets={"auth": OIDC})
    assert [b.label for b in at.button] == ["Sign in"] and not at.dataframe and not at.metric
    at = app(secrets={"auth": {"redirect_uri": OIDC["redirect_uri"], "cookie_secret": "c" * 32,
                               "google": {k: OIDC[k] for k in ("client_id", "client_secret", "server_metadata_url")},
                               "okta": {k: OIDC[k] for k in ("client_id", "client_secret", "server_metadata_url")}}})
    assert [b.label for b in at.button] == ["Sign in with google", "Sign in with okta"]
    # a signed-in user (as Streamlit's st.user reports one) sees the pages, under their e-mail
    at = app(secrets={"auth": OIDC}, user={"is_logged_in": True, "email": "ana@example.org"})
    assert any("Score what" in m.value for m in at.markdown) and any(t.value == "ana@example.org" for t in at.sidebar.text)


def test_sign_in_is_off_without_configuration(home_store):
    at = app()
    assert any("Score what" in m.value for m in at.markdown) and not at.text_input


def test_created_by_column_is_added_to_an_existing_store(tmp_path, new_store_url):
    url = new_store_url("old")
    s = Store(url)
    rid = evaluate(SINGLE, ["f1_score"], store=s).run_id
    with s.engine.begin() as c:  # a store made before the column existed (and before schema versions)
        c.exec_driver_sql("ALTER TABLE runs DROP COLUMN created_by")
        c.exec_driver_sql("ALTER TABLE datasets DROP COLUMN created_by")
        c.exec_driver_sql("ALTER TABLE runs DROP COLUMN archived_at")  # came later (migration 0009)
        c.exec_driver_sql("ALTER TABLE datasets DROP COLUMN archived_at")
        c.exec_driver_sql("DROP TABLE alembic_version")
        c.exec_driver_sql("DROP TABLE run_chunks")
        for t in ("align_promotions", "align_test_uses", "align_splits",  # later still (0012: alignment;
                  "monitor_alert_events", "monitor_alert_rules",  # 0010: alerts)
                  "monitor_redactions", "monitor_decisions", "monitor_rules", "monitor_logs", "monitor_spans", "monitor_traces",
                  "monitor_tokens", "monitor_projects"):  # the monitor's tables came later still (migrations 0004, 0006)
            c.exec_driver_sql(f"DROP TABLE {t}")
    s.engine.dispose()
    from evaluators.core.errors import StoreVersionError
    from evaluators.store import migrate

    with pytest.raises(StoreVersionError, match="db upgrade"):
        Store(url)  # refused, unchanged, with what to run
    migrate.upgrade(s.engine)  # what `python -m evaluators db upgrade` does
    s = Store(url)
    assert s.get_run(rid)["created_by"] is None and s.list_datasets()[0]["created_by"] is None
    s.update_run(rid, created_by="Ana")
    assert s.get_run(rid)["created_by"] == "Ana"
    did = s.save_dataset(load_dataset(CONVERSATIONS), created_by="Bo")
    assert {d["id"]: d["created_by"] for d in s.list_datasets()}[did] == "Bo"
    assert s.save_dataset(load_dataset(CONVERSATIONS), created_by="Cy") == did  # same content: first creator kept
    assert {d["id"]: d["created_by"] for d in s.list_datasets()}[did] == "Bo"


# ---------------------------------------------------------------- in the browser

# Every text the page showed while it loaded, not only the last: a page that rendered, then gave way to the form, counts
SEEN = """window.__seen = [];
new MutationObserver(() => { if (document.body) window.__seen.push(document.body.innerText); })
    .observe(document, {subtree: true, childList: true, characterData: true});"""
NOT_SIGNED_IN = ('[data-testid="stSidebarNav"], [data-testid="stDataFrame"], [data-testid="stMetric"], '
                 '[data-testid="stTabs"], [data-testid="stPageLink"], [data-testid="stSidebar"] button')


def _only_the_form(page, hidden: list[str], link: str) -> None:
    seen = page.evaluate("() => window.__seen.join('\\n')") + page.locator("body").inner_text()
    assert [h for h in hidden if h in seen] == [], link
    assert page.locator("h1").all_inner_texts() == ["evaldash"], link
    assert page.get_by_role("textbox").count() == 2 and page.get_by_role("textbox", name="Password").count() == 1
    assert page.get_by_role("button", name="Sign in").count() == 1, link
    assert page.locator(NOT_SIGNED_IN).count() == 0, link  # not even the page list


@needs_chromium
def test_with_a_password_every_address_shows_only_the_form_and_a_deep_link_opens_once_signed_in(
        browser, recorder, judge_server, tmp_path):
    home = tmp_path / "evalhome"
    store = default_store(home)
    deep, hidden = _runs_to_hide(store, judge_server)
    store.engine.dispose()
    paths = [f"/{path}" for _, path in app_pages()]
    assert len(paths) == 14  # app.py's navigation, as in the AppTest above
    requests: list[str] = []
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    dash = Dashboard(home, tmp_path / "server-logs", recorder, EVAL_DASHBOARD_PASSWORD_SHA256=digest)
    try:
        page = watched_page(browser, requests)
        page.add_init_script(SEEN)
        # non-root addresses first: a fresh server's first request meets Streamlit's legacy pages/ mode, where
        # the page's own file runs before app.py's gate (ui/__init__.py, ui.widgets.guard)
        for path in sorted(paths, key=lambda p: p == "/"):
            for link in (path, f"{path}?{urlencode(deep)}"):
                page.goto(dash.url + link)
                settle(page, "sign in to continue")
                page.get_by_role("button", name="Sign in").wait_for()  # the form's last element
                # and its fields: in one run on a loaded machine the button was drawn and the fields were not yet
                page.get_by_role("textbox", name="Your name").wait_for()
                page.get_by_role("textbox", name="Password").wait_for()
                settle(page)
                _only_the_form(page, hidden, link)
                assert page.url == dash.url + link  # the address and its query are kept
        page.goto(f"{dash.url}/results?{urlencode(deep)}")
        settle(page, "sign in to continue")
        page.get_by_role("textbox", name="Your name").fill("Ana")
        page.get_by_role("textbox", name="Password").fill("not it")
        page.get_by_role("button", name="Sign in").click()
        settle(page, "Wrong password.")
        assert page.locator('[data-testid="stMetric"]').count() == 0
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        settle(page, "Coherence pass rate")  # the deep link's own view, once signed in
        assert f"run={deep['run']}" in page.url and "row=3" in page.url
        assert page.get_by_role("tab", name="Rows").get_attribute("aria-selected") == "true"
        assert PASSWORD not in page.url and not any(PASSWORD in u for u in requests)
        # signed in, the sidebar lists the app's pages: the addresses tested above are all of them (past 12 pages,
        # Streamlit shows 10 and a "View more" button)
        more = page.locator('[data-testid="stSidebarNavViewButton"]')
        if more.count():
            more.click()
            page.wait_for_function(f"() => document.querySelectorAll('[data-testid=\"stSidebarNav\"] a').length "
                                   f">= {len(paths)}")
        links = page.locator('[data-testid="stSidebarNav"] a').evaluate_all("as => as.map(a => a.pathname)")
        assert sorted(links) == sorted(paths)
    finally:
        dash.stop()
    assert hosts(requests) <= LOCAL_HOSTS
    assert recorder.seen == []  # nor did the server (Streamlit's external-IP lookup)
