"""The checks that keep the engine in layers (ARCHITECTURE.md) catch what they claim to catch.

scripts/test.sh runs ``lint-imports`` and ``scripts/check_sizes.py`` on the tree before the tests; here each
is run on a copy of the engine with one violation planted, and must fail naming it.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

LINT = Path(sys.executable).with_name("lint-imports")
needs_linter = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (requirements-dev.txt)")


def _lint(tmp_path: Path, plant: dict[str, str]) -> subprocess.CompletedProcess:
    """lint-imports on a copy of evaluators/ with ``plant`` (relative path -> text appended) added."""
    shutil.copytree(ROOT / "evaluators", tmp_path / "evaluators", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    for rel, text in plant.items():
        with open(tmp_path / rel, "a", encoding="utf-8") as f:
            f.write(text)
    return subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})


@needs_linter
def test_the_engine_as_it_is_keeps_every_contract(tmp_path):
    p = _lint(tmp_path, {})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Contracts: 4 kept, 0 broken." in p.stdout


@needs_linter
@pytest.mark.parametrize("where,text,named", [
    # an upward import hidden inside a function: the registry reaching for the metrics
    ("evaluators/core/registry.py", "\n\ndef _sneak():\n    from evaluators.metrics import load_builtins\n",
     "evaluators.core.registry -> evaluators.metrics"),
    # a metric reaching the store
    ("evaluators/metrics/f1.py", "\n\ndef _sneak():\n    from evaluators.store.store import Store\n",
     "evaluators.metrics.f1 -> evaluators.store.store"),
    # two siblings of one layer: the judge client importing the store
    ("evaluators/judge/client.py", "\n\ndef _sneak():\n    import evaluators.store.store\n",
     "evaluators.judge.client -> evaluators.store.store"),
    # the engine drawing with Streamlit
    ("evaluators/read/charts.py", "\n\ndef _sneak():\n    import streamlit\n",
     "evaluators.read.charts -> streamlit"),
    # a subcommand reaching back for main's helpers (main imports it): a cycle, as cli's six modules were
    ("evaluators/cli/db.py", "\n\ndef _sneak():\n    from evaluators.cli.main import EXIT_OK\n",
     "No cycles are allowed in evaluators.cli"),
])
def test_a_planted_violation_breaks_a_contract_and_is_named(tmp_path, where, text, named):
    p = _lint(tmp_path, {where: text})
    assert p.returncode != 0 and "BROKEN" in p.stdout, p.stdout
    assert named in p.stdout


@needs_linter
def test_an_import_for_type_checkers_only_is_allowed(tmp_path):
    p = _lint(tmp_path, {"evaluators/core/stats.py":
                         "\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from evaluators.run.runner import Runner\n"})
    assert p.returncode == 0, p.stdout


def _sizes(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "check_sizes.py"), str(folder)],
                          capture_output=True, text=True)


def test_sizes_name_a_long_file_and_a_long_function(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n" * 600)  # at the limit: fine
    (tmp_path / "big.py").write_text("x = 1\n" * 601)
    (tmp_path / "fn.py").write_text("def long():\n" + "    x = 1\n" * 80)  # 81 lines with its def
    p = _sizes(tmp_path)
    assert p.returncode == 1
    assert "big.py: 601 lines (at most 600)" in p.stdout and "ok.py" not in p.stdout
    assert "fn.py:1 long(): 81 lines (at most 80)" in p.stdout


def test_sizes_pass_a_tree_within_the_limits(tmp_path):
    (tmp_path / "fn.py").write_text("def short():\n" + "    x = 1\n" * 79)
    p = _sizes(tmp_path)
    assert p.returncode == 0 and "every file within 600 lines" in p.stdout


def module_cycles(package: str, path: Path) -> list[list[str]]:
    """The import cycles among ``package``'s modules (strongly connected sets of more than one), imports inside
    functions counted, those for type checkers only not; a package's ``__init__`` is a module like any other (the
    linter's acyclic_siblings contract compares siblings only, so a package and its own modules escape it)."""
    code = f"""
import json, sys
sys.setrecursionlimit(100000)
import grimp
g = grimp.build_graph({package!r}, cache_dir=None, exclude_type_checking_imports=True)
edges = {{m: sorted(x for x in g.find_modules_directly_imported_by(m) if x in g.modules) for m in sorted(g.modules)}}
index, low, on, stack, out = {{}}, {{}}, set(), [], []
def visit(v):
    index[v] = low[v] = len(index); stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            out.append(sorted(comp))
for m in edges:
    if m not in index:
        visit(m)
print(json.dumps(sorted(out)))
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=path, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(path)})
    assert p.returncode == 0, p.stderr
    import json

    return json.loads(p.stdout)


def test_no_module_of_the_engine_is_in_an_import_cycle():
    """cli.main and its five subcommand modules were one cycle (exit codes and helpers lived in main, now in
    cli.common); so were the kinds' package and its modules, the data loader's three modules, and exports and
    the report."""
    assert module_cycles("evaluators", ROOT) == []


def test_a_planted_cycle_between_a_package_and_its_module_is_found(tmp_path):
    shutil.copytree(ROOT / "evaluators", tmp_path / "evaluators", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "evaluators/core/kinds/label.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _sneak():\n    from evaluators.core.kinds import get_kind\n")
    assert module_cycles("evaluators", tmp_path) == [["evaluators.core.kinds", "evaluators.core.kinds.label"]]
