"""Downloads served from disk: a run's export is written to a file a chunk of rows at a time, then streamed
to the browser from that file by a route of the dashboard's own server, never held whole in memory. A page
offers each download as one link (:func:`offer`, :func:`later`): a click has the server write the file then and
stream it, so one click saves it (issue 35: a button that wrote the file, then a link that downloaded it, took
two).

Why a route of our own: Streamlit 1.67's ``st.download_button`` reads whatever its data gives into one bytes
object kept in the server's memory (``MemoryMediaFileStorage``, served with ``Response(content)``), and the
100,000-row bench run's CSV is 1.4 GB. ``st.App`` is Streamlit's documented way to add routes to its Starlette
server, and ``streamlit run app.py`` runs the ``st.App`` that app.py makes when the server imports it, with
:func:`routes` beside Streamlit's own.

Who gets a file, and for how long:

- Only a session that app.py's sign-in gate let through asks for an export (ui.exports_widgets). The file is
  written under ``$EVAL_HOME/exports`` with a random name (``write_export`` writes a temporary name and renames
  it once complete, so nothing half-written is served) and registered under a token of 256 random bits, bound
  to that one file and to the browser session that asked. The URL holds the token only: no run id, no path.
- A written file's token (:meth:`Issued.issue`) is served once: it is taken out of the registry as it is
  served, so a second request gets nothing. A link's token (:meth:`Issued.later`) names what to write, not a
  file: each request it serves writes a new file and serves that once; it lives while the page that offered
  it is connected and shows the same view (the page drops it when its view changes), never longer.
- Either is served only while the session that asked is still connected; only to the browser that asked (the
  request must carry the same XSRF secret as the session's own connection: Streamlit's ``_streamlit_xsrf``
  cookie, whose token part is fixed per browser while its mask changes per page), so a link copied into
  another browser gets nothing, and a refused request does not spend the link; never while sign-in is configured but
  unusable (ui.auth). The file is unlinked as soon as it is opened, so it is gone whether the transfer ends
  or breaks.
- A written file's token not used within :data:`TTL_S` is dropped and its file deleted (a timer); files a stopped
  server left behind are deleted by age when the next export is written. A session seen signed out loses its
  tokens, and a link's token is dropped once its session is gone (when the next link is made).
"""
from __future__ import annotations

import hashlib
import hmac
import html
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import streamlit as st
from streamlit import config as st_config
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import auth

XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's (server.enableXsrfProtection, on by default)
ROUTE = "exports"  # served at /<server.baseUrlPath>/exports/<token>
TTL_S = 600  # a link works this long after the file is written
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32): 256 random bits
PIECE = 1 << 20  # bytes read from the file and sent per step
GONE = "This download link is not valid: it was used, it expired, or its page was closed. Export again from the run's page."


def folder() -> Path:
    """Where exports wait for their download: ``$EVAL_HOME/exports`` (default ``~/.evaldash/exports``), on the
    store's disk rather than a /tmp that may be memory."""
    path = Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "exports"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Export:
    """A written export waiting for its one download."""

    path: Path  # under folder(), a random name
    filename: str  # what the browser saves it as
    media_type: str
    session: str  # the Streamlit session that asked for it
    browser: str | None  # a digest of that browser's XSRF secret (None: the server runs without XSRF protection)
    size: int  # bytes
    expires: float  # time.monotonic()


@dataclass(frozen=True)
class Later:
    """A link's download, written when the link is followed (each time), for one session and browser."""

    write: Callable[[Path], Any]  # write(path): the file whole, or raise
    filename: str
    media_type: str
    session: str
    browser: str | None


class Issued:
    """The tokens handed out and not yet used, each to one file. Thread-safe: the page's script thread adds,
    the route's threads take, timers drop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exports: dict[str, Export | Later] = {}

    def issue(self, write: Callable[[Path], Any], filename: str, media_type: str, session: str,
              browser: str | None = None) -> str:
        """Write a file and register it for ``session`` to download once; returns its token.

        Args:
            write: ``write(path)`` creates ``path`` whole or not at all (``evaluators.read.exports.write_export``).
            filename: the name the browser saves it as (never part of a path on the server).
            media_type: its content type.
            session: the Streamlit session that asked.
            browser: :func:`browser_key` of the browser that asked (None: not bound to one).
        """
        return self.add(written(write, filename, media_type, session, browser))

    def later(self, write: Callable[[Path], Any], filename: str, media_type: str, session: str,
              browser: str | None = None, alive: Callable[[str], bool] | None = None) -> str:
        """Register a download written when its link is followed (:func:`written`, each time), for ``session`` in
        ``browser``; returns its token. ``alive(session)`` says whether a session is still connected: the links of
        sessions gone are dropped now (they hold what they would write, e.g. a run's results)."""
        if alive is not None:
            with self._lock:
                gone = [t for t, e in self._exports.items() if isinstance(e, Later) and not alive(e.session)]
                for t in gone:
                    del self._exports[t]
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._exports[token] = Later(write, filename, media_type, session, browser)
        return token

    def add(self, export: Export) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._exports[token] = export
        timer = threading.Timer(max(0.0, export.expires - time.monotonic()), self.drop, [token])
        timer.daemon = True
        timer.start()
        return token

    def take(self, token: str, browser: str | None = None) -> Export | Later | None:
        """The token's export, which no later call gets (a :class:`Later` stays: each request writes its own file);
        None when unknown, used or expired, or when the export is bound to a browser other than ``browser`` (the
        token then stays for its own browser)."""
        with self._lock:
            export = self._exports.get(token)
            if export is not None and export.browser is not None and not (
                    browser is not None and hmac.compare_digest(export.browser, browser)):
                return None
            if isinstance(export, Later):
                return export
            export = self._exports.pop(token, None)
        if export is not None and export.expires < time.monotonic():  # its timer has not run yet
            export.path.unlink(missing_ok=True)
            return None
        return export

    def peek(self, token: str, session: str) -> Export | Later | None:
        """The token's export while it can still be downloaded by ``session``."""
        with self._lock:
            export = self._exports.get(token)
        ok = export is not None and export.session == session and (
            isinstance(export, Later) or export.expires >= time.monotonic())
        return export if ok else None

    def drop(self, token: str) -> None:
        with self._lock:
            export = self._exports.pop(token, None)
        if isinstance(export, Export):
            export.path.unlink(missing_ok=True)

    def drop_session(self, session: str) -> None:
        with self._lock:
            tokens = [t for t, e in self._exports.items() if e.session == session]
        for t in tokens:
            self.drop(t)


def written(write: Callable[[Path], Any], filename: str, media_type: str, session: str,
            browser: str | None = None) -> Export:
    """Have ``write(path)`` write a file under :func:`folder` with a random name (never a name given), whole or
    not at all: a file whose writing failed is deleted and the error raised."""
    where = folder()
    _sweep(where)
    path = where / (secrets.token_hex(16) + re.sub(r"[^.a-z0-9]", "", Path(filename).suffix))
    try:
        write(path)
        return Export(path, filename, media_type, session, browser, path.stat().st_size, time.monotonic() + TTL_S)
    except BaseException:  # nothing of a file that failed is kept, nor registered
        path.unlink(missing_ok=True)
        raise


@st.cache_resource(show_spinner=False)
def issued() -> Issued:
    """The server's one registry. Held by Streamlit's resource cache rather than this module, so that a module
    reloaded by the file watcher (``--server.fileWatcherType auto``) still finds the tokens the route serves."""
    return Issued()


def _session() -> str:
    ctx = get_script_run_ctx()
    if ctx is None:
        raise RuntimeError("an export is prepared by a page's script run")
    return ctx.session_id


def _sweep(where: Path) -> None:
    """Delete what a stopped server left: any file older than a link lives (a file being written is fresh)."""
    old = time.time() - TTL_S - 60
    for p in where.iterdir():
        try:
            if p.is_file() and p.stat().st_mtime < old:
                p.unlink()
        except OSError:
            pass  # another server's sweep got there first


def browser_key(xsrf_cookie: str | None) -> str | None:
    """A digest of the secret part of Streamlit's XSRF cookie (the same on every page of one browser while the
    mask around it changes), or None when there is none or it does not decode."""
    from streamlit.web.server.starlette.starlette_app_utils import decode_xsrf_token_string

    secret, _ = decode_xsrf_token_string(xsrf_cookie or "")
    return hashlib.sha256(b"evaldash-export|" + secret).hexdigest() if secret else None


def _this_browser() -> str | None:
    """:func:`browser_key` of the browser whose page is running. With XSRF protection on (Streamlit's default), a
    connection without the cookie gets a key no request can match: its links serve nothing (closed, not open)."""
    if not st_config.get_option("server.enableXsrfProtection"):
        return None
    return browser_key(st.context.cookies.get(XSRF_COOKIE)) or "unmatchable:" + secrets.token_hex(16)


def prepare(write: Callable[[Path], Any], filename: str, media_type: str) -> str:
    """Write a file for this session, in this browser, to download once (:meth:`Issued.issue`); returns its token."""
    return issued().issue(write, filename, media_type, _session(), _this_browser())


def ready(token: str) -> Export | None:
    """The export a token of this session names, while its link still works."""
    return issued().peek(token, _session())


def discard(token: str) -> None:
    """Drop a token of this session (and its file), e.g. when the same export is asked for again."""
    if issued().peek(token, _session()) is not None:
        issued().drop(token)


def forget_session() -> None:
    """Called by app.py's gate on a session that is not signed in: its links stop working at once."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        issued().drop_session(ctx.session_id)


def later(key: str, view: object, write: Callable[[Path], Any], filename: str, media_type: str) -> str:
    """This session's link token for a download written when the link is followed (:meth:`Issued.later`), kept
    in the session under ``key`` while ``view`` (what the file would hold) stays the same, so the link a reader
    sees does not change under their pointer; a new view drops the old token.

    Args:
        key: the download's session-state key.
        view: anything comparable that names what ``write`` writes (run, thresholds, rows...).
        write: ``write(path)`` writes the file whole or raises (run by the route, in its own thread: it must not
            call Streamlit's elements).
    """
    held = st.session_state.get(key)
    if held and held["view"] == view and ready(held["token"]):
        return held["token"]
    if held:
        discard(held["token"])
    from streamlit.runtime import Runtime

    token = issued().later(write, filename, media_type, _session(), _this_browser(),
                           alive=Runtime.instance().is_active_session if Runtime.exists() else None)
    st.session_state[key] = {"token": token, "view": view}
    return token


def offer(key: str, label: str, filename: str, media_type: str, content: Callable[[], str | bytes],
          view: object = None) -> None:
    """A small download as one link: a click has the server compute ``content()`` then and serve it, bound to
    this session and browser as Results' exports are (:func:`later`). Never Streamlit's ``st.download_button``,
    whose ``/media/`` URL any request gets, signed in or not.

    Args:
        key: this download's session-state key (name it by the run, so no other run's file is offered).
        label: the link's text.
        content: what the file holds, computed when the link is followed (in the route's thread: no elements).
        view: what ``content`` depends on beyond ``key`` (e.g. the text it exports); the link is made anew when
            it changes.
    """
    def write(path: Path) -> None:
        data = content()
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    link(later(key, (filename, view), write, filename, media_type), filename, label)


LINK_STYLE = ("display:inline-block;padding:0.25rem 0.75rem;border-radius:0.5rem;border:1px solid #3b5bdb;"
              "color:#3b5bdb;text-decoration:none;font-weight:600")


def link(token: str, filename: str, label: str) -> None:
    """The download's link, relative to the page (so under ``server.baseUrlPath`` too): a click saves the file.
    Our own markup; the file name and label are escaped although made of the run's name by ui.exports_widgets."""
    st.html(f'<a href="{ROUTE}/{token}" download="{html.escape(filename)}" title="Save {html.escape(filename)}" '
            f'style="{LINK_STYLE}">{html.escape(label)}</a>')


# ------------------------------------------------------------------ the route

def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    with f:
        while piece := f.read(PIECE):
            yield piece


def serve(request: Any) -> Any:
    """GET <base>/exports/<token>: the export, once, from disk; otherwise a one-line text and no data. A plain
    function: Starlette runs it in a worker thread (it reads the sign-in settings and opens a file)."""
    from starlette.responses import PlainTextResponse, StreamingResponse
    from streamlit.runtime import Runtime

    if request.method != "GET":  # a HEAD would spend the token
        return PlainTextResponse("GET only.", status_code=405)
    conf = auth.settings()
    if conf.problem:
        return PlainTextResponse("Sign-in is configured but cannot be used: nothing is served.", status_code=403)
    token = request.path_params["token"]
    browser = browser_key(request.cookies.get(XSRF_COOKIE)) if st_config.get_option("server.enableXsrfProtection") else None
    export = issued().take(token, browser) if TOKEN.fullmatch(token) else None
    if export is None or not Runtime.instance().is_active_session(export.session):  # its page closed, signed out
        if isinstance(export, Export):
            export.path.unlink(missing_ok=True)
        return PlainTextResponse(GONE, status_code=404)
    if isinstance(export, Later):  # a link's download: written now, for this request only
        try:
            export = written(export.write, export.filename, export.media_type, export.session, export.browser)
        except OSError as e:  # a full or read-only disk: said in one line, no traceback
            return PlainTextResponse(f"The export could not be written: {e.strerror or type(e).__name__}",
                                     status_code=507)
    try:
        f = open(export.path, "rb")
    except OSError:  # deleted under us (a sweep of another server on the same store)
        return PlainTextResponse(GONE, status_code=404)
    finally:
        export.path.unlink(missing_ok=True)  # the open file is still read to its end
    name = quote(export.filename)  # RFC 6266: a name beyond ASCII goes as filename*, as Starlette's FileResponse does
    disposition = f'attachment; filename="{name}"' if name == export.filename else f"attachment; filename*=utf-8''{name}"
    headers = {"Content-Disposition": disposition, "Content-Length": str(export.size),
               "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": "sandbox"}  # an HTML report opened in place runs nothing of ours
    return StreamingResponse(_chunks(f), media_type=export.media_type, headers=headers)


def routes() -> list:
    """The routes app.py's ``st.App`` adds to Streamlit's: exports, under ``server.baseUrlPath`` like its own."""
    from starlette.routing import Route

    base = str(st_config.get_option("server.baseUrlPath") or "").strip("/")
    return [Route("/" + "/".join(p for p in (base, ROUTE) if p) + "/{token}", serve, methods=["GET"])]
