"""What the browser tests share: Debian's Chromium, a dashboard served on loopback, waiting for a render.

Waits on content and on Streamlit's ``data-test-script-state="notRunning"``, never on fixed sleeps.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, env_for_subprocess

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium tries Google's hosts at every start.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (scripts/setup.sh --dev)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(home: Path, stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` on a free loopback port with its store under ``home``; (process, URL) once healthy."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, env=env_for_subprocess(EVAL_HOME=str(home)),
                            stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the dashboard did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def settle(page, text: str | None = None, timeout: float = 60_000) -> None:
    """Wait until ``text`` shows and the script run has finished."""
    if text:
        page.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def served(home: Path):
    """A dashboard on its own store under ``home``, for a fixture: yields (url, that Store), then stops it."""
    from evaluators import Store

    proc, url = start_dashboard(home)
    try:
        yield url, Store(f"sqlite:///{home / 'evals.db'}")
    finally:
        stop(proc)


def screenshot(page, folder: Path, name: str) -> None:
    """The whole page as ``folder/name.png`` (CI keeps ``artifacts/``)."""
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
