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


def test_a_metric_file_with_a_nul_is_refused_naming_its_line_on_either_store(store_url, tmp_path):
    """Found with the hostile strings (issue 37): a description holding NUL (YAML's "\\0" escape) was accepted on
    SQLite and ended in "internal error" printing the SQL and its parameters on PostgreSQL. Refused when the file
    is read, naming file, line and key; nothing stored."""
    template = (ROOT / "examples" / "metrics" / "politeness.md").read_text()
    lines = template.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("description:")) + 1
    path = tmp_path / "politeness.md"
    path.write_text(template.replace("description: How polite the answer is, 1 (rude) to 5 (courteous).",
                                     'description: "polite\\0answers"'))
    p = cli("metrics", "add", path, "--db", store_url)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{path}:{at}: description: holds a NUL character" in p.stderr
    assert "SELECT" not in p.stderr and "INSERT" not in p.stderr
    listed = cli("metrics", "list", "--db", store_url)
    assert "politeness" not in listed.stdout


def test_an_internal_error_prints_its_first_line_not_the_sql_and_its_parameters(tmp_path):
    """A database error's message goes on with the statement and its parameters (issue 37: a note given as an
    object printed the SQL with its values); the CLI prints only the error's first line."""
    import sqlite3

    db = tmp_path / "evals.db"
    assert cli("db", "upgrade", "--db", f"sqlite:///{db}").returncode == 0
    with sqlite3.connect(db) as con:  # every new saved metric refused by the database itself, with its statement
        con.execute("CREATE TRIGGER refuse BEFORE INSERT ON saved_metrics BEGIN "
                    "SELECT RAISE(ABORT, 'refused by a trigger'); END")
    p = cli("metrics", "add", ROOT / "examples" / "metrics" / "politeness.md", "--db", f"sqlite:///{db}")
    assert p.returncode != 0 and "internal error: IntegrityError: (sqlite3.IntegrityError) refused by a trigger" \
        in p.stderr, p.stderr
    assert "INSERT" not in p.stderr and "parameters" not in p.stderr and "How polite" not in p.stderr

