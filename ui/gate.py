"""The server's door: while sign-in is configured but unusable (ui.auth.settings), every request gets the
dashboard's refusal page, and nothing of Streamlit runs.

Why at the door and not only in the page: some mistakes stop Streamlit itself. It reads the secrets file as
it builds its server on the first request and again for each connection (its cookie secret, in ``[auth]``),
and a file that is not UTF-8, a directory named ``secrets.toml`` or ``auth = "text"`` raise there: every
request was a bare "Internal Server Error". Here they, and every other unusable sign-in, get the page that
names the problem and the fix, as do Streamlit's own routes (``/media/``, health) and the exports'.
"""
from __future__ import annotations

import html
import logging
from typing import Any

from ui import auth

log = logging.getLogger("evaldash")
REFUSED, FIX = auth.REFUSED, auth.FIX  # the words of the page that Streamlit draws in the same case


def page(problem: str) -> bytes:
    """The refusal page: our own markup, the problem escaped (it quotes key names a person wrote)."""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>evaldash</title></head>'
            f'<body style="font-family:sans-serif;max-width:60rem;margin:3rem auto"><h1>evaldash</h1>'
            f'<p role="alert">{html.escape(REFUSED)}</p><pre style="white-space:pre-wrap">{html.escape(problem)}</pre>'
            f"<p>{html.escape(FIX)}</p></body></html>").encode()


class Guarded:
    """An ASGI app in front of the ``st.App``: checks the sign-in settings on each HTTP or WebSocket request
    (read afresh: a fixed file takes effect at the next request); lifespan events pass through."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._logged: set[str] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            problem = auth.settings().problem
            if problem:
                if problem not in self._logged:
                    self._logged.add(problem)
                    log.error("sign-in is configured but unusable, nothing is served: %s", problem)
                await _refuse(scope, send, problem)
                return
        await self.app(scope, receive, send)


async def _refuse(scope: dict, send: Any, problem: str) -> None:
    if scope["type"] == "websocket":  # closed before it is accepted: the server answers 403
        await send({"type": "websocket.close", "code": 1008})
        return
    body = page(problem)
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"), (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
        (b"x-content-type-options", b"nosniff")]})
    await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})
