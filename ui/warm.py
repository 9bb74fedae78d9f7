"""What the pages import, imported when the server starts: a freshly started dashboard's first page then
finds Pandas, the engine's read layer and the page helpers loaded, instead of importing them while its
first visitor waits (a second or more on this 2-core machine); then the newest ended run is opened into the
dashboard's caches (:func:`newest_run`)."""
from __future__ import annotations

import ast
import importlib
import logging
import threading
from pathlib import Path

log = logging.getLogger("evaldash")


def page_imports(root: Path, files: list[str]) -> list[str]:
    """The modules the page files import (``from ui import rows`` counts as ``ui.rows``), in file order."""
    out: list[str] = []
    for file in files:
        for node in ast.walk(ast.parse((root / file).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append(node.module)
                out += [f"{node.module}.{a.name}" for a in node.names]
    return list(dict.fromkeys(out))


def _import_all(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a name imported from a module (a function, a class), not a module itself
        except Exception:  # noqa: BLE001 — warming is an optimisation: the page says what is wrong when it runs
            log.exception("importing %s ahead of the first page", name)


def streamlit_once() -> None:
    """What Streamlit does once per process when a page first draws, done ahead (py-spy, on the first request to
    a fresh server under bench/dashboard_scale.py): checking the page icon compiles its table of every emoji into
    one regular expression (~0.4 s here), and the first element drawn checks for a Python REPL with
    ``inspect.stack()``, which resolves the file of every loaded module the first time (~0.4 s; later calls find
    them in inspect's cache); a new browser session imports the modules that decide whether to suggest installing
    Streamlit's agent skills (~0.2 s, on the server's event loop)."""
    import streamlit.runtime.backend_operation_handler  # noqa: F401
    import streamlit.web.skills  # noqa: F401
    from streamlit import env_util, string_util

    string_util.is_emoji("\N{BAR CHART}")
    env_util.is_repl()


def newest_run() -> str | None:
    """Open the newest ended run as its Results page first does (its columns, each metric's summary at the run's
    own thresholds, its cost) into the dashboard's caches: the run a team opens after a restart is most often the
    one that just finished. Returns its id (None: no ended run)."""
    from evaluators.run.spec import RunSpec
    from ui import loaders

    ended = next((r for r in loaders.store().run_rows() if r["status"] not in ("queued", "running")), None)
    if ended is None:
        return None
    run = loaders.run(ended["id"])
    spec = RunSpec.from_dict(run["spec"])
    res = loaders.results(run, {s.name: spec.threshold(s) for s in spec.specs()})
    for s in res.specs:
        res.summary(s)
    loaders.run_cost(run)
    return run["id"]


class _NoRuntimeYet(logging.Filter):
    """Drops Streamlit's "No runtime found, using MemoryCacheStorageManager": each ``@st.cache_data`` imported
    before the server has made its runtime (app.py imports ui.loaders when the server imports it, and so does the
    warm-up) checks its settings against a stand-in storage and says so: eight lines at every start, though
    nothing is cached there (the warm-up's calls wait for the runtime: :func:`_runtime_up`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No runtime found")


logging.getLogger("streamlit.runtime.caching.cache_data_api").addFilter(_NoRuntimeYet())


def _runtime_up(timeout: float = 60.0) -> bool:
    """Wait for Streamlit's runtime, which the server makes after importing app.py (whose import starts the
    warm-up): a cached call made before it would fill a stand-in storage. Outside a server (a test, a script)
    there is none to wait for."""
    import sys
    import time

    from streamlit import runtime

    if "streamlit.web.bootstrap" not in sys.modules:
        return runtime.exists()
    end = time.monotonic() + timeout
    while not runtime.exists():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _warm(names: list[str]) -> None:
    _import_all(names)
    try:
        streamlit_once()
    except Exception:  # noqa: BLE001 — an optimisation (Streamlit's internals may move): pages work without it
        log.exception("Streamlit's once-per-process work ahead of the first page")
    from evaluators.core.errors import EvalError

    if not _runtime_up():
        return  # no server (an import from a test, a script): nothing to open ahead of anything
    try:
        newest_run()
    except EvalError:
        pass  # a store to upgrade, say: the first page says so, in words
    except Exception:  # noqa: BLE001 — an optimisation: the page says what is wrong when it runs
        log.exception("opening the newest run ahead of the first page")


def warm(root: Path, files: list[str]) -> threading.Thread:
    """Import the pages' modules, then open the newest ended run, in a background thread (the server starts
    answering meanwhile)."""
    t = threading.Thread(target=_warm, args=(page_imports(root, files),), name="warm-pages", daemon=True)
    t.start()
    return t
