"""Optional sign-in for a shared dashboard. Off unless configured; when on, nothing else renders first.

Two modes, by configuration:

- OIDC through Streamlit's ``st.login``: an ``[auth]`` section in ``.streamlit/secrets.toml``
  (``redirect_uri``, ``cookie_secret``, ``client_id``, ``client_secret``, ``server_metadata_url``,
  or one ``[auth.NAME]`` table per provider). Needs ``Authlib>=1.3.2``.
- Passwords: named users, each with a salted scrypt hash (ui.passwords) in an ``[evaldash.users]`` table of
  secrets.toml, signed in as themselves; and/or a shared password, the hex SHA-256 in
  ``EVAL_DASHBOARD_PASSWORD_SHA256`` (or ``password_sha256`` under ``[evaldash]``), whose users give a name
  that is recorded as unverified ("ana (unverified)"): it can never be a named user, nor write under the
  verdicts of someone who signed in as themselves. Wrong passwords are limited (ui.attempts).

Configured but unusable (a secrets file that cannot be read, an ``[auth]`` section Streamlit cannot
sign in with, a digest that is not one, OIDC without Authlib), or mistyped (ui.intent: a section named nearly
``[evaldash]``, a password key elsewhere, a variable like the password's): every address shows what is wrong
and where, and nothing else; never the app without sign-in. app.py's server refuses every request then
(ui.gate), as Streamlit itself cannot start on some of these files.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import re
import secrets
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st
from streamlit import config as st_config

from ui import intent, passwords
from ui.attempts import Attempts

PASSWORD_ENV = "EVAL_DASHBOARD_PASSWORD_SHA256"
USER = "auth.user"  # session-state key of the signed-in name (password mode)
UNVERIFIED = " (unverified)"  # after a name given with the shared password
MAX_NAME = 200
REFUSED = "Sign-in is configured but cannot be used, so this dashboard shows nothing until it is fixed."
FIX = "Fix it and reload this page (restart the dashboard after changing an environment variable)."
OIDC_KEYS = ("redirect_uri", "cookie_secret")  # what Streamlit's st.login needs in [auth] itself...
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")  # ...and for each provider
log = logging.getLogger("evaldash")


class ConfigError(Exception):
    """Sign-in is configured but cannot be used. The message says where and what; it never quotes a value."""


@dataclass(frozen=True)
class SignIn:
    """The sign-in this server is configured for."""

    providers: tuple[str | None, ...] | None = None  # OIDC: the providers to offer ((None,): the one default)
    password_sha256: str | None = None  # password mode: the shared digest, 64 lowercase hex characters
    problem: str | None = None  # configured but unusable: the app is not served
    users: tuple[tuple[str, str], ...] = ()  # password mode: (name, scrypt hash) of each named user
    admins: tuple[str, ...] = ()  # who may rename, archive and delete anyone's runs and datasets

    @property
    def off(self) -> bool:
        return self.problem is None and self.providers is None and self.password_sha256 is None and not self.users


def settings() -> SignIn:
    """Read the configuration afresh (a fixed secrets file takes effect at the next page load)."""
    try:
        secrets = _secrets()
        wrong = [f"{_where()}: {p}" for p in intent.secrets_problems(secrets)]
        wrong += intent.environment_problems(os.environ, PASSWORD_ENV)
        if wrong:
            raise ConfigError("\n".join(wrong))
        password = _password(secrets.get("evaldash"))
        users = _users(secrets.get("evaldash"))
        out = SignIn(_oidc(secrets.get("auth")), password, users=users, admins=_admins(secrets.get("evaldash")))
        if out.admins and out.off:  # meant to restrict who may delete: with no sign-in nobody would be
            raise ConfigError(f"{_where()}: [evaldash] admins names administrators, but no sign-in is configured")
        return out
    except ConfigError as e:
        return SignIn(problem=str(e))


def authlib_ready() -> bool:
    """What ``st.login`` checks first: Authlib>=1.3.2 importable."""
    from streamlit.auth_util import is_authlib_installed

    return is_authlib_installed()


def _secret_files() -> list[str]:
    return [str(p) for p in st_config.get_option("secrets.files")]


def _where() -> str:
    """The secrets files that exist, for a message ("secrets.toml" under tests that set st.secrets directly)."""
    return ", ".join(p for p in _secret_files() if os.path.exists(p)) or ".streamlit/secrets.toml"


def _secrets() -> Mapping[str, Any]:
    """Streamlit's secrets, all of them (ui.intent looks for mistyped sign-in anywhere); empty when no secrets
    file exists (sign-in may still be on by the environment)."""
    try:
        return {k: st.secrets[k] for k in st.secrets}
    except Exception as e:  # noqa: BLE001 — any failure to read an existing file is a configuration error
        present = [p for p in _secret_files() if os.path.exists(p)]
        if not present:
            return {}
        wrong = [m for m in map(_unreadable, present) if m]
        raise ConfigError("; ".join(wrong) or f"{', '.join(present)}: cannot be read ({type(e).__name__})") from None


def _unreadable(path: str) -> str:
    """What is wrong with one secrets file, by line and column, without its content ("" when it reads fine)."""
    if os.path.isdir(path):
        if path.endswith(".toml"):  # Streamlit would open it as a file, and fail on every request
            return f"{path}: a directory, where a TOML file is expected"
        return ""  # a directory of secrets (Kubernetes style): Streamlit's own reading decides
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError:
        return f"{path}: not UTF-8 text"
    except OSError as e:
        return f"{path}: cannot be read ({e.strerror or type(e).__name__})"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # tomllib names a key or one character at most; drop a quoted character anyway
        return f"{path}: not valid TOML: " + re.sub(r" character .+? \(", " character (", str(e))
    return ""


def _oidc(auth: Any) -> tuple[str | None, ...] | None:
    """The OIDC providers [auth] configures; None without [auth]; ConfigError when st.login could not use it."""
    if auth is None:
        return None
    if not isinstance(auth, Mapping):
        raise ConfigError(f"{_where()}: [auth] must be a table of settings")
    missing = _missing(auth, OIDC_KEYS)
    named = [k for k, v in auth.items() if isinstance(v, Mapping) and k != "client_kwargs"]
    for name in named:
        if "_" in name:
            raise ConfigError(f"{_where()}: [auth.{name}]: Streamlit does not accept '_' in a provider's name")
        missing += [f"{name}.{k}" for k in _missing(auth[name], PROVIDER_KEYS)]
    if not named:
        missing += _missing(auth, PROVIDER_KEYS)
    if missing:
        raise ConfigError(f"{_where()}: [auth] configures OIDC sign-in but lacks {', '.join(missing)}")
    if not authlib_ready():
        raise ConfigError(f"{_where()}: [auth] configures OIDC sign-in, which needs Authlib>=1.3.2: "
                          "pip install 'Authlib>=1.3.2'")
    return tuple(named) or (None,)


def _missing(table: Mapping, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if not (isinstance(table.get(k), str) and table.get(k).strip())]


def _password(evaldash: Any) -> str | None:
    """The configured digest (the environment before the secrets file); ConfigError when one is not a digest."""
    found = None
    if evaldash is not None:
        if not isinstance(evaldash, Mapping):
            raise ConfigError(f"{_where()}: [evaldash] must be a table of settings")
        if "password_sha256" in evaldash:
            found = _digest(evaldash["password_sha256"], lambda: f"{_where()}: [evaldash] password_sha256")
    if PASSWORD_ENV in os.environ:  # set, even empty: configured
        found = _digest(os.environ[PASSWORD_ENV], lambda: f"the environment variable {PASSWORD_ENV}")
    return found


def _users(evaldash: Any) -> tuple[tuple[str, str], ...]:
    """The named users of ``[evaldash.users]`` (name = "scrypt:..."), each hash checked; ConfigError naming the
    user (never the hash) when one cannot be used."""
    if not isinstance(evaldash, Mapping) or "users" not in evaldash:
        return ()
    table = evaldash["users"]

    def where() -> str:  # the files' names only when something is wrong (settings() runs on every request)
        return f"{_where()}: [evaldash.users]"

    if not isinstance(table, Mapping) or not table:
        raise ConfigError(f"{where()} must be a table of name = \"scrypt:...\" lines (python -m ui.passwords NAME)")
    seen: dict[str, str] = {}
    for name, value in table.items():
        if not name.strip() or len(name) > MAX_NAME or not name.isprintable() or name.endswith(UNVERIFIED):
            raise ConfigError(f"{where()}: the name {name[:MAX_NAME]!r} is refused: 1 to {MAX_NAME} printable "
                              f"characters, not ending in{UNVERIFIED}")
        if name.strip().casefold() in seen:
            raise ConfigError(f"{where()}: {seen[name.strip().casefold()]!r} and {name!r} are one name in two cases")
        seen[name.strip().casefold()] = name
        try:
            passwords.check(value)
        except passwords.HashError as e:
            raise ConfigError(f"{where()} {name}: {e}") from None
    return tuple((name.strip(), value.strip()) for name, value in table.items())


def _admins(evaldash: Any) -> tuple[str, ...]:
    """``admins = ["alice", "bob@example.com"]`` under ``[evaldash]``: named users or OIDC e-mails (any case)."""
    if not isinstance(evaldash, Mapping) or "admins" not in evaldash:
        return ()
    names = evaldash["admins"]
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError(f"{_where()}: [evaldash] admins must be a list of names, e.g. admins = [\"alice\"]")
    if any(n.strip().endswith(UNVERIFIED) for n in names):
        raise ConfigError(f"{_where()}: [evaldash] admins: a name ending in{UNVERIFIED} cannot be an administrator")
    return tuple(n.strip() for n in names)


def may_change(created_by: str | None) -> bool:
    """Whether this session may rename, archive or delete what ``created_by`` made: everyone when sign-in is off;
    under sign-in its author (the same recorded name) or an administrator; nobody else, not even for what was made
    with no author recorded (the command line, or before sign-in was on)."""
    conf = settings()
    if conf.off:
        return True
    user = current_user()
    if user is None or conf.problem:
        return False
    return user == created_by or user.casefold() in {a.casefold() for a in conf.admins}


def _digest(value: Any, where: Callable[[], str]) -> str:
    text = value.strip().lower() if isinstance(value, str) else ""
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        found = (f"a value of type {type(value).__name__}" if not isinstance(value, str) else
                 "64 characters, not all hexadecimal" if len(text) == 64 else f"{len(text)} characters")
        raise ConfigError(f"{where()} is not a SHA-256 digest: 64 hexadecimal characters expected, found {found}")
    return text


def check_password(password: str, expected_sha256: str) -> bool:
    """Constant-time comparison of the password's digest with the configured one (both 64 hex bytes)."""
    digest = hashlib.sha256(password.encode("utf-8")).hexdigest()
    return hmac.compare_digest(digest.encode(), expected_sha256.encode())


def identify(conf: SignIn, name: str, password: str) -> str | None:
    """Who ``name`` and ``password`` sign in as, or None (a wrong password). A named user (any case of their name)
    only with their own password, as themselves; anyone else with the shared password, as "NAME (unverified)"."""
    name = name.strip()[:MAX_NAME]
    users = {n.casefold(): (n, h) for n, h in conf.users}
    if name.casefold() in users:
        real, hashed = users[name.casefold()]
        return real if passwords.verify(password, hashed) else None
    if users:
        passwords.verify(password, _decoy())  # as slow as a named user's check: the time does not say who exists
    if conf.password_sha256 and check_password(password, conf.password_sha256):
        return name[:MAX_NAME - len(UNVERIFIED)] + UNVERIFIED  # 200 characters at most, as any reviewer's name
    return None


@st.cache_resource(show_spinner=False)
def _decoy() -> str:
    return passwords.make(secrets.token_hex(16))


@st.cache_resource(show_spinner=False)
def attempts() -> Attempts:
    """The server's count of wrong passwords (held by Streamlit's resource cache, as ui.downloads' registry)."""
    return Attempts()


def _client() -> str:
    """Who is trying, for the limit: the connection's address (none on localhost, nor under AppTest: one client)."""
    ip = st.context.ip_address
    return ip if isinstance(ip, str) and ip else "local"


def current_user() -> str | None:
    """Who is signed in (recorded as ``created_by``); None when sign-in is off."""
    if settings().providers is not None:
        user = st.user
        if user.get("is_logged_in"):
            return str(user.get("email") or user.get("name") or user.get("sub") or "signed in")
        return None
    return st.session_state.get(USER)


def signed_in() -> bool:
    """True when sign-in is off or this session has signed in (then a "Sign out" is in the sidebar).
    False when the configuration is unusable: the app is not served."""
    conf = settings()
    if conf.off:
        return True
    if conf.problem:
        return False
    user = current_user()
    if user is None:
        return False
    with st.sidebar:
        st.caption("Signed in as")
        st.text(user)
        st.button("Sign out", key="auth.logout", on_click=_oidc_sign_out if conf.providers else _sign_out)
    return True


def sign_in_page() -> None:
    """The only page a session that must sign in gets, whatever its URL (a deep link keeps its URL)."""
    conf = settings()
    if conf.problem:
        _refuse(conf.problem)
        return
    _gate_title()
    if conf.providers is not None:
        for p in conf.providers:
            st.button(f"Sign in with {p}" if p else "Sign in", key=f"auth.login.{p}", type="primary",
                      on_click=_login, args=(p,))
        return
    with st.form("auth.form"):
        name = st.text_input("Your name", key="auth.name", help="Recorded on the runs, datasets and verdicts you "
                             "give" + ("; with the shared password, as unverified (\"ana (unverified)\")."
                                       if conf.password_sha256 else "."))
        password = st.text_input("Password", type="password", key="auth.password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        _submit(conf, name, password)


def _submit(conf: SignIn, name: str, password: str) -> None:
    client = _client()
    if not name.strip():
        st.error("Give your name: it is recorded on what you create.")
        return
    wait = attempts().begin(client)  # checked and counted in one step: tries from many tabs at once included
    if wait > 0:  # refused before the password is looked at
        st.error(f"Too many wrong passwords: try again in {math.ceil(wait)} s.")
    elif user := identify(conf, name, password):
        attempts().succeeded(client)
        st.session_state[USER] = user
        st.rerun()
    else:
        st.error("Wrong name or password." if conf.users else "Wrong password.")


_logged: set[str] = set()


def _refuse(problem: str) -> None:
    """The page every address serves while sign-in is configured but unusable: what is wrong, as text."""
    if problem not in _logged:
        _logged.add(problem)
        log.error("sign-in is configured but unusable, nothing is served: %s", problem)
    st.title("evaldash")
    st.error(REFUSED)
    st.text(problem)
    st.caption(FIX)


def _sign_out() -> None:
    st.session_state.pop(USER, None)
    st.session_state.pop("routed", None)  # ui.widgets.guard: no page renders until app.py's gate passes again


def _gate_title() -> None:
    st.title("evaldash")
    st.caption("This dashboard is shared: sign in to continue.")
    if st.session_state.get("auth.error"):
        st.error("Sign-in could not start:")
        st.code(st.session_state.pop("auth.error"), language=None, wrap_lines=True)


def _oidc_sign_out() -> None:
    st.session_state.pop("routed", None)
    st.logout()


def _login(provider: str | None) -> None:
    try:
        st.login(provider) if provider else st.login()
    except Exception as e:  # noqa: BLE001 — a clear line, not a traceback
        st.session_state["auth.error"] = f"{type(e).__name__}: {e}"
