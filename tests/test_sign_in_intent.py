"""Sign-in meant but mistyped fails closed: a section named nearly [evaldash] or [auth], a password key
anywhere, an unknown setting under [evaldash], a variable like the password's, and files Streamlit itself
cannot read (not UTF-8, a directory, ``auth = "text"``) each refuse every address with what to change, no
value quoted. AppTest on the real secrets reading, the rules alone, and a real `streamlit run` in Chromium
whose every request (pages, Streamlit's own routes, the exports') gets the refusal page.
"""
from __future__ import annotations

import pytest

from tests.browser import LOCAL_HOSTS, hosts, needs_chromium, watched_page
from tests.conftest import app_pages, default_store
from tests.procs import wait_until
from tests.test_sign_in_config import AUTH, DIGEST, REFUSED, Refusing, _gate, _refused, secrets_file  # noqa: F401
from ui import intent
from ui.auth import PASSWORD_ENV

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")

PLAIN = "hunter2-plain-password"  # a password written in plain, never shown
HASH = "scrypt:32768:8:1$abcdefghABCDEFGH$" + "0" * 128
AUTH_KEYS = AUTH.split("\n", 1)[1]  # [auth]'s settings, without its header

CASES = {
    # (secrets.toml, environment, what the refusal says)
    "[EvalDash]": (f'[EvalDash]\npassword_sha256 = "{DIGEST}"\n', {},
                   "{file}: [EvalDash] looks like [evaldash] mistyped: name the section [evaldash], in lowercase"),
    "[evaldahs]": (f'[evaldahs]\npassword_sha256 = "{DIGEST}"\n', {}, "{file}: [evaldahs] looks like [evaldash] mistyped"),
    "[eval-dash]": (f'[eval-dash]\npassword_sha256 = "{DIGEST}"\n', {}, "{file}: [eval-dash] looks like [evaldash]"),
    "password_sha265": (f'[evaldash]\npassword_sha265 = "{DIGEST}"\n', {},
                        "{file}: [evaldash] password_sha265: not a setting evaldash knows; evaldash reads a password "
                        "only as password_sha256 or [evaldash.users] under [evaldash]"),
    "a plain password in [evaldash]": (f'[evaldash]\npassword = "{PLAIN}"\n', {},
                                       "{file}: [evaldash] password: not a setting evaldash knows"),
    "a plain password outside": (f'password = "{PLAIN}"\n', {}, "{file}: password: a password setting outside [evaldash]"),
    "the digest outside its section": (f'password_sha256 = "{DIGEST}"\n[evaldash]\n', {},
                                       "{file}: password_sha256: a password setting outside [evaldash]"),
    "a misspelled key in another table": (f'[dashboard]\npasword = "{PLAIN}"\n', {},
                                          "{file}: dashboard.pasword: a password setting outside [evaldash]"),
    "a digest under another name": (f'[team]\nkey = "{DIGEST}"\n', {},
                                    "{file}: team.key: holds what looks like a password digest, outside [evaldash]"),
    "[evaldash] with no password": ('[evaldash]\n', {}, "{file}: [evaldash] sets no password: add password_sha256"),
    "[Auth]": ("[Auth]\n" + AUTH_KEYS, {}, "{file}: [Auth] looks like [auth] mistyped: Streamlit's sign-in reads [auth]"),
    "[oauth]": ("[oauth]\n" + AUTH_KEYS, {}, "{file}: [oauth] looks like [auth] mistyped"),
    "auth as text": ('auth = "google"\n', {}, "{file}: [auth] must be a table of settings"),
    "a user whose hash is the password": (f'[evaldash.users]\nana = "{PLAIN}"\n', {},
                                          "{file}: [evaldash.users] ana: not a hash made by `python -m ui.passwords NAME`"),
    "a user whose hash is too cheap": (f'[evaldash.users]\nana = "{HASH.replace("32768", "1024")}"\n', {},
                                       "{file}: [evaldash.users] ana: scrypt's cost N=1024, R=8, P=1 is refused"),
    "users as text": (f'[evaldash]\nusers = "ana"\n', {}, "{file}: [evaldash.users] must be a table"),
    "a variable without _SHA256": (None, {"EVAL_DASHBOARD_PASSWORD": PLAIN},
                                   f"the environment variable EVAL_DASHBOARD_PASSWORD looks like the sign-in password's; "
                                   f"set {PASSWORD_ENV} to the password's SHA-256 digest"),
    "a misspelled variable": (None, {"EVAL_DASHBOARD_PASSWORD_SHA265": DIGEST},
                              "the environment variable EVAL_DASHBOARD_PASSWORD_SHA265 looks like"),
    # found by review: an array of tables, OIDC settings under another section name, another variable's name
    "an array of users": (f'[[users]]\nname = "alice"\npassword_sha256 = "{DIGEST}"\n', {},
                          "{file}: users[0].password_sha256: a password setting outside [evaldash]"),
    "OIDC under [oidc]": ("[oidc]\n" + AUTH_KEYS, {},
                          "{file}: oidc.redirect_uri: an OIDC sign-in setting outside [auth]"),
    "a digest in another variable": (None, {"DASHBOARD_PASSWORD_SHA256": DIGEST},
                                     "the environment variable DASHBOARD_PASSWORD_SHA256 looks like"),
    "not UTF-8": (b'[evaldash]\npassword_sha256 = "\xff"\n', {}, "{file}: not UTF-8 text"),
    "a directory": ("DIRECTORY", {}, "{file}: a directory, where a TOML file is expected"),
}


@pytest.mark.parametrize("case", CASES)
def test_sign_in_meant_but_mistyped_refuses_every_view(secrets_file, monkeypatch, case, home_store):
    content, env, says = CASES[case]
    if content == "DIRECTORY":
        secrets_file.mkdir()
    elif content is not None:
        secrets_file.write_bytes(content if isinstance(content, bytes) else content.encode())
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    problem = _refused(_gate(), says.format(file=secrets_file))
    assert PLAIN not in problem and DIGEST not in problem and "Traceback" not in problem
    _refused(_gate({"run": "0" * 32, "view": "Rows"}), says.format(file=secrets_file))  # a deep link too


def test_every_mistake_is_named_at_once(secrets_file, monkeypatch, home_store):
    secrets_file.write_text(f'[EvalDash]\npassword_sha256 = "{DIGEST}"\n[Auth]\n' + AUTH_KEYS)
    monkeypatch.setenv("EVAL_DASHBOARD_PASSWD", PLAIN)
    problem = _refused(_gate())
    assert problem.splitlines() == [
        f"{secrets_file}: [EvalDash] looks like [evaldash] mistyped: name the section [evaldash], in lowercase",
        f"{secrets_file}: [Auth] looks like [auth] mistyped: Streamlit's sign-in reads [auth], in lowercase",
        f"the environment variable EVAL_DASHBOARD_PASSWD looks like the sign-in password's; set {PASSWORD_ENV} to "
        "the password's SHA-256 digest (and unset EVAL_DASHBOARD_PASSWD)"]


def test_secrets_of_other_kinds_leave_sign_in_off(secrets_file, monkeypatch, home_store):
    """Nothing that names a password: sign-in stays off, as without a file."""
    secrets_file.write_text('[connections.warehouse]\nhost = "db.internal"\nuser = "reader"\n[author]\nname = "x"\n'
                            'path = "/srv/data"\n')
    monkeypatch.setenv("EVAL_DATABASE_URL_EXTRA", "x")  # an EVAL_ variable naming no password
    at = _gate()
    assert any("Score what" in m.value for m in at.markdown) and not at.error and not at.text_input


@pytest.mark.parametrize("name,target,most,expected", [
    ("EvalDash", "evaldash", 2, True), ("evaldahs", "evaldash", 2, True), ("EVAL_DASH", "evaldash", 2, True),
    ("evaldsh", "evaldash", 2, True), ("evaldash", "evaldash", 2, False), ("evaluation", "evaldash", 2, False),
    ("dashboard", "evaldash", 2, False), ("Auth", "auth", 1, True), ("auht", "auth", 1, True),
    ("oauth", "auth", 1, True), ("path", "auth", 1, False), ("author", "auth", 1, False)])
def test_near_names(name, target, most, expected):
    assert intent.near(name, target, most) is expected


@pytest.mark.parametrize("key,expected", [
    ("password", True), ("Passwort", True), ("pasword_sha256", True), ("admin_pwd", True), ("digest", True),
    ("pass_hash", True), ("userPassword", True), ("passphrase", True), ("sha256", True), ("passport_no", True),
    ("host", False), ("user", False), ("name", False), ("cookie_secret", False), ("compass", False), ("bypass", False)])
def test_keys_that_name_a_password(key, expected):
    assert intent.names_a_password(key) is expected


# ---------------------------------------------------------------- a real server, in Chromium

@needs_chromium
def test_a_real_server_refuses_every_request_whatever_the_secrets_mistake(browser, recorder, tmp_path):
    home, server_home = tmp_path / "evalhome", tmp_path / "home"
    store = default_store(home)
    store.engine.dispose()
    secrets = server_home / ".streamlit" / "secrets.toml"
    secrets.parent.mkdir(parents=True)
    secrets.write_bytes(b'[evaldash]\npassword_sha256 = "\xff"\n')  # Streamlit's own reading raised on this
    requests: list[str] = []
    dash = Refusing(home, server_home, tmp_path / "logs", recorder)
    try:
        page = watched_page(browser, requests)
        steps = [(None, "not UTF-8 text"),
                 (lambda: (secrets.unlink(), secrets.mkdir()), "a directory, where a TOML file is expected"),
                 (lambda: (secrets.rmdir(), secrets.write_text('auth = "google"\n')), "[auth] must be a table of settings"),
                 (lambda: secrets.write_text(f'[EvalDash]\npassword_sha256 = "{DIGEST}"\n'),
                  "[EvalDash] looks like [evaldash] mistyped")]
        for change, says in steps:
            if change:
                change()  # read afresh at each request: no restart
            for path in ("/", "/results?run=" + "0" * 32, "/" + app_pages()[-1][1]):
                wait_until(lambda: page.goto(dash.url + path).status == 503 and says in page.locator("pre").inner_text(),
                           timeout=30, what=f"{says} at {path}")
                assert page.locator("h1").inner_text() == "evaldash"
                assert page.get_by_role("alert").inner_text() == REFUSED
                assert page.locator("pre").inner_text().startswith(f"{secrets}: {says}")  # one problem, its file
                body = page.locator("body").inner_text()
                for absent in (DIGEST, "Traceback", "Internal Server Error", "Sign in"):
                    assert absent not in body, (says, path, absent)
                assert page.get_by_role("textbox").count() == 0 and page.get_by_role("button").count() == 0
            # Streamlit's own routes and the exports' are refused too
            for path in ("/_stcore/health", "/media/x.csv", "/exports/" + "A" * 43, "/_stcore/host-config"):
                assert dash.status(path) == 503, (says, path)
        # nor does the app's WebSocket open (from the refusal page's own origin, its CSP set aside)
        ws = browser.new_context(bypass_csp=True).new_page()
        ws.goto(dash.url + "/")
        assert ws.evaluate("""url => new Promise(done => { const ws = new WebSocket(url);
            ws.onopen = () => done("open"); ws.onerror = () => done("refused"); })""",
                           dash.url.replace("http", "ws", 1) + "/_stcore/stream") == "refused"
    finally:
        dash.stop()
    log = dash.err.read_text(errors="replace")
    assert "sign-in is configured but unusable, nothing is served" in log and "Traceback" not in log
    assert DIGEST not in log
    assert hosts(requests) <= LOCAL_HOSTS and recorder.seen == []
