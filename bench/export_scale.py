"""Exporting a big run from the dashboard: the server's peak memory per download (issue 24, "At scale").

    python bench/export_scale.py [--keep DIR] [--rows 100000] [--app DIR] [--formats csv jsonl html]

The store is ``bench/dashboard_scale.py``'s (``--rows`` single-turn rows x 6 metrics, real WildBench answers,
judge reasons and replies; built at ``--keep``, or reused when already there). A real ``streamlit run app.py``
serves it on loopback; headless Chromium (Debian's) opens the run's Results page, its "Share & export" tab,
and clicks each download button in turn, as a user does, saving the file. For each download the server's
peak resident set is read from ``/proc/PID/status`` (``VmHWM``, reset before each click by writing 5 to
``/proc/PID/clear_refs``), with its resident set before the click and the size of the file received.
Target: the peak stays under 1 GB.

``--app DIR`` serves another checkout of the app (``git archive <commit> | tar -x -C DIR``), to measure
the code before a change on the same store. Exits with SKIPPED when ../shared is absent.

Since the exports are served from disk (ui.downloads), a button writes the file and a link under it downloads
it: both are clicked, and the peak covers both (writing, then streaming). A checkout whose button downloads at
once (st.download_button, before that change) is measured the same way: the bench takes whichever comes.
Streamlit 1.67 keeps a st.download_button's bytes in the server's memory until two script runs after the page
stops showing it, so after each download the page is opened twice more and the resident set read again.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import dashboard_scale as scale  # noqa: E402  the 100,000-row store and the page's settled check

TARGET_MB = 1024
# Streamlit 1.67's page waits 180 s for a download's file (DownloadButton: requestDeferredFile, nv=18e4 ms),
# then says it failed: a file made more slowly never reaches the user.
BROWSER_WAITS_S = 180
WRITE_WAITS_S = 3600  # how long the bench waits for a button to give a download or a link
BUTTONS = {"csv": "Rows as CSV", "jsonl": "Rows as JSONL", "html": "HTML report"}


def status_mb(pid: int, key: str) -> float:
    """A ``/proc/PID/status`` figure in MB (``VmRSS``: now; ``VmHWM``: the peak since the last reset)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024


def reset_peak(pid: int) -> None:
    """Start a new peak: the kernel sets VmHWM back to the current resident set (proc(5), clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def cpu_ticks(pid: int) -> int:
    """The process's CPU time so far, in clock ticks (``/proc/PID/stat``: utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_idle(pid: int, quiet_s: int = 10, limit_s: int = 3600) -> None:
    """Until the server has used under 5% of a core for ``quiet_s`` seconds in a row: the work of a download the
    page gave up on (Streamlit goes on making the file) has ended, so the peak read next includes it."""
    tick = os.sysconf("SC_CLK_TCK")
    start = time.time()
    quiet, last = 0, cpu_ticks(pid)
    while quiet < quiet_s and time.time() - start < limit_s:
        time.sleep(1)
        now = cpu_ticks(pid)
        quiet = quiet + 1 if now - last < 0.05 * tick else 0
        last = now


def _open_share_tab(page, url: str, run_id: str) -> None:
    page.goto(f"{url}/results?run={run_id}&view=Share+%26+export", wait_until="commit")
    page.wait_for_function(scale.SETTLED, arg=["Rows as CSV", False, 0], polling="raf", timeout=600_000)


def _click(page, fmt: str, path: Path) -> tuple[float, bool]:
    """Click the format's button; when it leaves a link (the export written on the server), click that too.
    Returns the seconds until the download began (the file written) and whether the whole file arrived."""
    got: list = []

    def listener(download) -> None:  # (Playwright wraps a handler: a builtin method cannot be one)
        got.append(download)

    page.on("download", listener)
    try:
        t = time.perf_counter()
        page.get_by_role("button", name=BUTTONS[fmt]).click()
        link = page.get_by_role("link", name=re.compile(rf"^Download .*\.{fmt} \("))
        writing = page.get_by_text("Writing ", exact=False)  # ui.exports_widgets' spinner while the file is written
        while not got and not link.count():
            waited = time.perf_counter() - t
            if waited > WRITE_WAITS_S or (waited > BROWSER_WAITS_S + 20 and not writing.count()):
                break  # a download button's page gave up (or a write never ended)
            page.wait_for_timeout(250)  # a bench: polls the page, times nothing by it
        written = time.perf_counter() - t
        if not got and link.count():
            with page.expect_download(timeout=60_000) as dl:
                link.click()
            got.append(dl.value)
    finally:
        page.remove_listener("download", listener)
    if not got:
        return written, False
    got[0].save_as(str(path))  # returns once the whole file is received
    return written, got[0].failure() is None


def measure(url: str, pid: int, run_id: str, formats: list[str], out: Path, home: Path) -> list[dict]:
    """Each download clicked in turn; per format: RSS before, peak during, RSS after, file size, seconds."""
    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, CHROMIUM

    got = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_context(viewport={"width": 1500, "height": 1200}, accept_downloads=True).new_page()
        _open_share_tab(page, url, run_id)
        opened = status_mb(pid, "VmRSS")
        for fmt in formats:
            before = status_mb(pid, "VmRSS")
            reset_peak(pid)
            t = time.perf_counter()
            path = out / f"export.{fmt}"
            written, whole = _click(page, fmt, path)
            if not whole:  # the page gave up on the file: the server goes on making it, and that counts too
                path.write_bytes(b"")
                wait_idle(pid)
            seconds = time.perf_counter() - t
            peak = status_mb(pid, "VmHWM")
            left = [f.name for f in (home / "exports").glob("*")] if (home / "exports").is_dir() else []
            for _ in range(2):  # two script runs: Streamlit drops a download button's bytes
                _open_share_tab(page, url, run_id)
            got.append({"format": fmt, "opened": opened, "before": before, "peak": peak, "written": written,
                        "after": status_mb(pid, "VmRSS"), "mb": path.stat().st_size / 2**20, "s": seconds,
                        "left": left})
            path.unlink()
        browser.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--keep", help="the store's folder (built there when absent; reused when present)")
    ap.add_argument("--app", default=str(ROOT), help="the checkout of the app to serve (default: this one)")
    ap.add_argument("--formats", nargs="+", default=list(BUTTONS), choices=list(BUTTONS))
    args = ap.parse_args()
    if not scale.WILDBENCH.is_dir():
        print(f"SKIPPED: WildBench answers not found at {scale.WILDBENCH} (../shared is absent); nothing measured.")
        return
    home, run_id = scale._store(argparse.Namespace(keep=args.keep, rows=args.rows, runs=2))
    from evaluators import Store
    from evaluators.read.view import prepare_view

    prepare_view(Store(f"sqlite:///{home / 'evals.db'}"), run_id)  # the columns a finished run has (not measured)
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}; app served from {args.app}")
    proc, url = scale.serve(Path(args.app), home)
    try:
        with tempfile.TemporaryDirectory(prefix="evaldash-exports-") as out:
            got = measure(url, proc.pid, run_id, args.formats, Path(out), home)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # busy writing a file nobody waits for: not worth waiting on
            proc.kill()
            proc.wait(30)
    print(f"\nRSS with the run's Results page open: {got[0]['opened']:.0f} MB")
    print(f"{'download':8s} {'file':>9s} {'written':>8s} {'total':>8s} {'RSS before':>11s} {'peak RSS':>9s} "
          f"{'RSS after':>10s} {'target':>8s}  verdict")
    for g in got:
        verdict = "PASS" if g["peak"] < TARGET_MB and g["mb"] else "FAIL"
        verdict += "" if g["mb"] else " (no file)"
        verdict += f"; left on disk: {g['left']}" if g["left"] else ""
        print(f"{g['format']:8s} {g['mb']:7.0f} MB {g['written']:6.0f} s {g['s']:6.0f} s {g['before']:8.0f} MB "
              f"{g['peak']:6.0f} MB {g['after']:7.0f} MB {'< 1 GB':>8s}  {verdict}")


if __name__ == "__main__":
    main()
