"""The Compare page's trend over runs, timed in Chromium (issue 35: "first build under 2 s").

    python bench/compare_trend.py [--runs 12] [--rows 500] [--reps 3] [--app DIR] [--keep DIR]

Builds a SQLite store holding one dataset of ``--rows`` rows and ``--runs`` completed runs of it, a day apart,
each judged on three metrics (coherence, fluency, relevance: 1-5, every fifth row moved by a point from one run
to the next, so the trend has changes to test), written through the store's own API. Then serves the dashboard
(``streamlit run app.py`` from this checkout or ``--app``, e.g. an older checkout for the figure before) and
opens ``/compare?base=<newest run>&trend=true`` in headless Chromium (Debian's), waiting as
bench/dashboard_scale.py does (``SETTLED``: the text shown, Streamlit's script run finished, the three trend
charts drawn, checked at every animation frame):

- first build: the trend's first showing in a server that has served another page (the store opened), so its
  runs' columns, summaries, McNemar tests and charts are all built then; target 2 s;
- a new tab (``--reps`` times, the median): the same page again, as a teammate opening the link;
- beside them, in new tabs: the app's lightest page (Pairwise inspector with nothing to show: a title, a
  message, a link), what any page costs on this machine at that moment (on a loaded machine every figure
  grows), and the newest run's Results page (its two Vega-Lite charts drawn), a page with charts to set the
  trend's three beside.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dashboard_scale import _Timer, serve  # noqa: E402  (the same waits and server as the scale bench)

METRICS = ("coherence", "fluency", "relevance")
TARGET = 2.0


def build_store(home: Path, runs: int, rows: int) -> str:
    """The store in the module docstring; returns the newest run's id."""
    import sqlalchemy as sa

    from evaluators import Store, load_dataset
    from evaluators.store.schema import Result

    home.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{home / 'evals.db'}")
    did = store.save_dataset(load_dataset([{"query": f"Question {i} about the warranty", "response": f"Answer {i}"}
                                           for i in range(rows)]))
    judge = {"model": "gpt-4o-mini", "provider": "openai"}
    rid = ""
    for k in range(runs):
        rid = store.create_run(did, {"metrics": list(METRICS), "thresholds": {}, "judge": judge}, "h", f"nightly {k + 1}")

        def value(i: int, m: int) -> float:
            moved = (1 if (i + k) % 5 == 0 else 0) - (1 if k % 3 == 2 and i % 9 == 0 else 0)
            return float(min(5, max(1, (i * 7 + m) % 5 + 1 + moved)))
        store.write_results(rid, [Result(i, name, 0, "ok", value(i, m), {name: value(i, m)}, reason="ok")
                                  for m, name in enumerate(METRICS) for i in range(rows)])
        store.update_run(rid, status="completed", tasks_total=rows * len(METRICS), tasks_done=rows * len(METRICS))
        with store.engine.begin() as c:
            c.execute(sa.text("UPDATE runs SET created_at = :t WHERE id = :i"),
                      {"t": dt.datetime(2026, 10, 1, 9) + dt.timedelta(days=k), "i": rid})
    return rid


def measure(url: str, run_id: str, reps: int) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, CHROMIUM

    tm = _Timer(url, locator_waits=False)
    path, text = f"/compare?base={run_id}&trend=true", "Trend over runs of this dataset"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        tm.new_tab(ctx, "/runs", "runs").close()  # the server's start (store, samples) is not the trend's
        t = time.perf_counter()
        tm.new_tab(ctx, path, text, charts=len(METRICS)).close()
        out = {"first_build": time.perf_counter() - t, "new_tab": [], "floor": [], "results": []}
        for _ in range(reps):
            t = time.perf_counter()
            tm.new_tab(ctx, path, text, charts=len(METRICS)).close()
            out["new_tab"].append(time.perf_counter() - t)
            t = time.perf_counter()
            tm.new_tab(ctx, "/pairwise", "No run with wildbench_pairwise yet").close()
            out["floor"].append(time.perf_counter() - t)
            t = time.perf_counter()
            tm.new_tab(ctx, f"/results?run={run_id}", "Coherence pass rate", charts=2).close()
            out["results"].append(time.perf_counter() - t)
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--app", default=str(ROOT), help="the checkout to serve (another one for the figure before)")
    ap.add_argument("--keep", help="build the store here (and keep it); an existing store there is reused")
    args = ap.parse_args()
    home = Path(args.keep or tempfile.mkdtemp(prefix="evaldash-trend-"))
    t = time.perf_counter()
    if (home / "evals.db").exists():
        from evaluators import Store

        run_id = Store(f"sqlite:///{home / 'evals.db'}").run_rows()[0]["id"]  # newest first
        print(f"reusing the store at {home}")
    else:
        run_id = build_store(home, args.runs, args.rows)
        print(f"store: {args.runs} runs x {args.rows} rows x {len(METRICS)} metrics, built in "
              f"{time.perf_counter() - t:.1f} s at {home}")
    for old in (home / "views").glob("*"):
        old.unlink()  # every run's columns built by the page, as on a server that never opened them
    proc, url = serve(Path(args.app), home)
    try:
        got = measure(url, run_id, args.reps)
    finally:
        proc.terminate()
        proc.wait(10)
    med = statistics.median(got["new_tab"])
    print(f"app: {args.app}; load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"trend, first build (a served server's first showing of it): {got['first_build']:.2f} s  "
          f"target <= {TARGET} s  {'PASS' if got['first_build'] <= TARGET else 'FAIL'}")
    print(f"trend, new tab: median {med:.2f} s ({', '.join(f'{x:.2f}' for x in got['new_tab'])})  "
          f"target <= {TARGET} s  {'PASS' if med <= TARGET else 'FAIL'}")
    for key, label in (("floor", "the lightest page, new tab (reference: this machine now)"),
                       ("results", "the newest run's Results page, new tab (reference: two charts)")):
        print(f"{label}: median {statistics.median(got[key]):.2f} s ({', '.join(f'{x:.2f}' for x in got[key])})")


if __name__ == "__main__":
    main()
