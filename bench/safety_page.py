"""The Risk and safety page in a fresh tab, in Debian's headless Chromium (issue 35: "the page within 2 s in a
fresh tab", 3.7 s before).

    python bench/safety_page.py [--rows 1000] [--reps 5] [--app DIR]

Judges ``--rows`` real WildBench answers (``../shared/fixtures/wildbench``, ~2,000 characters each) for the four
harms, protected material and indirect attacks through the real runner, against a loopback judge that answers
each harm with a severity drawn from a seeded distribution (mostly Very low, a tail up to High) and a WildBench
judge's written weaknesses of another answer as its reason. Then serves ``--app`` (this checkout by default; give
another checkout, e.g. a ``git worktree`` of an older commit, to measure before and after on the same store and
the same machine) and opens, ``--reps`` times each, a new tab of:

- the Risk and safety page of that run, until its cards, its two charts (drawn) and its rows table are shown;
- the app's lightest page (the Pairwise inspector with nothing to show), what any page costs here.

Prints each figure's median and samples, and the page's ratio to the lightest page: a loaded 2-core machine
moves the seconds, the ratio less. Exits with SKIPPED when ../shared is absent.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dashboard_scale import WILDBENCH, _Timer, answers, rss_mb, serve  # noqa: E402

HARMS = ["violence", "sexual", "self_harm", "hate_unfairness"]
METRICS = [*HARMS, "protected_material", "indirect_attack"]
SEVERITY = [0] * 70 + [1] * 12 + [2] * 6 + [3] * 4 + [4] * 3 + [5] * 2 + [6] * 2 + [7]  # a seeded, skewed draw


def responder(reasons: list[str]):
    """A judge for the six metrics: each reply's verdict drawn from the hash of what it judges (the same
    answer always gets the same verdict), its reason a real judge's weaknesses of another answer."""
    from tests.safety_judge import HARM_WORDS, judged_reply

    def answer(prompt: str, request: dict) -> str:
        reply = judged_reply(prompt)
        h = int(hashlib.sha256((reply + prompt[:200]).encode()).hexdigest(), 16)
        reason = reasons[h % len(reasons)][:600]
        if "PROTECTED MATERIAL" in prompt:
            return json.dumps({"reason": reason, "label": h % 17 == 0})
        if "INDIRECT ATTACK" in prompt:
            hit = h % 13 == 0
            return json.dumps({"reason": reason, "label": hit, "manipulated_content": hit and h % 2 == 0,
                               "intrusion": hit and h % 3 == 0, "information_gathering": hit and h % 5 == 0})
        harm = next((x for word, x in HARM_WORDS.items() if f"Harm to rate: {word}" in prompt), "violence")
        return json.dumps({"reason": reason, "score": SEVERITY[(h // 7) % len(SEVERITY)], "harm": harm})
    return answer


def build(home: Path, rows: int) -> str:
    from evaluators import evaluate
    from evaluators.store.store import Store
    from tests.judge_server import JudgeServer

    pool = answers()
    rng = random.Random(35)
    picked = [pool[rng.randrange(len(pool))] for _ in range(rows)]
    data = [{"id": f"wb{i}", "query": picked[(i + 1) % rows]["text"][:300], "context": picked[(i + 2) % rows]["text"][:800],
             "response": a["text"]} for i, a in enumerate(picked)]
    store = Store(f"sqlite:///{home / 'evals.db'}")
    with JudgeServer(responder=responder([a["weaknesses"] for a in pool])) as s:
        judge = {"model": "loopback", "provider": "compatible", "base_url": s.url, "max_retries": 0}
        return evaluate(data, METRICS, judge=judge, store=store, concurrency=32).run_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--app", type=Path, default=ROOT, help="the checkout whose dashboard is served")
    ap.add_argument("--charts", type=int, default=2,
                    help="Vega-Lite charts to wait for (0 for a checkout from before issue 35, whose charts were Plotly)")
    ap.add_argument("--keep", type=Path, help="build the store here (and keep it); an existing one is reused")
    a = ap.parse_args()
    if not WILDBENCH.exists():
        print("SKIPPED: ../shared/fixtures/wildbench is absent")
        return
    home = a.keep or Path(tempfile.mkdtemp(prefix="safety-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    marker = home / "run_id"
    if not marker.exists():
        t = time.perf_counter()
        marker.write_text(build(home, a.rows))
        print(f"judged {a.rows} rows x {len(METRICS)} metrics in {time.perf_counter() - t:.1f} s")
    run_id = marker.read_text().strip()

    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, CHROMIUM

    proc, url = serve(a.app.resolve(), home)
    try:
        tm = _Timer(url, False)
        tm.out = {"safety": [], "floor": []}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            ctx = browser.new_context(viewport={"width": 1600, "height": 1400})
            tm.new_tab(ctx, f"/safety?run={run_id}", "Defect rates", charts=0).close()  # the server's first open
            for _ in range(a.reps):
                tm.new_tab(ctx, f"/safety?run={run_id}", "Violence defect rate", charts=a.charts, key="safety").close()
                tm.new_tab(ctx, "/pairwise", "No run with wildbench_pairwise yet", key="floor").close()
            browser.close()
        rss = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    # (the page before issue 35 drew Plotly charts, which ``charts`` does not count: its wait is the text and the
    # finished script run, after which Plotly still draws; so an old checkout's figure is a lower bound)
    med = {k: statistics.median(v) for k, v in tm.out.items()}
    print(f"app: {a.app.resolve()}  rows: {a.rows}  server RSS: {rss:.0f} MB")
    for k, label in (("safety", "Risk and safety, new tab"), ("floor", "lightest page, new tab")):
        print(f"{label:28s} {med[k]:.2f} s  (" + ", ".join(f"{x:.2f}" for x in tm.out[k]) + ")")
    print(f"ratio Risk and safety / lightest page: {med['safety'] / med['floor']:.2f}")


if __name__ == "__main__":
    main()
