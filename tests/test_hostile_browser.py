"""Text people type is text, everywhere (issue 37): every field a person or a file can fill holds Markdown and
HTML that would load an image from an "outside" server (a loopback one on another port, which records what
reaches it, and a host on the internet); every page of the dashboard, and the tabs and tooltips that show these
strings, are opened in Debian's headless Chromium; not one request leaves for anything but the dashboard."""
from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from evaluators import load_dataset
from evaluators.read.view import open_view
from evaluators.review import make_queue
from evaluators.store.schema import Result
from tests.browser import Dashboard, Recorder, needs_chromium, settle, watched_page
from tests.conftest import ROOT, app_pages, default_store
from ui.widgets import JOINER

pytestmark = needs_chromium
N = 6
# the tabs showing these strings, after the one opened: each with a text it shows once drawn
TABS = {"results": [("Errors", "errored cell")], "review": [("Agreement", "reviewed rows,"), ("Queues", "Queue name")]}
# tables drawn by a component loaded after the script ran (a placeholder until then): a text each shows once drawn
TABLES = {"datasets": "Field", "Agreement": "reviewer"}


# the links and images on the page that point outside: where each is, to name the place that rendered it
LINKS = """o => [...document.querySelectorAll('a[href], img[src], iframe[src]')]
    .map(e => (e.getAttribute('href') || e.getAttribute('src')) + ' @ ' + e.tagName + ' in '
              + (e.closest('[data-testid=stTooltipContent], .stElementContainer') || e).getAttribute('data-testid'))
    .filter(u => u.includes(o) || u.includes('outside.example'))"""


def drawn(page, text: str | None = None) -> None:
    """The script run over and every element drawn (a table or a grid is a placeholder for a moment after)."""
    settle(page, text)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeletonElement\"]')", timeout=30_000)


def hostile(outside: str, tag: str) -> str:
    """A string that loads ``outside``/``tag``-... if any of it is rendered as Markdown or HTML (an image, an
    HTML image, a link, a bare URL), and an image on the internet."""
    return (f"![i]({outside}/{tag}-md) <img src=\"{outside}/{tag}-html\"> [l]({outside}/{tag}-link) "
            f"{outside}/{tag}-auto ![x](http://outside.example/{tag}.png)")


def metric_file(description: str) -> str:
    text = (ROOT / "examples" / "metrics" / "politeness.md").read_text()
    old = "description: How polite the answer is, 1 (rude) to 5 (courteous)."
    assert old in text
    return text.replace("name: politeness", "name: hostile_tone").replace(old, "description: " + json.dumps(description))


def fill(store, outside: str) -> dict:
    """A store whose every typed or read string is hostile: a dataset's name, column name and cells, two runs'
    names, judge reasons and an error, a saved metric's description, a review queue's name and reviewers, and
    verdicts' reviewer names and notes."""
    column = hostile(outside, "column")
    recs = [{column: f"question {i} {hostile(outside, 'query')}", "response": f"answer {i} {hostile(outside, 'cell')}",
             "context": hostile(outside, "context")} for i in range(N)]
    ds = load_dataset(recs, {"query": column}, name=hostile(outside, "dataset"))
    did = store.save_dataset(ds)
    spec = {"metrics": ["coherence"], "thresholds": {"coherence": 3}}
    runs = []
    for k in range(2):
        rid = store.create_run(did, spec, f"h{k}", f"run {k} {hostile(outside, 'run')}")
        scores = [float(1 + (i + k) % 5) for i in range(N - 1)]
        store.write_results(rid, [Result(i, "coherence", 0, "ok", v, {"coherence": v}, raw="{}",
                                         reason=f"because {hostile(outside, 'reason')}") for i, v in enumerate(scores)]
                            + [Result(N - 1, "coherence", 0, "error", error=f"judge said {hostile(outside, 'error')}")])
        store.update_run(rid, status="completed", tasks_total=N, tasks_done=N - 1, tasks_errored=1)
        runs.append(rid)
    rid = runs[1]  # the newest: what a page opened without a run shows
    names = [f"ann ![a]({outside}/who-md)", f"bob <img src=\"{outside}/who-html\">"]
    make_queue(store, rid, open_view(store, rid), hostile(outside, "queue")[:180], "random", ["coherence"], 4,
               reviewers=names, overlap=True)
    for i in range(3):
        store.save_review(rid, i, "coherence", names[i % 2], 4.0, note=f"note {hostile(outside, 'note')}")
    store.save_metric(metric_file(f"Tone {hostile(outside, 'description')}"), "template")
    return {"dataset": did, "runs": runs}


@pytest.mark.chromium
def test_hostile_strings_load_nothing_on_any_page(browser, recorder, tmp_path):
    outside = Recorder()  # the "outside" server: loopback, another port; records each request's first line
    home = tmp_path / "evalhome"
    store = default_store(home)
    ids = fill(store, outside.url)
    store.engine.dispose()
    dash = Dashboard(home, tmp_path / "server-logs", recorder)
    params = {"datasets": f"?dataset={ids['dataset']}", "new": f"?dataset={ids['dataset']}",
              "results": f"?run={ids['runs'][1]}&view=Rows&row=1", "review": f"?run={ids['runs'][1]}&view=Review",
              "compare": f"?base={ids['runs'][0]}&runs={ids['runs'][1]}&row=1"}
    requests: list[str] = []
    try:
        page = watched_page(browser, requests)  # every request the page makes, and every navigation
        shown, outside_links = "", []
        for _file, path in app_pages():
            page.goto(dash.url + "/" + path + params.get(path, ""))
            drawn(page)
            main = page.locator('[data-testid="stMain"]')
            if path in TABLES:
                main.locator('[data-testid="stTable"]', has_text=TABLES[path]).wait_for()
            if path == "new":  # a metric's description is its tooltip: hovered, so that it renders
                box = main.locator('[data-testid="stCheckbox"]', has_text="hostile_tone")
                box.locator('[data-testid="stTooltipHoverTarget"]').hover()
                tip = page.get_by_test_id("stTooltipContent").filter(has_text="Tone")
                tip.wait_for()
                shown += tip.inner_text()
            if path == "review":  # a name not in the queue's: the page names the queue's reviewers
                main.get_by_label("Your name", exact=True).fill("zed")
                main.get_by_role("button", name="Start reviewing").click()
                drawn(page, "This queue is given to")
            for tab, text in TABS.get(path, ()):  # a tab is drawn only once open
                shown += main.inner_text()
                main.get_by_role("tab", name=tab).click()
                drawn(page, text)
                if tab in TABLES:
                    main.locator('[data-testid="stTable"]', has_text=TABLES[tab]).wait_for()
            assert "Something went wrong" not in main.inner_text(), path
            shown += main.inner_text()
            outside_links += page.evaluate(LINKS, urlsplit(outside.url).netloc)  # a link is a request on a click
        # every string was on screen, as written (but the errors: the Errors tab's grid draws them on a canvas)
        for tag in ("dataset", "column", "query", "cell", "context", "run", "reason", "description", "queue", "note",
                    "who"):
            assert f"{outside.url}/{tag}-" in shown.replace(JOINER, ""), tag  # (the joiner is invisible)
    finally:
        dash.stop()
        outside.close()
    netloc = urlsplit(dash.url).netloc
    leaked = sorted({u for u in requests if urlsplit(u).netloc != netloc and not u.startswith(("data:", "blob:", "about:"))})
    assert leaked == [], " ".join(leaked)
    assert outside.seen == [] and recorder.seen == []  # nothing reached the outside server, nor left the server
    assert outside_links == [], outside_links
