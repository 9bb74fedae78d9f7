"""The engine runs headless: importing every evaluators module never imports Streamlit."""
from __future__ import annotations

import pkgutil
import subprocess
import sys

import evaluators
from tests.conftest import ROOT, env_for_subprocess


def test_no_engine_module_imports_streamlit():
    modules = sorted(m.name for m in pkgutil.walk_packages(evaluators.__path__, "evaluators.")
                     if not m.name.endswith("__main__"))
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(len(" + repr(modules) + "), 'streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for_subprocess(), capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[0]) >= 20 and out[1] == "False"
