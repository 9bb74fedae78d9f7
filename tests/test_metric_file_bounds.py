"""Metric files read within bounds: a YAML alias bomb in the front matter refused (naming file and line) before
anything is built, a file past the size limit refused before it is read, and a ``reply_pattern`` matched by RE2
in time linear in the reply (``^(a|aa)+$`` cannot stall a run), its one group still the value. The slow cases
run in a child process with a deadline and a memory limit, so that without the bound the test fails instead of
taking the machine."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.core.errors import UsageError
from evaluators.core.replies import ReplyError
from evaluators.metrics.custom import load_metric_file, specs_from_text
from evaluators.metrics.custom.common import MAX_DEFINITION_BYTES, MAX_MATCHED_CHARS
from tests.conftest import ROOT, env_for_subprocess

pytestmark = pytest.mark.usefixtures("forget_custom_metrics")

# 9 levels of 9 aliases each: 9**9 = 387 million strings once expanded (the 479 bytes, 41 s, 5.4 GB),
# under keys a Prompty file may have; the request parameters (model.parameters.stop) are written out as JSON
BOMB = ("metadata:\n" + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" if i else "  l0: &l0 [lol]\n"
                                 for i in range(9)) + "model:\n  parameters:\n    stop: *l8\n")


def bounded_child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` run in a Python child limited to 1 GiB of memory, killed after ``timeout`` seconds."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    try:
        return subprocess.run([sys.executable, "-c", limit + code], cwd=ROOT, capture_output=True, text=True,
                              env=env_for_subprocess(), timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s")


def test_a_yaml_alias_bomb_is_refused_at_once_naming_file_and_line(tmp_path):
    path = tmp_path / "bomb.prompty"
    path.write_text(f"---\nname: bomb\ninputs: [response]\n{BOMB}---\nuser:\n{{{{response}}}}\n", encoding="utf-8")
    assert len(BOMB) < 600
    p = bounded_child("from evaluators.metrics.custom import load_metric_file\n"
                      f"try:\n    load_metric_file({str(path)!r})\nexcept Exception as e:\n    print(e)\n")
    assert p.returncode == 0, p.stderr[-2000:]
    # line 5 is the first anchor (&l0): refused there, before any alias is expanded
    assert p.stdout.strip() == (f"{path}:5: front matter: the front matter uses a YAML anchor or alias (&name, *name); "
                                "metric files may not (an alias can stand for gigabytes): write the value out")


def test_deeply_nested_front_matter_is_refused_before_yaml_reads_it(tmp_path):
    """Found by review: 40 KB of [[[...]]] in a setting took PyYAML 42 s (then a RecursionError) in the
    dashboard's process, on every rerun of New metric. Refused at once, naming the line; and a header past
    64 KB likewise."""
    deep = "[" * 20_000 + "]" * 20_000
    path = tmp_path / "deep.prompty"
    path.write_text(f"---\nname: deep\ninputs: [response]\ndescription: {deep}\n---\nuser:\n{{{{response}}}}\n")
    long = tmp_path / "long.prompty"
    long.write_text("---\nname: long\ninputs: [response]\n" + "".join(f"k{i}: {'x' * 60}\n" for i in range(1200))
                    + "---\nuser:\n{{response}}\n")
    p = bounded_child("from evaluators.metrics.custom import load_metric_file\n"
                      f"for f in ({str(path)!r}, {str(long)!r}):\n    try:\n        load_metric_file(f)\n"
                      "    except Exception as e:\n        print(e)\n", timeout=20)
    assert p.returncode == 0, p.stderr[-2000:]
    n = len(long.read_text().split("---\n")[1]) - 1  # the header's characters, its last line break not counted
    assert p.stdout.splitlines() == [f"{path}:4: the front matter nests deeper than 50 levels",
                                     f"{long}:2: the front matter is {n:,} characters; it may have 65,536"]


def test_a_stored_alias_bomb_costs_the_metric_listing_nothing(store):
    """A bomb a store got before this check (written straight into its table) is left out of the listing at once."""
    from evaluators.store.saved_metrics import SavedMetricRow

    with store.session() as s, s.begin():
        s.add(SavedMetricRow(name="bomb", version=1, format="prompty", text=f"---\nname: bomb\ninputs: [response]\n"
                             f"{BOMB}---\nuser:\n{{{{response}}}}\n", description=""))
    p = bounded_child("from evaluators.store.store import Store\nfrom evaluators.core.registry import all_metrics\n"
                      f"Store({store.url!r}).register_saved_metrics()\n"
                      "print('bomb' in {m.name for m in all_metrics()})\n")
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr[-2000:]


def test_a_metric_file_past_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.md"
    path.write_text("---\nname: huge\nfields: [response]\n---\n{{response}}\n" + "x" * MAX_DEFINITION_BYTES,
                    encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{path}: the file is 262,\d\d\d bytes; a metric file may have 262,144$"):
        load_metric_file(path)
    with pytest.raises(UsageError, match=r"^the definition: the file is 262,\d\d\d bytes"):  # pasted or saved text
        specs_from_text(path.read_text(), "template", "the definition")


def _spec(pattern: str, kind: str = "score"):
    text = f"---\nname: pat\nfields: [response]\nkind: {kind}\nreply_pattern: {json.dumps(pattern)}\n---\nRate {{{{response}}}}\n"
    return specs_from_text(text, "template", "pat.md")[0]


def test_a_reply_pattern_s_one_group_is_the_value_of_its_last_match():
    spec = _spec(r"Score:\s*(\d+)")
    assert spec.parse_reply("Score: 2, no, on reflection\nScore: 4").outputs == {"pat": 4.0}
    assert _spec(r"Verdict:.*?(\d)").parse_reply("Verdict:\nafter thought, 3").outputs == {"pat": 3.0}  # . spans lines
    assert _spec(r"(?i)LABEL: (\w+)", "label").parse_reply("label: yes").outputs == {"pat_label": True}
    with pytest.raises(ReplyError, match="does not match the metric's reply_pattern"):
        spec.parse_reply("no score here")
    with pytest.raises(ReplyError, match=f"is {MAX_MATCHED_CHARS + 8:,} characters; a reply_pattern is matched on at"):
        spec.parse_reply("x" * MAX_MATCHED_CHARS + "Score: 4")


@pytest.mark.parametrize("pattern,why", [
    (r"(a)\1", "invalid escape sequence: \\1"), (r"(?=a)(\d)", "invalid perl operator: (?="),
    (r"(\d", "missing ): (\\d"), (r"(\d)(\d)", "needs exactly one group (the value), has 2")])
def test_patterns_that_need_backtracking_or_are_broken_are_refused_naming_the_line(pattern, why):
    with pytest.raises(UsageError) as e:
        _spec(pattern)
    assert str(e.value).startswith("pat.md:5: reply_pattern: ") and why in str(e.value), str(e.value)


def test_a_catastrophic_pattern_reads_a_long_reply_in_linear_time():
    """``^(1|11)+$`` (the issue's ``^(a|aa)+$``) on 60 ones and a 2: Python's backtracking engine tries ~1.5e12
    ways (hours); RE2 reads it in one pass. The same pattern still reads a reply it matches."""
    p = bounded_child("from evaluators.metrics.custom import specs_from_text\n"
                      "spec = specs_from_text('---\\nname: pat\\nfields: [response]\\nreply_pattern: \"^(1|11)+$\"\\n"
                      "---\\nRate {{response}}\\n', 'template', 'pat.md')[0]\n"
                      "try:\n    spec.parse_reply('1' * 60 + '2')\nexcept ValueError as e:\n    print(e)\n"
                      "print(spec.parse_reply('1' * 5).outputs)\n", timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines() == ["the reply does not match the metric's reply_pattern '^(1|11)+$'",
                                     "{'pat': 1.0}"], p.stdout
