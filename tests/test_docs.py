"""The documentation site (docs/, mkdocs.yml): it builds with MkDocs' strict checks, a broken link fails the
build, and every shell command its pages show runs (docs/contributing.md says how): the blocks of each page in
order, in a throw-away folder with a copy of the bundled data, a store of its own and the loopback judge where a
command names one. A command that exits non-zero fails its page's test with its output."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.no_store  # (the commands' own stores are SQLite files in each page's folder)
DOCS = ROOT / "docs"
BLOCK = re.compile(r"(?:<!-- docs-test: (?P<mark>[^>]*?) -->\n)?```bash\n(?P<body>.*?)```", re.S)
LOCAL_JUDGE, LOCAL_APP = "http://localhost:11434/v1", "http://localhost:8000/v1"
MKDOCS = Path(sys.executable).parent / "mkdocs"


def blocks(page: Path) -> list[tuple[str | None, str]]:
    """Each ```bash block of a page: (its docs-test mark or None, its text)."""
    return [(m.group("mark"), m.group("body")) for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]


PAGES = sorted(p for p in DOCS.glob("*.md") if any(mark is None for mark, _ in blocks(p)))  # a block to run


def test_the_site_builds_strictly_and_a_broken_link_fails_it(tmp_path):
    if not MKDOCS.exists():
        pytest.skip("mkdocs is not installed (scripts/setup.sh --dev installs it)")
    # (never --quiet: it hides the warnings --strict counts, and a broken site then builds)
    built = subprocess.run([str(MKDOCS), "build", "--strict", "-d", str(tmp_path / "site")], cwd=ROOT,
                           capture_output=True, text=True, timeout=180)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "monitoring" / "index.html").exists()
    # the same site with one link to a page that does not exist: strict mode refuses it
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    (docs / "cli.md").write_text((docs / "cli.md").read_text() + "\nSee [the old page](no-such-page.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}"))
    broken = subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(config), "-d",
                             str(tmp_path / "site2")], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stdout + broken.stderr


def test_every_skipped_block_says_why():
    marks = [(p.name, mark) for p in sorted(DOCS.glob("*.md")) for mark, _ in blocks(p) if mark]
    assert marks, "no page marks a block: the pattern no longer finds the marks"
    for name, mark in marks:
        assert re.fullmatch(r"skip \(.{20,}\)", mark), f"{name}: a docs-test mark must be 'skip (why)': {mark!r}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_on_the_page_runs(page, tmp_path, judge_server):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "data", work / "data")
    (work / ".venv").symlink_to(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_")}
    env.update(EVAL_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT), JUDGE_BASE_URL=judge_server.url,
               JUDGE_MODEL="loopback", MY_APP_KEY="a-key-for-the-app",
               PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    for mark, body in blocks(page):
        if mark:
            continue  # test_every_skipped_block_says_why
        script = body.replace(LOCAL_JUDGE, judge_server.url).replace(LOCAL_APP, judge_server.url)
        done = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{page.name}:\n{body}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
