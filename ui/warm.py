"""What the pages import, imported when the server starts: a freshly started dashboard's first page then
finds Pandas, the engine's read layer and the page helpers loaded, instead of importing them while its
first visitor waits (a second or more on this 2-core machine)."""
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


def warm(root: Path, files: list[str]) -> threading.Thread:
    """Import the pages' modules in a background thread (the server starts answering meanwhile)."""
    t = threading.Thread(target=_import_all, args=(page_imports(root, files),), name="warm-pages", daemon=True)
    t.start()
    return t
