"""Our deterministic strategies against PyRIT's own converters (issue 33), the ones the SDK maps its
``AttackStrategy`` values to: the same text in, the same attack text out, on hand-made and Hypothesis-generated text.

PyRIT runs in a throwaway virtualenv (``EVAL_PYRIT_PYTHON``, else ``bench/.pyrit-venv``, which scripts/test.sh
builds from PyPI; skipped, saying so, without one). A script there converts every text with each converter and
prints the results as JSON; nothing of PyRIT is imported here.

Compared: base64, rot13, caesar (offset 1, as the SDK sets it), atbash, morse, binary (16 bits), url, flip,
character_space, string_join, diacritic, ascii_smuggler, unicode_substitution. Not compared, on purpose: those that
choose at random (leetspeak, char_swap, unicode_confusable, ansi_attack: our choice is seeded by the scan's seed,
PyRIT's by its own random state), ascii_art (a FIGlet font PyRIT picks at random), suffix_append and jailbreak
(their text is ours: the SDK takes it from its service).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from evaluators.suites.redteam import strategies as S
from tests.conftest import ROOT

SCRIPT = r'''
import asyncio, json, sys
from pyrit import converter as c

CONVERTERS = {
    "base64": c.Base64Converter(), "rot13": c.ROT13Converter(), "caesar": c.CaesarConverter(caesar_offset=1),
    "atbash": c.AtbashConverter(), "morse": c.MorseConverter(), "binary": c.BinaryConverter(), "url": c.UrlConverter(),
    "flip": c.FlipConverter(), "character_space": c.CharacterSpaceConverter(), "string_join": c.StringJoinConverter(),
    "diacritic": c.DiacriticConverter(), "ascii_smuggler": c.AsciiSmugglerConverter(),
    "unicode_substitution": c.UnicodeSubstitutionConverter(),
}

async def convert(conv, text):
    try:
        return (await conv.convert_async(prompt=text, input_type="text")).output_text
    except Exception:  # a text the converter refuses (binary: a character wider than its 16 bits)
        return None

async def main():
    texts = json.load(sys.stdin)
    json.dump({name: [await convert(conv, t) for t in texts] for name, conv in CONVERTERS.items()}, sys.stdout)

asyncio.run(main())
'''
COMPARED = ("base64", "rot13", "caesar", "atbash", "morse", "binary", "url", "flip", "character_space",
            "string_join", "diacritic", "ascii_smuggler", "unicode_substitution")
HAND_MADE = ["How do I pick a lock?", "Hello, World! 123 é?", "", " ", "two  spaces\tand a tab",
             "line one\nline two\r\n  indented line", "Ärger über Ölpreise; 50% off_now $5", "ß and ﬁ ligature",
             "emoji 🙂 and CJK 漢字", "UPPER lower 0987654321", "~`!@#$%^&*()_+-=[]{}|\\:;\"'<>,.?/"]


def pyrit_python() -> str:
    py = os.environ.get("EVAL_PYRIT_PYTHON") or str(ROOT / "bench" / ".pyrit-venv" / "bin" / "python")
    if not Path(py).exists():
        pytest.skip("no PyRIT virtualenv (set EVAL_PYRIT_PYTHON, or run scripts/test.sh once, which builds "
                    "bench/.pyrit-venv)")
    return py


def pyrit(texts: list[str]) -> dict[str, list[str]]:
    done = subprocess.run([pyrit_python(), "-c", SCRIPT], input=json.dumps(texts), capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def differences(texts: list[str]) -> list[tuple[str, str, str, str]]:
    """(strategy, text, ours, PyRIT's) wherever the two differ. Where PyRIT's converter refuses a text (binary: a
    character above U+FFFF; unicode_substitution: one its shift takes past U+10FFFF), ours must be what
    evaluators.suites.redteam.strategies says it does instead (more bits; the character kept)."""
    theirs, out = pyrit(texts), []
    for name in COMPARED:
        for t, got in zip(texts, theirs[name]):
            if got is None and name == "binary":  # (its refusal: a character needs more than 16 bits)
                assert any(ord(c) > 0xFFFF for c in t), t
                got = f" {ord(' '):016b} ".join(" ".join(f"{ord(c):016b}" for c in w) for w in t.split(" "))
            elif got is None:  # (its refusal: a character shifted past U+10FFFF; ours keeps it as it is)
                assert name == "unicode_substitution" and any(ord(c) + 0xE0000 > 0x10FFFF for c in t), (name, t)
                got = "".join(chr(ord(c) + 0xE0000) if ord(c) + 0xE0000 <= 0x10FFFF else c for c in t)
            if S.apply(name, t, 0) != got:
                out.append((name, t, S.apply(name, t, 0), got))
    return out


def test_each_strategy_equals_pyrit_s_converter_on_hand_made_text():
    assert differences(HAND_MADE) == []


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)  # (no lone surrogate: not UTF-8)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(TEXT, min_size=60, max_size=60))
def test_each_strategy_equals_pyrit_s_converter_on_generated_text(texts):
    assert differences(texts) == []
