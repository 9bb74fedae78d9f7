"""How long a metric checkbox on New evaluation takes to answer, in the browser (issue 24, item 8).

    python bench/new_run_checkbox.py [--url URL] [--rows 31] [--reps 5]

Without ``--url``, builds a store in a temporary folder holding the bundled samples and, with
``--rows`` above the sample's 31, a single-turn dataset of that many rows; starts the dashboard
(``streamlit run app.py``) on a free loopback port, opens New evaluation on that dataset in headless
Chromium (Debian's, /usr/bin/chromium), and times each click on a metric's checkbox, ``--reps`` times
each way: from the click to the moment the threshold box that the checkbox adds (or removes) is shown
(or gone) and Streamlit reports its script run finished, checked by the page at every animation
frame. Checkboxes are clicked in turn: a classic metric alone, a judge metric (the judge's settings
appear, no estimate yet), then, with coherence checked and the judge given (the cost estimate shows),
a judge metric and a classic one.
Prints each sample and the median of each kind; the target is 0.3 s.

A fresh server's first session opens "/" first: on a deep link, Streamlit's legacy pages/ mode (until
some session has run app.py's router, see ui/__init__.py) shows a "Page not found" dialog over the page.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DONE = """([label, present]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const has = [...app.querySelectorAll('[data-testid="stNumberInput"] label')].some(l => l.textContent.startsWith(label));
    return has === present; }"""
SETTLED = """() => document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state') === 'notRunning'"""


def click(page, metric: str, on: bool) -> float:
    box = page.locator('[data-testid="stCheckbox"]').filter(has_text=metric).first.locator("label")
    start = time.perf_counter()
    box.click()
    page.wait_for_function(DONE, arg=[f"{metric} passes at", on], polling="raf", timeout=60_000)
    return time.perf_counter() - start


def measure(page, metric: str, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        out.append(click(page, metric, True))
        out.append(click(page, metric, False))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a dashboard already running (its New evaluation page, dataset chosen)")
    ap.add_argument("--rows", type=int, default=31)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from evaluators import Store, load_dataset
    from tests.browser import ARGS, start_dashboard, stop
    from tests.judge_server import JudgeServer

    with tempfile.TemporaryDirectory() as tmp, JudgeServer() as judge:
        proc = None
        if args.url:
            url = args.url
        else:
            home = Path(tmp) / "evalhome"
            store = Store(f"sqlite:///{home / 'evals.db'}")
            sample = [json.loads(x) for x in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines()]
            for p in sorted((ROOT / "data").glob("*.jsonl")):
                store.save_dataset(load_dataset(p))
            rows = [dict(sample[i % len(sample)], query=f"{sample[i % len(sample)]['query']} ({i})") for i in range(args.rows)]
            did = store.save_dataset(load_dataset(rows, name=f"bench {args.rows} rows"))
            proc, base = start_dashboard(home)
            url = f"{base}/new?dataset={did}"
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1200})
                if proc is not None:  # a fresh server's first session lands on "/" (see the note above)
                    page.goto(base)
                    page.wait_for_function(SETTLED, polling="raf", timeout=60_000)
                page.goto(url)
                page.wait_for_function(SETTLED, polling="raf", timeout=60_000)
                page.get_by_text("Pick at least one metric").wait_for(timeout=60_000)
                page.locator('[data-testid="stCheckbox"]').filter(has_text="f1_score").first.wait_for(timeout=60_000)
                click(page, "f1_score", True)  # warm-up: first import of the metric modules, caches
                click(page, "f1_score", False)
                figures = {"classic (f1_score)": measure(page, "f1_score", args.reps),
                           "judge, no judge given (coherence)": measure(page, "coherence", args.reps)}
                click(page, "coherence", True)  # a judge given: the estimate is computed on each rerun
                page.get_by_label("Base URL").fill(judge.url)
                page.get_by_label("Base URL").press("Enter")
                page.wait_for_function(SETTLED, polling="raf", timeout=60_000)
                page.get_by_label("Model (Azure: deployment)").fill("loopback")
                page.get_by_label("Model (Azure: deployment)").press("Enter")
                page.get_by_text("Judge calls").wait_for(timeout=60_000)
                page.wait_for_function(SETTLED, polling="raf", timeout=60_000)
                figures["judge given: a judge metric (fluency)"] = measure(page, "fluency", args.reps)
                figures["judge given: a classic metric (bleu)"] = measure(page, "bleu", args.reps)
                browser.close()
        finally:
            if proc is not None:
                stop(proc)
    print(f"rows: {args.rows}; target 0.3 s")
    for name, xs in figures.items():
        print(f"{name:42s} median {statistics.median(xs):.2f} s   samples " + " ".join(f"{x:.2f}" for x in xs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
