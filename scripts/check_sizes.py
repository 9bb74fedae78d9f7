"""Fail when a Python file of the project has more than 600 lines or a function more than 80 (tests and benches
included), so that no module grows into a second god object unnoticed. Run by scripts/test.sh, so by CI.

Usage: python scripts/check_sizes.py [--max-file N] [--max-function N] [FOLDER]
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

MAX_FILE, MAX_FUNCTION = 600, 80


def python_files(root: Path) -> list[Path]:
    """The project's Python files: those git tracks or would track (ignored ones, the virtualenv, left out)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=root,
                             capture_output=True, text=True, check=True).stdout
        return sorted(root / p for p in out.splitlines() if (root / p).is_file())
    except (OSError, subprocess.CalledProcessError):  # not a checkout: every file but the virtualenv's
        return sorted(p for p in root.rglob("*.py") if ".venv" not in p.parts and ".git" not in p.parts)


def oversized(path: Path, max_file: int, max_function: int) -> list[str]:
    """One line per limit the file breaks: 'path: N lines' or 'path:LINE name(): N lines'."""
    text = path.read_text(encoding="utf-8")
    found = []
    lines = len(text.splitlines())
    if lines > max_file:
        found.append(f"{path}: {lines} lines (at most {max_file})")
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > max_function:
                found.append(f"{path}:{node.lineno} {node.name}(): {length} lines (at most {max_function})")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--max-file", type=int, default=MAX_FILE)
    ap.add_argument("--max-function", type=int, default=MAX_FUNCTION)
    a = ap.parse_args(argv)
    root = Path(a.folder)
    found = [f for p in python_files(root) for f in oversized(p, a.max_file, a.max_function)]
    for line in found:
        print(line.replace(str(root) + "/", ""))
    if found:
        print(f"{len(found)} over the size limits: split them by concern (see ARCHITECTURE.md)", file=sys.stderr)
        return 1
    print(f"sizes: every file within {a.max_file} lines, every function within {a.max_function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
