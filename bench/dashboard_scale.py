"""The dashboard on a big run, measured in the browser (issue 10, "fast at any size").

    python bench/dashboard_scale.py [--rows 100000] [--runs 1000] [--keep DIR]

Builds a store (SQLite, written directly in bulk, not through the runner) holding:

- one finished run of ``--rows`` single-turn rows x 6 metrics: three judge metrics with reasons and
  raw replies (coherence, fluency, relevance: 1-5) and three classic ones (f1_score, bleu, rouge with
  its three outputs); 1% of judge results errored. Text is real: each row's response is a WildBench
  answer from ``../shared/fixtures/wildbench`` (3,071 answers of three models, ~2,000 characters each,
  reused in turn), its query the first 300 characters of another answer, its reasons the judge's
  strengths and weaknesses written for those answers; scores come from the judge's WildBench score.
- ``--runs`` - 1 small finished runs (for the Runs page).

Then starts the dashboard (``streamlit run app.py``) on a free loopback port and measures in headless
Chromium (Debian's, /usr/bin/chromium), each against its target:

- the first open of the run, in this process: its columns built from SQLite and written to ``views/``
  beside the store (what the dashboard's first open of a finished run does once), and the dataset's
  search text (built in the background after that first open);
- Results page first render: cold (the server's first open of the run, columns read from ``views/``)
  and again in a new page (warm); target 2 s; beside it the same page on a 5-row run, which is what
  this machine takes for any Results page (on a loaded machine every figure grows);
- a filter change on the Rows tab (verdict "fail"), from the click on the option to the new table; target
  0.5 s; then text searches (reported);
- a row selection (click a row, wait for its detail pane); target 0.5 s;
- the streamlit server's RSS after all of it; target < 1 GB;
- the Runs page with ``--runs`` runs; target 1 s; beside it, for reference, the app's lightest page (the
  Pairwise inspector with nothing to show: a title, a message, a link) loaded the same way;
- the same two pages reached inside the app, as a reader moves: a click on the big run's name in the Runs list
  opens its Results page, the sidebar's "Runs" goes back (no reload of the browser's app).

A figure is the time from the action to the moment the expected content is shown and Streamlit reports
its script run finished, checked by the page at every animation frame (see ``SETTLED``). Each is
measured ``--reps`` times (3; a new tab each time, a different row each time, the filter set back
between two changes) and its median is the figure, every sample printed beside it: one load on a
2-core machine varies by a few tenths of a second. The cold first render happens once. With
``--locator-waits`` it waits as it did before 2026-11-23 (see ``SETTLED``), to compare. Exits with
SKIPPED when ../shared is absent.
"""
from __future__ import annotations

import argparse
import os
import ast
import datetime as dt
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WILDBENCH = ROOT.parent / "shared" / "fixtures" / "wildbench" / "eval_results"
JUDGE = ("coherence", "fluency", "relevance")
CLASSIC = ("f1_score", "bleu", "rouge")
# Every wait is one check that the page runs at each animation frame (polling="raf"): the text is
# in the app, Streamlit's script run is finished, the grid is there and ``charts`` charts are drawn
# (Vega draws after the elements arrive). Playwright's own waits for a locator (``wait_for``,
# ``wait_for_selector``) poll at growing intervals, 20, 50, 100, 100 ms then every 500 ms
# (``retryWithProgressAndBackoff`` in its driver), so they saw a page up to half a second after it
# was shown; before 2026-11-23 this bench used them.
SETTLED = """([text, table, charts]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (text && !app.textContent.includes(text)) return false;
    if (table && !app.querySelector('[data-testid="stDataFrame"]')) return false;
    if (!charts) return true;
    const c = app.querySelectorAll('[data-testid="stVegaLiteChart"]');
    return c.length >= charts && [...c].every(e => e.querySelector('svg.marks')); }"""
# a row's detail pane: the URL names a row again, not the one it named (``before``), Streamlit's run
# is finished (the URL is written during it), the judge's reasoning is shown and the pane's heading
# names a row other than ``shown`` (the heading before the click)
ROW_SHOWN = """([before, shown]) => {
    if (location.href === before || new URL(location.href).searchParams.get('row') === null) return false;
    const app = document.querySelector('[data-testid="stApp"]');
    if (app.getAttribute('data-test-script-state') !== 'notRunning' || !app.textContent.includes("Judge's reasoning"))
        return false;
    const h = [...app.querySelectorAll('[data-testid="stMain"] h3')].map(h => h.textContent.trim());
    return h.some(t => /^Row [0-9]+$/.test(t) && t !== shown); }"""
HEADING = """() => [...document.querySelectorAll('[data-testid="stMain"] h3')].map(h => h.textContent.trim())
    .find(t => /^Row [0-9]+$/.test(t)) || null"""
TARGETS = {"first_render": 2.0, "filter": 0.5, "select": 0.5, "rss_mb": 1024, "runs_page": 1.0}


def answers() -> list[dict]:
    """WildBench answers with the judge's score, strengths and weaknesses."""
    out = []
    for f in sorted(WILDBENCH.rglob("*.json")):
        for r in json.loads(f.read_text()):
            text = r.get("model_output")
            if not isinstance(text, str) or not text.strip():
                continue
            try:
                parsed = ast.literal_eval(r["parsed_result"]) if isinstance(r["parsed_result"], str) else r["parsed_result"]
            except (ValueError, SyntaxError):
                parsed = {}
            out.append({"text": text, "score": int(float(r.get("score") or 5)),
                        "strengths": str(parsed.get("strengths") or "No strengths noted."),
                        "weaknesses": str(parsed.get("weaknesses") or "No weaknesses noted.")})
    return out


def build_store(home: Path, rows: int, runs: int) -> str:
    """The store described in the module docstring; returns the big run's id."""
    from evaluators.store.store import Store

    home.mkdir(parents=True, exist_ok=True)
    db = home / "evals.db"
    Store(f"sqlite:///{db}")  # the schema
    pool = answers()
    rng = random.Random(10)
    now = dt.datetime(2026, 1, 1, 12)
    ts = lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f")  # noqa: E731
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    mapping = {"query": "query", "response": "response", "ground_truth": "ground_truth"}

    def dataset(did: str, name: str, n: int, make) -> None:
        con.execute("INSERT INTO datasets (id, name, source, content_hash, shape, detected, n_rows, columns, mapping,"
                    " row_numbers, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (did, name, name, did * 4, "single", "custom", n, json.dumps(list(mapping)), json.dumps(mapping),
                     json.dumps(list(range(2, n + 2))), ts(now)))
        con.executemany("INSERT INTO dataset_records (dataset_id, idx, data) VALUES (?,?,?)",
                        ((did, i, json.dumps(make(i))) for i in range(n)))

    def run(rid: str, did: str, name: str, metrics: list[str], n: int, created: dt.datetime) -> None:
        spec = {"metrics": metrics, "thresholds": {}, "judge": {"model": "gpt-4o-mini"} if set(metrics) & set(JUDGE) else None,
                "templates": {}, "options": {}, "template_texts": {}}
        con.execute("INSERT INTO runs (id, dataset_id, name, status, spec, spec_hash, created_at, started_at, finished_at,"
                    " cancel_requested, tasks_total, tasks_done, tasks_errored, judge_calls, cache_hits, prompt_tokens,"
                    " completion_tokens) VALUES (?,?,?,?,?,?,?,?,?,0,?,?,0,0,0,0,0)",
                    (rid, did, name, "completed", json.dumps(spec), "h", ts(created), ts(created), ts(created),
                     n * len(metrics), n * len(metrics)))

    def record(i: int) -> dict:
        a, b = pool[i % len(pool)], pool[(i * 7 + 3) % len(pool)]
        return {"query": b["text"][:300], "response": a["text"], "ground_truth": b["text"][:600]}

    dataset("bigdata00000", f"wildbench-answers-{rows}.jsonl", rows, record)
    run("bigrun000000", "bigdata00000", f"big run · {rows:,} rows x 6 metrics", [*JUDGE, *CLASSIC], rows, now)

    def results():
        for i in range(rows):
            a = pool[i % len(pool)]
            base = max(1, min(5, (a["score"] + 1) // 2))
            for m, k in zip(JUDGE, range(3)):
                if rng.random() < 0.01:
                    yield ("bigrun000000", i, m, 0, "error", None, None, None, None, "judge timed out after 60 s",
                           None, None, None, 0, None, ts(now))
                    continue
                score = float(max(1, min(5, base + rng.choice((-1, 0, 0, 1)))))
                reason = a["strengths"] if k != 1 else a["weaknesses"]
                raw = json.dumps({"reason": reason, "score": score})
                yield ("bigrun000000", i, m, 0, "ok", score, json.dumps({m: score}), reason, raw, None, 900, 60, 850.0,
                       0, json.dumps({"model": "gpt-4o-mini"}), ts(now))
            f1 = round(rng.random() * 0.6, 4)
            yield ("bigrun000000", i, "f1_score", 0, "ok", f1, json.dumps({"f1_score": f1}), None, None, None, None,
                   None, None, 0, None, ts(now))
            bleu = round(rng.random() * 0.4, 4)
            yield ("bigrun000000", i, "bleu", 0, "ok", bleu, json.dumps({"bleu_score": bleu}), None, None, None, None,
                   None, None, 0, None, ts(now))
            r = {"rouge_f1_score": round(rng.random() * 0.5, 4), "rouge_precision": round(rng.random(), 4),
                 "rouge_recall": round(rng.random(), 4)}
            yield ("bigrun000000", i, "rouge", 0, "ok", r["rouge_f1_score"], json.dumps(r), None, None, None, None,
                   None, None, 0, None, ts(now))

    con.executemany("INSERT INTO results (run_id, row_idx, metric, turn, status, value, outputs, reason, raw, error,"
                    " prompt_tokens, completion_tokens, latency_ms, cached, meta, created_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", results())
    dataset("smalldata000", "small.jsonl", 5, lambda i: {"query": f"q{i}", "response": f"r{i}", "ground_truth": f"g{i}"})
    for k in range(runs - 1):
        run(f"small{k:07d}", "smalldata000", f"small run {k}", ["f1_score"], 5, now - dt.timedelta(minutes=k + 1))
    con.commit()
    con.close()
    return "bigrun000000"


def rss_mb(pid: int) -> float:
    """RSS of a process and its children (streamlit runs in one process), from /proc."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


class _Timer:
    """One browser, the figures measured so far (``out``), and how this bench waits for a page to settle."""

    def __init__(self, url: str, locator_waits: bool):
        self.url, self.locator_waits = url, locator_waits
        self.out: dict = {k: [] for k in ("reference_render", "first_render", "filter", "select", "floor",
                                          "runs_page", "results_in_app", "runs_in_app")}

    def settle(self, page, text: str | None, timeout=300_000, table: bool = False, charts: int = 0):
        # (a data grid's cells are drawn on a canvas: ``table`` waits for the grid itself)
        if not self.locator_waits:
            page.wait_for_function(SETTLED, arg=[text, table, charts], polling="raf", timeout=timeout)
            return
        # --locator-waits: the waits this bench used before 2026-11-23, one after the other
        if text:
            page.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
        if table:
            page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=timeout)
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
        if charts:
            page.wait_for_function(SETTLED, arg=[None, False, charts], polling="raf", timeout=timeout)

    def goto(self, page, path: str) -> None:
        # "commit": the page is watched from its first response on
        page.goto(f"{self.url}{path}", wait_until="load" if self.locator_waits else "commit")

    def new_tab(self, ctx, path: str, text: str, charts: int = 0, key: str | None = None):
        """Open ``path`` in a new tab, time it until ``text`` (and the charts) show; keep the tab open."""
        page = ctx.new_page()
        t = time.perf_counter()
        self.goto(page, path)
        self.settle(page, text, charts=charts)
        if key:
            self.out[key].append(time.perf_counter() - t)
        return page


def _results_loads(tm: _Timer, ctx, page, run_id: str, expect: dict, reps: int) -> None:
    """The Results page of a 5-row run (this machine's floor), the big run's cold first render, then warm."""
    for _ in range(reps):
        tm.new_tab(ctx, "/results?run=small0000000", "F1 word overlap pass rate", expect["ref_charts"],
                   "reference_render").close()
    t = time.perf_counter()
    tm.goto(page, f"/results?run={run_id}")
    tm.settle(page, "Coherence pass rate", charts=expect["charts"])
    tm.out["first_render_cold"] = time.perf_counter() - t
    for _ in range(reps):
        tm.new_tab(ctx, f"/results?run={run_id}", "Coherence pass rate", expect["charts"], "first_render").close()


def _pick(tm: _Timer, page, verdict, name: str, matching: int) -> None:
    verdict.click()
    page.get_by_role("option", name=name, exact=True).click()
    tm.settle(page, f"of {matching:,} matching")


def _rows_tab(tm: _Timer, page, expect: dict, reps: int) -> None:
    """The Rows tab: a filter change, a row selection (its detail pane), a text search."""
    page.get_by_role("tab", name="Rows").click()
    tm.settle(page, f"of {expect['all']:,} matching")
    verdict = page.locator('[data-testid="stSelectbox"]').filter(has_text="Verdict")
    for _ in range(reps):
        verdict.click()
        option = page.get_by_role("option", name="fail", exact=True)
        option.wait_for()
        t = time.perf_counter()  # from the choice to the table it gives (opening the list is not the change)
        option.click()
        tm.settle(page, f"of {expect['fail']:,} matching")
        tm.out["filter"].append(time.perf_counter() - t)
        _pick(tm, page, verdict, "all", expect["all"])  # back to every row, untimed
    _pick(tm, page, verdict, "fail", expect["fail"])
    box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    for k in range(reps):  # a different row each time: its selection box, then its detail pane
        before, shown = page.url, page.evaluate(HEADING)
        t = time.perf_counter()
        page.mouse.click(box["x"] + 20, box["y"] + 35 + 18 + 35 * k)
        page.wait_for_function(ROW_SHOWN, arg=[before, shown], polling="raf", timeout=60_000)
        if tm.locator_waits:  # the text and the finished run seen again through Playwright's waits
            tm.settle(page, "Judge's reasoning")
        tm.out["select"].append(time.perf_counter() - t)
    search = page.get_by_label("Search query and response")
    for key, word in (("search_first", "python"), ("search", "function")):
        t = time.perf_counter()
        search.fill(word)
        search.press("Enter")
        tm.settle(page, f"of {expect[word]:,} matching")
        tm.out[key] = time.perf_counter() - t


def _in_app(tm: _Timer, last, run_id: str, expect: dict, reps: int) -> None:
    """Within the app, as a reader moves: from the Runs page, tick the big run (the newest, the table's first row)
    and open its Results (timed from that click); from there, the sidebar's "Runs" back to the table. Streamlit
    swaps the page without reloading the browser's app, so these leave out its start-up."""
    for _ in range(reps):
        box = last.locator('[data-testid="stDataFrame"]').first.bounding_box()
        last.mouse.click(box["x"] + 20, box["y"] + 35 + 18)  # the first row's box (the grid is a canvas)
        link = last.locator('[data-testid="stPageLink"] a').filter(has_text="Open its results").first
        link.wait_for(timeout=60_000)
        tm.settle(last, "Open its results")
        t = time.perf_counter()
        link.click()
        last.wait_for_url(f"**/results?run={run_id}**", timeout=60_000)
        tm.settle(last, "Coherence pass rate", charts=expect["charts"])
        tm.out["results_in_app"].append(time.perf_counter() - t)
        t = time.perf_counter()
        last.locator('[data-testid="stSidebarNav"] a').filter(has_text="Runs").first.click()
        last.wait_for_url("**/runs**", timeout=60_000)
        last.wait_for_function("() => !document.querySelector('[data-testid=stVegaLiteChart]')", polling="raf")
        tm.settle(last, expect["runs_text"])
        tm.out["runs_in_app"].append(time.perf_counter() - t)


def measure(url: str, run_id: str, pid: int, expect: dict, reps: int = 3, locator_waits: bool = False,
            restart=None, profile: str | None = None) -> dict:
    """Each figure ``reps`` times (a list of seconds), but the cold first render (once). ``restart`` (for
    --fresh-first): a function that stops the server and starts a new one on the same port, returning its
    pid; first of all, the big run's Results page is then opened as a fresh server's very first request,
    once by a browser that has never seen the dashboard (it downloads Streamlit's frontend) and once, after
    ``restart``, by that same browser as a returning user's (its cache holds the frontend). ``profile``: the
    browser keeps a profile in that folder, as a person's browser does (its disk cache and V8's cache of compiled
    scripts, which Playwright's default incognito contexts do not keep), instead of an incognito context."""
    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, CHROMIUM

    tm = _Timer(url, locator_waits)
    with sync_playwright() as p:
        if profile:
            browser = ctx = p.chromium.launch_persistent_context(profile, executable_path=str(CHROMIUM), args=ARGS,
                                                                 viewport={"width": 1600, "height": 1400})
        else:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            ctx = browser.new_context(viewport={"width": 1600, "height": 1400})
        if restart:
            tm.out["first_open_fresh_browser"] = _first_request(tm, ctx, run_id, expect)
            pid = restart()  # the same port, so the browser's cache of the frontend still applies
            tm.out["first_open_fresh_server"] = _first_request(tm, ctx, run_id, expect)
        page = tm.new_tab(ctx, "/runs", expect["runs_text"])  # the app's first start (store, samples) is not a page's time
        _results_loads(tm, ctx, page, run_id, expect, reps)
        _rows_tab(tm, page, expect, reps)
        tm.out["rss_mb"] = rss_mb(pid)
        for _ in range(reps):  # what any page of this app takes to load here: a title, a message, a link
            tm.new_tab(ctx, "/pairwise", "No run with wildbench_pairwise yet", key="floor").close()
        for k in range(reps):
            last = tm.new_tab(ctx, "/runs", expect["runs_text"], key="runs_page")  # the first 25 runs, the pager under them
            if k < reps - 1:
                last.close()  # the last one stays open for the moves inside the app
        _in_app(tm, last, run_id, expect, reps)
        browser.close()
    return tm.out


def _first_request(tm: _Timer, ctx, run_id: str, expect: dict) -> float:
    """The big run's Results page as the server's very first request (module imports and all)."""
    first = ctx.new_page()
    t = time.perf_counter()
    tm.goto(first, f"/results?run={run_id}")
    # polled every 20 ms: the browser's first tab gave no animation frame to poll on here
    first.wait_for_function(SETTLED, arg=["Coherence pass rate", False, expect["charts"]], polling=20,
                            timeout=120_000)
    took = time.perf_counter() - t
    first.close()
    return took


def _store(args) -> tuple[Path, str]:
    """The bench's store: built at ``--keep`` (or a new temporary folder), reused when already there."""
    home = Path(args.keep or tempfile.mkdtemp(prefix="evaldash-dash-"))
    t = time.perf_counter()
    if (home / "evals.db").exists():
        print(f"reusing the store at {home}")
        return home, "bigrun000000"
    run_id = build_store(home, args.rows, args.runs)
    print(f"store: {args.rows:,} rows x 6 metrics + {args.runs - 1} small runs, built in "
          f"{time.perf_counter() - t:.1f} s ({(home / 'evals.db').stat().st_size / 2**20:.0f} MB) at {home}")
    return home, run_id


def _expected(home: Path, run_id: str) -> dict:
    """What each view must show (row counts), from the engine; prints the first open's build times."""
    from evaluators import Store
    from evaluators.read.view import open_view

    store = Store(f"sqlite:///{home / 'evals.db'}")
    t = time.perf_counter()
    for old in (home / "views").glob("*"):
        old.unlink()  # measure the first build
    res = open_view(store, run_id)
    build = time.perf_counter() - t
    t = time.perf_counter()
    res._cols.search.ensure()
    search_build = time.perf_counter() - t
    from evaluators.read.cost import kept_run_cost

    kept_run_cost(store, run_id)  # the rest of what the run's worker prepares as it ends (prepare_view)
    expect = {"all": len(res), "fail": res.query(verdict="fail", limit=0)[0],
              "python": res.query(verdict="fail", search="python", limit=0)[0],
              "function": res.query(verdict="fail", search="function", limit=0)[0],
              # the Metrics tab: the overview and the grid of distributions, each drawn
              "charts": 2, "ref_charts": 2,
              # the Runs page's count of runs (its pager shows only past 50 runs)
              "runs_text": f"{len(store.run_rows()):,} runs"}
    t = time.perf_counter()
    for s in res.specs:
        res.summary(s)
    print(f"first open of the run (columns built and written to views/): {build:.2f} s; summaries of 6 metrics "
          f"{time.perf_counter() - t:.2f} s; search text of the dataset built and written: {search_build:.2f} s")
    return expect


def serve(app: Path, home: Path, port: int | None = None, database_url: str | None = None) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` from ``app`` (this checkout, or another through export_scale's --app) on a free
    loopback port over the bench's store; (process, URL) once it answers."""
    from tests.browser import free_port

    port = port or free_port()
    env = {**os.environ, "EVAL_HOME": str(home), "PYTHONPATH": str(app)}
    env.pop("EVAL_DATABASE_URL", None)
    if database_url:  # a store elsewhere (bench/dashboard_scale_pg.py: PostgreSQL)
        env["EVAL_DATABASE_URL"] = database_url
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


def _serve(home: Path, port: int | None = None):
    return serve(ROOT, home, port)


def _report(got: dict, runs: int) -> None:
    rows = [("Results page as a fresh server's first request, returning browser (--fresh-first, --settle)",
             "first_open_fresh_server", "first_render", "s"),
            ("the same from a browser that never saw the dashboard (downloads the frontend)",
             "first_open_fresh_browser", None, "s"),
            ("Results page of a 5-row run (reference: this machine)", "reference_render", None, "s"),
            ("Results page first render, cold (server's first open)", "first_render_cold", "first_render", "s"),
            ("Results page first render, warm (new page)", "first_render", "first_render", "s"),
            ("filter change (verdict = fail)", "filter", "filter", "s"),
            ("row selection (detail pane shown)", "select", "select", "s"),
            ("text search, first", "search_first", None, "s"),
            ("text search, next", "search", None, "s"),
            ("streamlit server RSS", "rss_mb", "rss_mb", "MB"),
            ("a page with a title, a message and a link (reference: any page)", "floor", None, "s"),
            (f"Runs page with {runs} runs", "runs_page", "runs_page", "s"),
            ("Results page from a click in the Runs list (in the app)", "results_in_app", "first_render", "s"),
            (f"Runs page from the sidebar (in the app, {runs} runs)", "runs_in_app", "runs_page", "s")]
    print(f"\n{'figure (repeated ones: the median, then each sample)':58s} {'measured':>10s} {'target':>9s}  verdict")
    for label, key, target, unit in rows:
        if key not in got:
            continue
        v = got[key]
        samples = ""
        if isinstance(v, list):  # repeated: the median is the figure, every sample is printed beside it
            samples = "(" + ", ".join(f"{x:.2f}" for x in v) + ")"
            v = statistics.median(v)
        tv = TARGETS.get(target) if target else None
        verdict = "" if tv is None else ("PASS" if v <= tv else "FAIL")
        fmt = f"{v:.0f} {unit}" if unit == "MB" else f"{v:.2f} {unit}"
        tfmt = "" if tv is None else (f"< {tv} {unit}" if unit == "MB" else f"<= {tv} {unit}")
        print(f"{label:58s} {fmt:>10s} {tfmt:>9s}  {verdict:4s}  {samples}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=1000, help="runs in the store (at least 2)")
    ap.add_argument("--reps", type=int, default=3, help="times each figure is measured (the median is reported)")
    ap.add_argument("--keep", help="build the store here (and keep it); an existing store there is reused")
    ap.add_argument("--locator-waits", action="store_true",
                    help="wait as this bench did before 2026-11-23 (Playwright's locator waits, which poll at "
                         "growing intervals up to 500 ms), to compare; figures are then late by up to 0.5 s")
    ap.add_argument("--fresh-first", action="store_true",
                    help="first of all, open the big run's Results page as a fresh server's very first request, "
                         "from a new browser, then (the server restarted on the same port) from that browser "
                         "again, as a returning user's; the cold figure is then the run's second open")
    ap.add_argument("--profile", action="store_true",
                    help="the browser keeps a profile (a new temporary folder), as a person's browser does, instead "
                         "of Playwright's incognito context: its disk cache and cache of compiled scripts")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="with --fresh-first: seconds between the server answering and its first request (the "
                         "pages' modules it imports as it starts take about 1 s here); 0 = at once")
    args = ap.parse_args()
    if not WILDBENCH.is_dir():
        print(f"SKIPPED: WildBench answers not found at {WILDBENCH} (../shared is absent); nothing measured.")
        return
    home, run_id = _store(args)
    expect = _expected(home, run_id)
    procs = [_serve(home)[0]]
    time.sleep(args.settle if args.fresh_first else 0)
    url = f"http://127.0.0.1:{procs[0].args[procs[0].args.index('--server.port') + 1]}"

    def restart() -> int:  # a fresh server on the same port (the browser's cache is per origin)
        procs[-1].terminate()
        procs[-1].wait(10)
        procs.append(_serve(home, int(url.rsplit(":", 1)[1]))[0])
        time.sleep(args.settle)  # the visitor arrives this long after the server answers (its start-up imports)
        return procs[-1].pid

    try:
        got = measure(url, run_id, procs[0].pid, expect, args.reps, args.locator_waits,
                      restart if args.fresh_first else None,
                      tempfile.mkdtemp(prefix="evaldash-profile-") if args.profile else None)
    finally:
        procs[-1].terminate()
        procs[-1].wait(10)
    _report(got, args.runs)

if __name__ == "__main__":
    main()
