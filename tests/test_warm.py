"""The pages' imports are loaded when the server starts, not on the first visitor's request."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, app_pages, env_for_subprocess


def test_the_pages_modules_are_imported_at_server_start():
    files = [f for f, _ in app_pages()]
    code = ("import sys, streamlit.runtime.scriptrunner as s; from pathlib import Path; "
            "from ui import warm; "
            f"names = warm.page_imports(Path({str(ROOT)!r}), {files!r}); "
            "assert 'ui.review_page' in names and 'pandas' in names and 'evaluators.read.compare' in names, names; "
            "before = [n for n in ('ui.review_page', 'ui.rows', 'pandas', 'evaluators.read.compare') if n in sys.modules]; "
            f"warm.warm(Path({str(ROOT)!r}), {files!r}).join(); "
            "after = [n for n in ('ui.review_page', 'ui.rows', 'pandas', 'evaluators.read.compare') if n in sys.modules]; "
            "print(before, after)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for_subprocess(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.strip().split("] [")
    assert before == "[" and after == "'ui.review_page', 'ui.rows', 'pandas', 'evaluators.read.compare']"
    # and app.py starts the warming when streamlit imports it to find its server (outside any page)
    source = (ROOT / "app.py").read_text()
    assert "warm.warm(" in source.split("get_script_run_ctx(suppress_warning=True) is None")[1].split("else:")[0]


def test_the_newest_ended_run_is_opened_into_the_caches_at_start(home_store, fresh_caches):
    from evaluators import load_dataset
    from evaluators.store.schema import Result
    from ui import warm

    did = home_store.save_dataset(load_dataset([{"query": f"q{i}", "response": f"a{i}"} for i in range(4)]))
    done = home_store.create_run(did, {"metrics": ["coherence"], "thresholds": {"coherence": 4}}, "h1", "ended")
    home_store.write_results(done, [Result(i, "coherence", 0, "ok", float(i + 2), {"coherence": float(i + 2)})
                                    for i in range(4)])
    home_store.update_run(done, status="completed", tasks_total=4, tasks_done=4)
    home_store.create_run(did, {"metrics": ["coherence"]}, "h2", "still running")  # newer, but not ended
    assert warm.newest_run() == done
    from evaluators.read.columns import views_dir

    names = [p.name for p in views_dir(home_store).iterdir()]  # beside the SQLite file, or under EVAL_HOME
    assert any(n.startswith(done) and n.endswith(".npz") for n in names)  # its columns, built and kept
    assert any(n.startswith(f"cost-{done}-") for n in names)  # its cost, summed once


def test_streamlits_once_per_process_work_is_done_at_start():
    """What Streamlit does once per process when a page first draws (its emoji table, compiled to check the page
    icon; the REPL check's inspect.stack(), which resolves every loaded module's file the first time; the skills
    modules a new session imports) is done by the warm-up, not on the first visitor's request."""
    files = [f for f, _ in app_pages()]
    probe = ("['streamlit.emojis' in sys.modules, 'streamlit.web.skills' in sys.modules, "
             "'pandas' in inspect._filesbymodname]")
    code = ("import sys, inspect; from pathlib import Path; from ui import warm; "
            f"before = {probe}; "
            f"warm.warm(Path({str(ROOT)!r}), {files!r}).join(); "
            f"print(before, {probe})")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for_subprocess(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[False, False, False] [True, True, True]"


def test_the_server_starts_without_streamlits_no_runtime_warnings(tmp_path):
    """``start.sh`` printed eight "No runtime found, using MemoryCacheStorageManager" lines: the cached loaders,
    imported when the server imports app.py (before it has made its runtime), each checked their settings against
    a stand-in storage. The server's output up to healthy and stopped holds none."""
    from tests.browser import start_dashboard, stop

    log = tmp_path / "stderr.txt"
    with open(log, "w") as f:
        proc, _ = start_dashboard(tmp_path / "home", stderr=f)
        stop(proc)
    text = log.read_text()
    assert "No runtime found" not in text, text
