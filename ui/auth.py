"""Optional sign-in for a shared dashboard. Off unless configured; when on, nothing else renders first.

Two modes, by configuration:

- OIDC through Streamlit's ``st.login``: an ``[auth]`` section in ``.streamlit/secrets.toml``
  (``redirect_uri``, ``cookie_secret``, ``client_id``, ``client_secret``, ``server_metadata_url``,
  or one ``[auth.NAME]`` table per provider). Needs ``Authlib>=1.3.2``.
- A shared password for small teams: the hex SHA-256 of the password in
  ``EVAL_DASHBOARD_PASSWORD_SHA256`` (or ``password_sha256`` under ``[evaldash]`` in secrets.toml).
  Users also give a name, recorded on the runs and datasets they create.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

import streamlit as st

PASSWORD_ENV = "EVAL_DASHBOARD_PASSWORD_SHA256"
USER = "auth.user"  # session-state key of the signed-in name (password mode)


def _secret(section: str) -> Any:
    try:
        return st.secrets.get(section)
    except Exception:  # noqa: BLE001 — no secrets.toml (or an unreadable one) means: not configured
        return None


def oidc_providers() -> list[str | None] | None:
    """None when OIDC is not configured; else the providers to offer (``[None]``: the one default)."""
    auth = _secret("auth")
    if not auth:
        return None
    named = [k for k, v in auth.items() if hasattr(v, "items")]
    return named or [None]


def password_hash() -> str | None:
    """The configured password's hex SHA-256, or None when password mode is off."""
    value = os.environ.get(PASSWORD_ENV) or ((_secret("evaldash") or {}).get("password_sha256"))
    return str(value).strip().lower() or None if value else None


def check_password(password: str, expected_sha256: str) -> bool:
    """Constant-time comparison of the password's digest with the configured one."""
    digest = hashlib.sha256(password.encode("utf-8")).hexdigest()
    return hmac.compare_digest(digest.encode(), expected_sha256.encode())


def current_user() -> str | None:
    """Who is signed in (recorded as ``created_by``); None when sign-in is off."""
    if oidc_providers() is not None:
        user = st.user
        if user.get("is_logged_in"):
            return str(user.get("email") or user.get("name") or user.get("sub") or "signed in")
        return None
    return st.session_state.get(USER)


def signed_in() -> bool:
    """True when sign-in is off or this session has signed in (then a "Sign out" is in the sidebar)."""
    providers = oidc_providers()
    if providers is None and password_hash() is None:
        return True
    user = current_user()
    if user is None:
        return False
    with st.sidebar:
        st.caption("Signed in as")
        st.text(user)
        if providers is not None:
            st.button("Sign out", key="auth.logout", on_click=_oidc_sign_out)
        else:
            st.button("Sign out", key="auth.logout", on_click=_sign_out)
    return True


def sign_in_page() -> None:
    """The only page a session that must sign in gets, whatever its URL (a deep link keeps its URL)."""
    _gate_title()
    providers = oidc_providers()
    if providers is not None:
        for p in providers:
            st.button(f"Sign in with {p}" if p else "Sign in", key=f"auth.login.{p}", type="primary",
                      on_click=_login, args=(p,))
        return
    with st.form("auth.form"):
        name = st.text_input("Your name", key="auth.name", help="Recorded on the runs and datasets you create.")
        password = st.text_input("Password", type="password", key="auth.password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        if not name.strip():
            st.error("Give your name: it is recorded on what you create.")
        elif check_password(password, password_hash() or ""):
            st.session_state[USER] = name.strip()[:200]
            st.rerun()
        else:
            st.error("Wrong password.")


def _sign_out() -> None:
    st.session_state.pop(USER, None)
    st.session_state.pop("routed", None)  # ui.widgets.guard: no page renders until app.py's gate passes again


def _gate_title() -> None:
    st.title("evaldash")
    st.caption("This dashboard is shared: sign in to continue.")
    if st.session_state.get("auth.error"):
        st.error("Sign-in could not start (is Authlib>=1.3.2 installed?):")
        st.code(st.session_state.pop("auth.error"), language=None, wrap_lines=True)


def _oidc_sign_out() -> None:
    st.session_state.pop("routed", None)
    st.logout()


def _login(provider: str | None) -> None:
    try:
        st.login(provider) if provider else st.login()
    except Exception as e:  # noqa: BLE001 — e.g. Authlib missing: a clear line, not a traceback
        st.session_state["auth.error"] = f"{type(e).__name__}: {e}"
