"""A sign-in that is configured but unusable never serves the app: every address shows what is wrong and
where (the file, the variable), as text, with no secret's value and no traceback. No configuration at all
leaves sign-in off. AppTest on the real secrets reading (a secrets file in tmp), and headless Chromium
against a real `streamlit run` whose secrets.toml does not parse.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest

from evaluators import JudgeConfig, evaluate
from tests.apptest import shown_text
from tests.browser import LOCAL_HOSTS, free_port, hosts, needs_chromium, watched_page
from tests.conftest import ROOT, SINGLE, app_pages, default_store, env_for_home
from tests.procs import wait_until
from ui.auth import PASSWORD_ENV

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

DIGEST = hashlib.sha256(b"correct horse battery staple").hexdigest()
COOKIE, CLIENT_SECRET = "cookie-secret-4f1e0b9c2d", "client-secret-77ac31d5e0"
REFUSED = "Sign-in is configured but cannot be used, so this dashboard shows nothing until it is fixed."
AUTH = f'''[auth]
redirect_uri = "http://localhost:8501/oauth2callback"
cookie_secret = "{COOKIE}"
client_id = "evaldash"
client_secret = "{CLIENT_SECRET}"
server_metadata_url = "https://idp.example/.well-known/openid-configuration"
'''
SECRETS = [DIGEST, COOKIE, CLIENT_SECRET, "the password itself"]  # never on a page


@pytest.fixture
def secrets_file(tmp_path, monkeypatch):
    """Streamlit reads its secrets (st.secrets, which st.login and st.user read too) from this one file, which the
    test writes or not. What it parsed is dropped before and after, and no watcher is left on the file."""
    from streamlit.runtime.secrets import secrets_singleton
    from streamlit.testing.v1.util import patch_config_options

    path = tmp_path / "streamlit" / "secrets.toml"
    path.parent.mkdir()
    monkeypatch.setattr(secrets_singleton, "_file_watchers_installed", True)
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    secrets_singleton._reset()
    with patch_config_options({"secrets.files": [str(path)]}):
        yield path
    secrets_singleton._reset()


def _gate(query: dict | None = None):
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(query or {})
    return at.run()


def _refused(at, *says: str) -> str:
    """Only the refusal: a title, one fixed error line, the problem as plain text, a caption. No form, no page."""
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["evaldash"] and [e.value for e in at.error] == [REFUSED]
    assert len(at.text) == 1 and not at.markdown and len(at.caption) == 1
    assert not at.text_input and not at.button and not at.dataframe and not at.metric and not at.get("page_link")
    assert not at.sidebar.children and "routed" not in at.session_state  # no page of the app ran
    problem = at.text[0].value
    for part in says:
        assert part in problem, problem
    assert [s for s in SECRETS if s in shown_text(at)] == []
    return problem


CASES = {
    # a valid password, then a stray line: the file does not parse
    "unparseable": (f'[evaldash]\npassword_sha256 = "{DIGEST}"\n[auth\n', None,
                    ["{file}: not valid TOML: Expected ']' at the end of a table declaration (at line 3, column 6)"]),
    "not UTF-8": (b'[evaldash]\npassword_sha256 = "\xff"\n', None, ["{file}: not UTF-8 text"]),
    "[auth] alone": ("[auth]\n", None, ["{file}: [auth] configures OIDC sign-in but lacks redirect_uri, cookie_secret, "
                                        "client_id, client_secret, server_metadata_url"]),
    "[auth] without cookie_secret": (AUTH.replace(f'cookie_secret = "{COOKIE}"\n', ""), None,
                                     ["{file}: [auth] configures OIDC sign-in but lacks cookie_secret"]),
    "a provider lacking its secret": (
        AUTH.split("client_id")[0] + f'[auth.google]\nclient_id = "x"\nclient_secret = ""\n', None,
        ["{file}: [auth] configures OIDC sign-in but lacks google.client_secret, google.server_metadata_url"]),
    "a provider named with _": (AUTH + '[auth.my_idp]\nclient_id = "x"\n', None,
                                ["{file}: [auth.my_idp]: Streamlit does not accept '_' in a provider's name"]),
    "a digest in secrets that is not one": ('[evaldash]\npassword_sha256 = "the password itself"\n', None,
                                            ["{file}: [evaldash] password_sha256 is not a SHA-256 digest: "
                                             "64 hexadecimal characters expected, found 19 characters"]),
    "a digest that is a number": ("[evaldash]\npassword_sha256 = 12\n", None,
                                  ["{file}: [evaldash] password_sha256 is not a SHA-256 digest",
                                   "found a value of type int"]),
    "the environment's digest is the password": (None, "the password itself",
                                                  [f"the environment variable {PASSWORD_ENV} is not a SHA-256 digest: "
                                                   "64 hexadecimal characters expected, found 19 characters"]),
    "the environment's digest is empty": (None, "", [f"{PASSWORD_ENV} is not a SHA-256 digest", "found 0 characters"]),
    "the environment's digest is one character short": (None, DIGEST[:-1], ["found 63 characters"]),
    "the environment's digest is not hexadecimal": (None, "g" + DIGEST[1:],
                                                     ["found 64 characters, not all hexadecimal"]),
}


@pytest.mark.parametrize("case", CASES)
def test_configured_but_unusable_sign_in_refuses_every_view(secrets_file, monkeypatch, case, home_store):
    content, env, says = CASES[case]
    if content is not None:
        secrets_file.write_bytes(content if isinstance(content, bytes) else content.encode())
    if env is not None:
        monkeypatch.setenv(PASSWORD_ENV, env)
    problem = _refused(_gate(), *[s.format(file=secrets_file) for s in says])
    assert "Traceback" not in problem and 'File "' not in problem
    # a deep link, too (the gate is app.py's, before any page: every address is tested in test_sign_in.py)
    _refused(_gate({"run": "0" * 32, "row": "2", "view": "Rows"}), *[s.format(file=secrets_file) for s in says])


def test_of_two_secrets_files_only_the_broken_one_is_named(secrets_file, home_store):
    from streamlit.testing.v1.util import patch_config_options

    good = secrets_file.with_name("global.toml")
    good.write_text(f'[evaldash]\npassword_sha256 = "{DIGEST}"\n')
    secrets_file.write_text('title = "x"\ntitle = "y"\n')
    with patch_config_options({"secrets.files": [str(good), str(secrets_file)]}):
        problem = _refused(_gate())
    assert problem == f"{secrets_file}: not valid TOML: Cannot overwrite a value (at line 2, column 12)"


def test_oidc_without_authlib_refuses_and_says_what_to_install(secrets_file, monkeypatch, home_store):
    from ui import auth

    secrets_file.write_text(AUTH)
    monkeypatch.setattr(auth, "authlib_ready", lambda: False)
    _refused(_gate(), f"{secrets_file}: [auth] configures OIDC sign-in, which needs Authlib>=1.3.2",
             "pip install 'Authlib>=1.3.2'")
    monkeypatch.setattr(auth, "authlib_ready", lambda: True)  # installed: the sign-in button, nothing else
    at = _gate()
    assert [b.label for b in at.button] == ["Sign in"] and not at.error and not at.dataframe


def test_a_readable_secrets_file_turns_sign_in_on_and_none_leaves_it_off(secrets_file, monkeypatch, home_store):
    # no file, no variable: off, the dashboard is served (as it always was)
    at = _gate()
    assert any("Score what" in m.value for m in at.markdown) and not at.error and not at.text_input
    # the same reading, a valid file: the sign-in form
    secrets_file.write_text(f'[evaldash]\npassword_sha256 = "{DIGEST.upper()}"\n')
    at = _gate()
    assert [w.label for w in at.text_input] == ["Your name", "Password"] and not at.error
    assert DIGEST not in shown_text(at) and DIGEST.upper() not in shown_text(at)
    # the variable wins over the file, both valid
    monkeypatch.setenv(PASSWORD_ENV, hashlib.sha256(b"other").hexdigest())
    from ui import auth

    assert auth.settings().password_sha256 == hashlib.sha256(b"other").hexdigest()


# ---------------------------------------------------------------- in the browser

class Refusing:
    """`streamlit run app.py` with its HOME (so its ~/.streamlit/secrets.toml) in tmp. Its health check answers
    503 while sign-in is unusable, so it is ready when the health route answers at all."""

    def __init__(self, home, server_home, logs, recorder):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        logs.mkdir(parents=True, exist_ok=True)
        self.err = logs / "streamlit.err"
        env = {**env_for_home(home), "HOME": str(server_home), "HTTP_PROXY": recorder.url, "HTTPS_PROXY": recorder.url,
               "http_proxy": recorder.url, "https_proxy": recorder.url, "NO_PROXY": "", "no_proxy": ""}
        env.pop(PASSWORD_ENV, None)
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                      "--server.headless", "true"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self.err.open("wb"))
        wait_until(lambda: self.status("/_stcore/health") is not None, timeout=60, what="the dashboard answering")

    def status(self, path: str) -> int | None:
        try:
            return urllib.request.urlopen(self.url + path, timeout=5).status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)



@needs_chromium
def test_unparseable_secrets_file_serves_only_what_is_wrong_at_every_address(browser, recorder, judge_server,
                                                                             tmp_path):
    home, server_home = tmp_path / "evalhome", tmp_path / "home"
    store = default_store(home)
    judge = JudgeConfig(model="loopback", provider="compatible", base_url=judge_server.url)
    rid = evaluate(SINGLE, ["coherence"], judge=judge, store=store).run_id
    store.update_run(rid, name="quarterly-eval-do-not-leak")
    did = store.get_run(rid)["dataset_id"]
    store.engine.dispose()
    secrets = server_home / ".streamlit" / "secrets.toml"  # Streamlit's ~/.streamlit/secrets.toml
    secrets.parent.mkdir(parents=True)
    secrets.write_text(f'[evaldash]\npassword_sha256 = "{DIGEST}"\n[auth\n')
    requests: list[str] = []
    dash = Refusing(home, server_home, tmp_path / "server-logs", recorder)
    query = urlencode({"run": rid, "base": rid, "dataset": did, "row": "2", "view": "Rows"})
    try:
        page = watched_page(browser, requests)
        for path in sorted((path for _, path in app_pages()), key=lambda p: p == ""):
            response = page.goto(f"{dash.url}/{path}?{query}")
            assert response.status == 503  # ui.gate's page: nothing of Streamlit runs
            body = page.locator("body").inner_text()
            assert REFUSED in body and \
                f"{secrets}: not valid TOML: Expected ']' at the end of a table declaration (at line 3, column 6)" \
                in body, body
            for absent in ("quarterly-eval", "coherence", rid, DIGEST, "Traceback", 'File "', "Sign in"):
                assert absent not in body, (path, absent)
            assert page.get_by_role("textbox").count() == 0 and page.get_by_role("button").count() == 0
            assert page.locator('[data-testid="stApp"]').count() == 0
    finally:
        dash.stop()
    log = dash.err.read_text(errors="replace")
    assert f"sign-in is configured but unusable, nothing is served: {secrets}: not valid TOML" in log
    assert DIGEST not in log
    assert hosts(requests) <= LOCAL_HOSTS and recorder.seen == []
