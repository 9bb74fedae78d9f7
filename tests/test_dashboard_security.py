"""Keys and hostile content in the dashboard: AppTest on a real store and loopback judge, and headless
Chromium against a real `streamlit run` (browser tests at the end of the file). Sign-in: test_sign_in.py.

What a user or an operator would be hurt by if it broke:
- a worker started from the dashboard holds only the key its judge may use (not the server's environment);
- the operator's named judges are picked by name, their URL and key never shown;
- a key typed in the browser reaches the judge and nothing else: no file, export, log, URL or command line;
- HTML, Markdown and script in a dataset or a judge's reply stay inert text, and no request leaves the machine.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators import JudgeConfig, Store, evaluate
from evaluators.data.loading import load_dataset
from evaluators.run.workers import KEY_ENV, worker_env
from tests.apptest import configured_app as app, shown_text
from tests.browser import LOCAL_HOSTS, Dashboard, hosts, needs_chromium, settle, watched_page
from tests.conftest import DETACHED_WORKER, TYPED_KEY_REASON, default_store, wait_for_run
from tests.judge_server import JudgeServer, expected_score, prompt_text
from tests.procs import cmdline, environ, needs_proc, wait_for_worker, wait_until

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

SERVER_KEY = "sk-server-own-3c1d9a77-must-stay-home"
AZURE_KEY = "azure-server-own-55e0c2"
TYPED_KEY = "sk-typed-in-browser-8b2f41e6d0"
TEAM_KEY = "sk-team-judge-7d3e9f"


# ---------------------------------------------------------------- the worker's environment

def test_worker_env_holds_only_the_key_its_judge_may_use(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    url = "sqlite:///x.db"
    base = {"PATH", "HOME", "PYTHONPATH", "EVAL_DATABASE_URL", "EVAL_HOME"}

    def keys(judge, typed=None):
        return set(worker_env(judge, typed, url)) - base - {"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
                                                             "SSL_CERT_FILE", "SSL_CERT_DIR"}

    compatible = JudgeConfig(provider="compatible", base_url="http://127.0.0.1:9/v1")
    assert keys(compatible) == set()  # a user's URL gets no server key
    assert keys(compatible, TYPED_KEY) == {KEY_ENV}
    assert keys(JudgeConfig(provider="openai")) == {"OPENAI_API_KEY"}
    assert keys(JudgeConfig(provider="openai"), TYPED_KEY) == {KEY_ENV}  # typed wins; the server's stays home
    assert keys(JudgeConfig(provider="azure")) == {"AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT"}
    # a typed URL or another Azure resource: the server's keys belong elsewhere, so the worker holds none
    assert keys(JudgeConfig(provider="openai", base_url="http://127.0.0.1:9/v1")) == set()
    assert keys(JudgeConfig(provider="openai", base_url="https://api.openai.com/v1/")) == {"OPENAI_API_KEY"}
    assert keys(JudgeConfig(provider="azure", azure_endpoint="https://other.openai.azure.com")) == set()
    assert keys(JudgeConfig(provider="azure", azure_endpoint="https://res.openai.azure.com/")) == {
        "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT"}
    assert keys(JudgeConfig(provider="azure", base_url="http://127.0.0.1:9/openai")) == set()
    assert keys(None) == set()
    env = worker_env(JudgeConfig(provider="openai"), None, url)
    assert env["OPENAI_API_KEY"] == SERVER_KEY and env["EVAL_DATABASE_URL"] == url and "aws-secret" not in env.values()


def _judges_file(home: Path, server: JudgeServer) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "judges.toml").write_text(f'[team]\nprovider = "compatible"\nmodel = "team-model"\n'
                                      f'base_url = "{server.url}"\nkey_env = "TEAM_JUDGE_KEY"\n')


def _start(at, metrics: list[str]):
    for m in metrics:
        at.checkbox(key=f"new.metric.{m}").check()
    at.run()
    return at


@needs_proc
@pytest.mark.sqlite_only(DETACHED_WORKER)
def test_dashboard_worker_never_sees_the_servers_key(home_store, judge_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    judge_server.latency = 0.05
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = _start(app("pages/new.py", dataset=did), ["coherence"])
    at.text_input(key="judge.base_url").input(judge_server.url)  # a user's own URL
    at.text_input(key="judge.model").input("loopback")
    at.number_input(key="judge.concurrency").set_value(1)
    at.run()
    at.button(key="new.start").click().run()
    rid = home_store.list_runs()[0]["id"]
    env = environ(wait_for_worker(rid))
    assert "OPENAI_API_KEY" not in env and "AZURE_OPENAI_API_KEY" not in env and KEY_ENV not in env
    assert not any(SERVER_KEY in v or AZURE_KEY in v for v in env.values())
    assert wait_for_run(home_store, rid)["status"] == "completed"
    assert len(judge_server.calls) == 31
    assert not any(SERVER_KEY in (c["_auth"] or "") for c in judge_server.calls)  # the user's server saw no key


@needs_proc
@pytest.mark.sqlite_only(DETACHED_WORKER)
def test_named_judge_is_picked_by_name_with_its_own_key_only(home_store, judge_server, monkeypatch, tmp_path):
    _judges_file(tmp_path / "evalhome", judge_server)
    monkeypatch.setenv("TEAM_JUDGE_KEY", TEAM_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    judge_server.latency = 0.05
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = _start(app("pages/new.py", dataset=did), ["coherence"])
    picker = at.selectbox(key="judge.provider")
    assert picker.options[0] == "Server judge: team" and "OpenAI-compatible base URL" in picker.options
    assert picker.value == "Server judge: team"
    keys = {w.key for w in at.text_input}
    assert not keys & {"judge.base_url", "judge_api_key", "judge.model", "judge.endpoint"}  # nothing to see or edit
    assert judge_server.url not in shown_text(at) and str(judge_server._server.server_address[1]) not in shown_text(at)
    at.number_input(key="judge.concurrency").set_value(1)
    at.run()
    at.button(key="new.start").click().run()
    rid = home_store.list_runs()[0]["id"]
    env = environ(wait_for_worker(rid))
    assert env.get("TEAM_JUDGE_KEY") == TEAM_KEY and "OPENAI_API_KEY" not in env and KEY_ENV not in env
    run = wait_for_run(home_store, rid)
    assert run["status"] == "completed" and run["spec"]["judge"]["judge_name"] == "team"
    assert {c["_auth"] for c in judge_server.calls} == {f"Bearer {TEAM_KEY}"}
    assert {c["model"] for c in judge_server.calls} == {"team-model"}
    # the free-form options are still there beside it
    at = _start(app("pages/new.py", dataset=did), ["coherence"])
    at.selectbox(key="judge.provider").set_value("OpenAI-compatible base URL").run()
    assert "judge.base_url" in {w.key for w in at.text_input} and "judge_api_key" in {w.key for w in at.text_input}


# ---------------------------------------------------------------- hostile content, in AppTest

PAYLOADS = [
    '<img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=2</script>",
    "[click me](http://evil.example/link)",
    "[js](javascript:window.__pwned=3)",
    "![img](http://evil.example/pixel.png)",
    "<a href='http://evil.example/html'>html link</a>",
    "see http://evil.example/autolink and www.evil.example",
    ":red[red] :material/warning: $x^2$",
]
HOSTILE = " | ".join(PAYLOADS)


def hostile_responder(prompt: str, request: dict) -> str:
    """A judge whose reasoning is hostile; still a valid verdict with the usual score."""
    return json.dumps({"reason": f"reasoning {HOSTILE}", "score": expected_score(prompt)})


def _hostile_files(tmp_path: Path) -> tuple[Path, Path]:
    single = tmp_path / "single [click me](evil.example).jsonl"
    rows = [{"query": f"q{i} {HOSTILE}", "response": f"r{i} {HOSTILE}", "context": f"c{i} {HOSTILE}",
             "ground_truth": f"g{i} {HOSTILE}", f"extra {PAYLOADS[0]}": HOSTILE} for i in range(4)]
    single.write_text("".join(json.dumps(r) + "\n" for r in rows))
    conv = tmp_path / "conversation.jsonl"
    msgs = [{"role": "user", "content": f"hello {HOSTILE}"},
            {"role": "assistant", "content": f"answer {HOSTILE}",
             "context": {"citations": [{"id": HOSTILE, "title": HOSTILE, "content": f"doc {HOSTILE}"}]}},
            {"role": "tool", "content": HOSTILE}]
    conv.write_text(json.dumps({"messages": msgs}) + "\n")
    return single, conv


def _hostile_runs(store: Store, tmp_path: Path, server: JudgeServer) -> dict:
    """Runs whose data, names, judge replies and errors all carry the payloads."""
    single, conv = _hostile_files(tmp_path)
    judge = JudgeConfig(model=f"model {PAYLOADS[2]}", provider="compatible", base_url=server.url, max_retries=0)
    ds = load_dataset(single)
    first = load_dataset(single).records[0]["query"]
    from tests.judge_server import Action

    server.on_prompt(first[:40], Action(content=f"not a verdict {HOSTILE}"))  # an unusable reply: an error row
    a = evaluate(single, ["coherence", "f1_score"], judge=judge, store=store).run_id
    store.update_run(a, name=f"run A {PAYLOADS[0]} {PAYLOADS[2]}")
    b = evaluate(single, ["coherence", "f1_score"], judge=judge.with_(temperature=0.5), store=store).run_id
    store.update_run(b, name=f"run B {PAYLOADS[4]}")
    c = evaluate(conv, ["coherence"], judge=judge, store=store).run_id
    d = evaluate(single, ["f1_score"], store=store).run_id
    store.update_run(d, name=f"run D {PAYLOADS[5]}", status="failed", error=f"judge said {HOSTILE}")
    return {"single": a, "other": b, "failed": d, "conversation": c, "dataset": store.get_run(a)["dataset_id"],
            "conv_dataset": store.get_run(c)["dataset_id"], "name": ds.name}


def _outside_code_spans(markdown: str) -> str:
    """What Markdown would interpret: the text minus its inline code spans (which show as written)."""
    import re

    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", " ", markdown, flags=re.S)


def _no_payload_in_markdown(at) -> None:
    """Elements that render Markdown never carry a payload where Markdown would interpret it."""
    for kind in ("markdown", "caption", "error", "warning", "info", "success"):
        for e in getattr(at, kind):
            for p in PAYLOADS:
                assert p not in _outside_code_spans(str(e.value)), (kind, e.value)
    for e in list(at.expander) + list(at.metric):
        for p in PAYLOADS:
            assert p not in _outside_code_spans(str(e.label)), e.label
    for e in at.get("page_link"):  # links' labels (the Runs list's run names) render Markdown too
        for p in PAYLOADS:
            assert p not in _outside_code_spans(str(e.proto.label)), e.proto.label
    for e in at.get("popover"):  # the run picker's button names the run: Markdown as well
        for p in PAYLOADS:
            assert p not in _outside_code_spans(str(e.proto.popover.label)), e.proto.popover.label


def test_hostile_content_never_reaches_markdown_in_any_view(home_store, tmp_path):
    with JudgeServer(responder=hostile_responder) as server:
        app()
        ids = _hostile_runs(home_store, tmp_path, server)
    from ui import loaders
    loaders.forget_lists()  # the run list the first app() cached was empty
    views = [("pages/runs.py", {}),
             ("pages/runs.py", {"q": PAYLOADS[2]}),  # a filter in the URL names itself on its button
             ("pages/results.py", {"run": ids["single"], "row": "1", "view": "Rows"}),
             ("pages/results.py", {"run": ids["single"], "view": "Errors"}),
             ("pages/results.py", {"run": ids["failed"]}),
             ("pages/results.py", {"run": ids["conversation"], "row": "1", "view": "Rows"}),
             ("pages/compare.py", {"base": ids["single"], "runs": ids["other"], "row": "1"}),
             ("pages/datasets.py", {"dataset": ids["dataset"]}),
             ("pages/datasets.py", {"dataset": ids["conv_dataset"]}),
             ("pages/new.py", {"dataset": ids["dataset"]})]
    for page, params in views:
        at = app(page, **params)
        _no_payload_in_markdown(at)
    at = app("pages/results.py", run=ids["single"], row="2", view="Rows")
    assert any(HOSTILE in t.value for t in at.text)  # the data is there, as text
    at = app("pages/results.py", run=ids["conversation"], row="1", view="Rows")
    assert sum(HOSTILE in t.value for t in at.text) >= 3


# ---------------------------------------------------------------- in the browser

@needs_chromium
@needs_proc
@pytest.mark.sqlite_only(TYPED_KEY_REASON)
def test_typed_key_goes_to_its_judge_only_and_a_run_survives_a_dashboard_restart(browser, recorder, judge_server,
                                                                               tmp_path):
    home, logs = tmp_path / "evalhome", tmp_path / "server-logs"
    # 31 calls one at a time: ~22 s, time to restart the dashboard under it (a cold first page takes seconds)
    judge_server.latency = 0.7
    requests: list[str] = []
    dash = Dashboard(home, logs, recorder, OPENAI_API_KEY=SERVER_KEY)
    try:
        page = watched_page(browser, requests)
        page.goto(dash.url)
        settle(page, "Runs")
        store = default_store(home)
        did = next(d["id"] for d in store.list_datasets() if d["shape"] == "single")
        page.goto(f"{dash.url}/new?dataset={did}")
        settle(page, "Pick at least one metric")
        page.locator('[data-testid="stCheckbox"]').filter(has_text="coherence").first.locator("label").click()
        settle(page, "Base URL")
        for label, value in (("Base URL", judge_server.url), ("Model (Azure: deployment)", "loopback"),
                             ("Concurrency", "1")):
            page.get_by_label(label).fill(value)
            page.get_by_label(label).press("Enter")
            settle(page)
        page.get_by_role("textbox", name="API key").fill(TYPED_KEY)
        page.get_by_role("textbox", name="API key").press("Enter")
        settle(page, "Judge calls")
        page.get_by_role("button", name="Start evaluation").click()
        page.wait_for_url("**/results?run=*", timeout=30_000)
        rid = page.url.split("run=")[1].split("&")[0]
        assert store.get_run(rid)["spec"]["judge"]["concurrency"] == 1, store.get_run(rid)["spec"]["judge"]
        pid = wait_for_worker(rid)
        assert not any(TYPED_KEY.encode() in part for part in cmdline(pid))  # not on the command line...
        env = environ(pid)
        assert env[KEY_ENV] == TYPED_KEY and "OPENAI_API_KEY" not in env  # ...only in the worker's environment
        wait_until(lambda: store.get_run(rid)["tasks_done"] >= 3, what="the first results")

        dash.kill()  # the dashboard dies mid-run; its worker is its own session and carries on
        done = store.get_run(rid)["tasks_done"]
        wait_until(lambda: store.get_run(rid)["tasks_done"] > done + 1, timeout=20, what="progress without a dashboard")
        assert pid in [p for p in __import__("tests.procs", fromlist=["worker_pids"]).worker_pids(rid)]
        dash = Dashboard(home, logs, recorder, OPENAI_API_KEY=SERVER_KEY)
        page.goto(f"{dash.url}/results?run={rid}")
        page.get_by_text("/31 scored", exact=False).first.wait_for(timeout=30_000)  # the live progress bar
        assert store.get_run(rid)["tasks_done"] < 31  # ...of a run still going
        page.wait_for_function("() => { const t = document.querySelector('[data-testid=\"stMain\"]').innerText;"
                               " return t.includes('31 scored · 0 errored · 0 skipped') && !t.includes('Cancel run'); }",
                               timeout=60_000)
        settle(page, "Coherence pass rate")
        assert store.get_run(rid)["status"] == "completed"

        page.get_by_role("tab", name="Share & export").click()
        settle(page, "Rows as CSV")
        page.get_by_role("tab", name="Rows").click()
        settle(page)
    finally:
        dash.stop()
    from evaluators.read.results import open_results
    from evaluators.read.exports import csv_text, jsonl_text
    from evaluators.read.report import html_report

    res = open_results(store, rid)  # what the page's export buttons serve
    exported = [csv_text(res.rows()), jsonl_text(res.rows()), html_report(res, store.get_run(rid))]
    store.engine.dispose()
    assert {c["_auth"] for c in judge_server.calls} == {f"Bearer {TYPED_KEY}"}  # where it belongs, every call
    for key in (TYPED_KEY, SERVER_KEY):
        for f in [p for p in home.rglob("*") if p.is_file()] + [p for p in logs.rglob("*") if p.is_file()]:
            assert key.encode() not in f.read_bytes(), f  # database, WAL, worker logs, pid files, streamlit output
        for text in exported:
            assert key not in text
        assert not any(key in u for u in requests)  # no URL the browser opened or fetched
    assert any((home / "logs").glob("run-*.log")) and dash.err.exists()
    assert hosts(requests) <= LOCAL_HOSTS, hosts(requests)
    assert recorder.seen == []  # and the server itself reached for nothing outside


@needs_chromium
def test_hostile_content_is_inert_in_every_view_and_nothing_leaves_the_machine(browser, recorder, tmp_path):
    home = tmp_path / "evalhome"
    store = default_store(home)
    with JudgeServer(responder=hostile_responder) as server:
        ids = _hostile_runs(store, tmp_path, server)
    store.engine.dispose()
    requests: list[str] = []
    dash = Dashboard(home, tmp_path / "server-logs", recorder)
    # a Results page renders all its tabs (Metrics, Rows with the detail pane, Errors, Share) in one run
    views = ["/runs", f"/results?run={ids['single']}&view=Rows&row=1", f"/results?run={ids['failed']}",
             f"/results?run={ids['conversation']}&view=Rows&row=1",
             f"/compare?base={ids['single']}&runs={ids['other']}&row=2",
             f"/datasets?dataset={ids['dataset']}", f"/datasets?dataset={ids['conv_dataset']}",
             f"/new?dataset={ids['dataset']}"]
    try:
        page = watched_page(browser, requests)
        page.add_init_script("window.__pwned = undefined;")
        shown = ""
        for view in views:
            page.goto(dash.url + view)
            settle(page)
            page.wait_for_timeout(200)  # late renders (charts, chat bubbles) too
            assert "Something went wrong" not in page.locator('[data-testid="stMain"]').inner_text(), view
            assert page.evaluate("() => window.__pwned") is None, view
            bad = page.evaluate("""() => [...document.querySelectorAll('a[href], img[src], iframe, script[src]')]
                .map(e => (e.getAttribute('href') || e.getAttribute('src')) + ' @ ' + (e.closest('[data-testid]') || e).getAttribute('data-testid') + ' ' + (e.closest('[data-testid]') || e).outerHTML.slice(0, 300))
                .filter(u => /evil\\.example|^javascript:|^x @/i.test(u))""")
            assert bad == [], (view, bad)
            shown += page.locator('[data-testid="stMain"]').inner_text()
        # the payloads were on screen, as text
        assert "window.__pwned=1" in shown and "[click me](http://evil.example/link)" in shown
    finally:
        dash.stop()
    assert hosts(requests) <= LOCAL_HOSTS, sorted(u for u in requests if "127.0.0.1" not in u)
    assert recorder.seen == []
