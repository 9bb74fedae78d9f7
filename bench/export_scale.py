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

Streamlit 1.67 keeps a download's bytes in the server's memory until two script runs after the page
stops showing it, so after each download the page is opened twice more and the resident set read again.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import dashboard_scale as scale  # noqa: E402  the 100,000-row store and the page's settled check

TARGET_MB = 1024
# Streamlit 1.67's page waits 180 s for a download's file (DownloadButton: requestDeferredFile, nv=18e4 ms),
# then says it failed: a file made more slowly never reaches the user.
BROWSER_WAITS_S = 180
BUTTONS = {"csv": "Rows as CSV", "jsonl": "Rows as JSONL", "html": "HTML report"}


def status_mb(pid: int, key: str) -> float:
    """A ``/proc/PID/status`` figure in MB (``VmRSS``: now; ``VmHWM``: the peak since the last reset)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024


def reset_peak(pid: int) -> None:
    """Start a new peak: the kernel sets VmHWM back to the current resident set (proc(5), clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def serve(app: Path, home: Path) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` from ``app`` on a free loopback port over the bench's store."""
    from tests.browser import free_port

    port = free_port()
    env = {**os.environ, "EVAL_HOME": str(home), "PYTHONPATH": str(app)}
    env.pop("EVAL_DATABASE_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"], cwd=app, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.terminate()
                raise SystemExit("the dashboard did not start")
            time.sleep(0.2)


def _open_share_tab(page, url: str, run_id: str) -> None:
    page.goto(f"{url}/results?run={run_id}&view=Share+%26+export", wait_until="commit")
    page.wait_for_function(scale.SETTLED, arg=["Rows as CSV", False, 0], polling="raf", timeout=600_000)


def measure(url: str, pid: int, run_id: str, formats: list[str], out: Path) -> list[dict]:
    """Each download clicked in turn; per format: RSS before, peak during, RSS after, file size, seconds."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, sync_playwright

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
            try:
                with page.expect_download(timeout=BROWSER_WAITS_S * 1000 + 20_000) as dl:
                    page.get_by_role("button", name=BUTTONS[fmt]).click()
                dl.value.save_as(str(path))  # returns once the whole file is received
            except PlaywrightTimeout:  # the page gave up on the file: what the server took by then is kept
                path.write_bytes(b"")
            seconds = time.perf_counter() - t
            peak = status_mb(pid, "VmHWM")
            for _ in range(2):  # two script runs: Streamlit drops the download's bytes
                _open_share_tab(page, url, run_id)
            got.append({"format": fmt, "opened": opened, "before": before, "peak": peak,
                        "after": status_mb(pid, "VmRSS"), "mb": path.stat().st_size / 2**20, "s": seconds})
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
    proc, url = serve(Path(args.app), home)
    try:
        with tempfile.TemporaryDirectory(prefix="evaldash-exports-") as out:
            got = measure(url, proc.pid, run_id, args.formats, Path(out))
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"\nRSS with the run's Results page open: {got[0]['opened']:.0f} MB")
    print(f"{'download':8s} {'file':>9s} {'time':>8s} {'RSS before':>11s} {'peak RSS':>9s} {'RSS after':>10s} "
          f"{'target':>8s}  verdict")
    for g in got:
        verdict = "PASS" if g["peak"] < TARGET_MB and g["mb"] else "FAIL"
        verdict += "" if g["mb"] else f" (no file: the page gave up after {BROWSER_WAITS_S} s)"
        print(f"{g['format']:8s} {g['mb']:7.0f} MB {g['s']:6.0f} s {g['before']:8.0f} MB {g['peak']:6.0f} MB "
              f"{g['after']:7.0f} MB {'< 1 GB':>8s}  {verdict}")


if __name__ == "__main__":
    main()
