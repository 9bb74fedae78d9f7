"""Sign-in: with a password or OIDC configured, every address shows only the sign-in form until the user
signs in; off without configuration; runs and datasets record who created them. AppTest on a real store
and loopback judge, and headless Chromium against a real `streamlit run` (browser tests at the end).
"""
from __future__ import annotations

import hashlib

import pytest

from evaluators import JudgeConfig, Store, evaluate
from evaluators.data import load_dataset
from tests.apptest import configured_app as app, shown_text
from tests.browser import LOCAL_HOSTS, Dashboard, hosts, needs_chromium, settle, watched_page
from tests.conftest import CONVERSATIONS, ROOT, SINGLE, wait_for_run

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

PASSWORD = "correct horse battery staple"


# ---------------------------------------------------------------- sign-in, in AppTest

@pytest.fixture
def password_on(monkeypatch):
    monkeypatch.setenv("EVAL_DASHBOARD_PASSWORD_SHA256", hashlib.sha256(PASSWORD.encode()).hexdigest())


def _only_sign_in(at) -> None:
    assert not at.dataframe and not at.metric and not at.tabs
    assert {b.label for b in at.button} <= {"Sign in"} and len(at.text_input) == 2


def test_password_mode_guards_every_page_and_records_who_created(home_store, judge_server, password_on):
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = evaluate(SINGLE, ["coherence", "f1_score"], judge=judge, store=home_store).run_id
    # AppTest cannot open another address while the pages are registered but not run (its
    # switch_page waits for the page); the browser test below opens a deep link. Here: the
    # default address with a view's parameters, before and after signing in.
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(run=rid, row="2", view="Rows")
    at.run()
    _only_sign_in(at)
    assert rid not in shown_text(at) and "coherence" not in shown_text(at)
    # (typing the password is tested in the browser: AppTest reruns a page registered under two
    # addresses as a pages/ file). A signed-in session sees the views and is recorded as creator.
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["auth.user"] = "Ana"
    at.run()
    assert not at.exception and any(b.key == "home.sample" for b in at.button)  # the home page
    assert any(t.value == "Ana" for t in at.sidebar.text)
    at.switch_page("pages/results.py")
    at.query_params["run"] = rid
    at.run()
    assert {m.label for m in at.metric} >= {"Rows", "coherence pass rate"}
    # runs and datasets record who created them; the Runs list shows it
    at.switch_page("pages/new_run.py").run()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at.query_params["dataset"] = did
    at.run()
    at.checkbox(key="new.metric.f1_score").check().run()
    at.button(key="new.start").click().run()
    new = home_store.list_runs()[0]
    assert new["created_by"] == "Ana"
    assert wait_for_run(home_store, new["id"])["status"] == "completed"
    at.switch_page("pages/runs.py").run()
    # one link a run, newest first, labelled with the run's name and its line (inline code spans)
    lines = [e.proto.label for e in at.get("page_link") if "run=" in e.proto.query_string]
    assert lines[0].endswith(" by Ana `") and "by " not in lines[1]


def test_password_hash_is_compared_in_constant_time_on_the_digest():
    from ui.auth import check_password

    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    assert check_password(PASSWORD, digest) and not check_password(PASSWORD + " ", digest)
    assert not check_password("", digest)


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


def test_created_by_column_is_added_to_an_existing_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    s = Store(url)
    rid = evaluate(SINGLE, ["f1_score"], store=s).run_id
    with s.engine.begin() as c:  # a store made before the column existed
        c.exec_driver_sql("ALTER TABLE runs DROP COLUMN created_by")
        c.exec_driver_sql("ALTER TABLE datasets DROP COLUMN created_by")
    s.engine.dispose()
    s = Store(url)
    assert s.get_run(rid)["created_by"] is None and s.list_datasets()[0]["created_by"] is None
    s.update_run(rid, created_by="Ana")
    assert s.get_run(rid)["created_by"] == "Ana"
    did = s.save_dataset(load_dataset(CONVERSATIONS), created_by="Bo")
    assert {d["id"]: d["created_by"] for d in s.list_datasets()}[did] == "Bo"
    assert s.save_dataset(load_dataset(CONVERSATIONS), created_by="Cy") == did  # same content: first creator kept
    assert {d["id"]: d["created_by"] for d in s.list_datasets()}[did] == "Bo"


# ---------------------------------------------------------------- in the browser

@needs_chromium
def test_with_a_password_a_deep_link_shows_only_the_sign_in_form(browser, recorder, judge_server, tmp_path):
    home = tmp_path / "evalhome"
    store = Store(f"sqlite:///{home / 'evals.db'}")
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = evaluate(SINGLE, ["coherence"], judge=judge, store=store).run_id
    store.update_run(rid, name="quarterly-eval-do-not-leak")
    store.engine.dispose()
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    requests: list[str] = []
    dash = Dashboard(home, tmp_path / "server-logs", recorder, EVAL_DASHBOARD_PASSWORD_SHA256=digest)
    try:
        page = watched_page(browser, requests)
        link = f"{dash.url}/results?run={rid}&view=Rows&row=2"
        page.goto(link)
        settle(page, "sign in to continue")
        main = page.locator('[data-testid="stMain"]')
        assert "quarterly-eval" not in main.inner_text() and "coherence" not in main.inner_text()
        assert page.locator('[data-testid="stDataFrame"], [data-testid="stMetric"], [data-testid="stTabs"]').count() == 0
        assert page.locator('[data-testid="stSidebarNav"]').count() == 0  # not even the page list
        page.get_by_role("textbox", name="Your name").fill("Ana")
        page.get_by_role("textbox", name="Password").fill("not it")
        page.get_by_role("button", name="Sign in").click()
        settle(page, "Wrong password.")
        assert page.locator('[data-testid="stMetric"]').count() == 0
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        settle(page, "coherence pass rate")  # the deep link's own view, once signed in
        assert f"run={rid}" in page.url and "row=2" in page.url
        assert page.get_by_role("tab", name="Rows").get_attribute("aria-selected") == "true"
        assert PASSWORD not in page.url and not any(PASSWORD in u for u in requests)
    finally:
        dash.stop()
    assert hosts(requests) <= LOCAL_HOSTS
    assert recorder.seen == []  # nor did the server (Streamlit's external-IP lookup)
