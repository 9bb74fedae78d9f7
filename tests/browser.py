"""What the browser tests share: Debian's Chromium, a dashboard served on loopback, waiting for a render.

Waits on content and on Streamlit's ``data-test-script-state="notRunning"``, never on fixed sleeps.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import PASS, ROOT, default_store, env_for_home, home_url, start_queue_worker, stop_queue_worker
from tests.procs import wait_until

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium tries Google's hosts at every start.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
CHROMIUM_REASON = "Debian chromium is not installed (scripts/setup.sh --dev)"
# also marks the test ``chromium`` (tests/conftest.py)
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=CHROMIUM_REASON)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(home: Path, stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` on a free loopback port with its store under ``home``; (process, URL) once healthy."""
    port = free_port()
    # PostgreSQL pass: home's own database (a module's dashboard starts before any test sets EVAL_DATABASE_URL)
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, env=env_for_home(home),
                            stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                proc.queue_worker = start_queue_worker(home_url(home))  # PostgreSQL: what runs its runs
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the dashboard did not start")


def stop(proc: subprocess.Popen) -> None:
    stop_queue_worker(getattr(proc, "queue_worker", None))
    proc.terminate()
    proc.wait(10)


def settle(page, text: str | None = None, timeout: float = 60_000) -> None:
    """Wait until ``text`` shows and the script run has finished."""
    if text:
        page.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def served(home: Path):
    """A dashboard on its own store under ``home``, for a fixture: yields (url, that Store), then stops it."""
    proc, url = start_dashboard(home)
    try:
        yield url, default_store(home)
    finally:
        stop(proc)


def screenshot(page, folder: Path, name: str) -> None:
    """The whole page as ``folder/name.png`` (CI keeps ``artifacts/``)."""
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


LOCAL_HOSTS = {"127.0.0.1", "localhost"}


class Recorder:
    """A loopback "proxy" the dashboard's server is pointed at: any outbound HTTP(S) it attempts lands here."""

    def __init__(self):
        self.seen: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.seen.append(conn.recv(4096).split(b"\r\n")[0].decode(errors="replace"))
                except OSError:
                    pass

    def close(self):
        self.sock.close()


class Dashboard:
    """`streamlit run app.py` as a user starts it (no --server.address, so the repo's config decides),
    its output kept in files and its outbound HTTP sent to a Recorder."""

    def __init__(self, home: Path, logs: Path, recorder: Recorder, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        logs.mkdir(parents=True, exist_ok=True)
        self.out, self.err = logs / f"streamlit-{self.port}.out", logs / f"streamlit-{self.port}.err"
        full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(home)), "PYTHONPATH": str(ROOT),
                "EVAL_HOME": str(home), "HTTP_PROXY": recorder.url, "HTTPS_PROXY": recorder.url,
                "http_proxy": recorder.url, "https_proxy": recorder.url, "NO_PROXY": "", "no_proxy": "", **env}
        if PASS["store"] == "postgresql":  # home's own database, and a queue worker for the runs started there
            full["EVAL_DATABASE_URL"] = home_url(home)
        self.queue_worker = start_queue_worker(home_url(home))
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port)],
                                     cwd=ROOT, env=full, stdout=self.out.open("wb"), stderr=self.err.open("wb"))
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                # urllib would use the proxy variables of this process: none are set here
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=1).read() == b"ok":
                    # the welcome banner is printed after any address lookup: wait for it, so a
                    # lookup is recorded before the test looks
                    wait_until(lambda: "URL" in self.out.read_text(errors="replace"), timeout=15,
                               what="streamlit's welcome banner")
                    return
            except OSError:
                time.sleep(0.2)
        self.proc.kill()
        pytest.fail("the dashboard did not start")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        stop_queue_worker(self.queue_worker)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # Streamlit's shutdown once hung past 10 s in a full suite run
                self.kill()


def watched_page(browser, requests: list[str]):
    page = browser.new_context(viewport={"width": 1500, "height": 1400}, accept_downloads=True).new_page()
    page.on("request", lambda r: requests.append(r.url))
    page.on("framenavigated", lambda f: requests.append(f.url))
    return page


def hosts(urls: list[str]) -> set[str]:
    from urllib.parse import urlsplit

    return {urlsplit(u).hostname for u in urls if not u.startswith(("data:", "blob:", "about:"))}
