"""What the CLI prints of text it did not write (a saved metric's description and template, a file's name in
an error) reaches the terminal without control characters: an escape sequence in a description set the
window's title, cleared the screen and drew fake output (issue 37)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from evaluators.cli.text import clean
from tests.conftest import ROOT, env_for_subprocess

TITLE, CLEAR, HOME, RED = "\x1b]0;pwned\x07", "\x1b[2J", "\x1b[H", "\x1b[31m"
HOSTILE = f"Polite{TITLE}{CLEAR}{HOME}{RED} answer\r\x08\x9b2J\x9d8;;http://x\x9c\u202eevil\x7f\x00 end"

TABLE = [  # (text, printed): sequences go whole, controls one by one; newlines, tabs and other text stay
    (HOSTILE, "Polite answerevil end"),  # (\x9b2J, C1 CSI, goes whole too)
    ("\x1b[1;31mred\x1b[0m plain", "red plain"),
    ("title\x1b]2;fake\x1b\\ after", "title after"),
    ("line one\n\tline two: café, 日本, emoji 🙂", "line one\n\tline two: café, 日本, emoji 🙂"),
    ("bell\x07 and \x1bc reset and \x1bP1$r q\x1b\\ dcs", "bell and  reset and  dcs"),
]


@pytest.mark.no_store
@pytest.mark.parametrize("text, printed", TABLE)
def test_clean_drops_terminal_controls_only(text, printed):
    assert clean(text) == printed


def cli(*args):
    return subprocess.run([sys.executable, "-m", "evaluators", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env_for_subprocess(), timeout=120)


def controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or c == "\u202e"})


def test_metrics_list_and_show_print_no_controls(store_url, tmp_path):
    template = (ROOT / "examples" / "metrics" / "politeness.md").read_text()
    # as YAML's double quotes read it; no NUL: PostgreSQL cannot store one in text (saving it is refused there with
    # an internal error: a matter of the metric files' checks, not of printing)
    escaped = HOSTILE.replace("\x00", "").encode("unicode_escape").decode().replace('"', '\\"')
    text = template.replace("description: How polite the answer is, 1 (rude) to 5 (courteous).",
                            f'description: "{escaped}"').replace("You are fair", f"You are {RED}fair")
    path = tmp_path / "politeness.md"
    path.write_text(text)
    assert cli("metrics", "add", path, "--db", store_url).returncode == 0
    listed, shown = cli("metrics", "list", "--db", store_url), cli("metrics", "show", "politeness", "--db", store_url)
    assert listed.returncode == 0 and shown.returncode == 0, listed.stderr + shown.stderr
    line = next(x for x in listed.stdout.splitlines() if "politeness" in x)
    assert line.endswith("Polite answerevil end")  # the description, as text
    assert "You are fair" in shown.stdout and "  Polite answerevil end" in shown.stdout  # template and description
    assert controls(listed.stdout + listed.stderr) == [] and controls(shown.stdout + shown.stderr) == []


@pytest.mark.no_store
def test_an_error_quoting_a_file_name_prints_no_controls(tmp_path):
    p = cli("run", tmp_path / f"rows{TITLE}{CLEAR}.jsonl", "--metrics", "f1_score", "--out", tmp_path / "o")
    assert p.returncode == 2 and "rows.jsonl" in p.stderr.replace("0;pwned", "")  # the file is named, as text
    assert controls(p.stderr) == []
