"""What the command line prints of text it did not write: run and dataset names, metric descriptions and
templates, reviewers' names, notes, error messages quoting a file. Terminal control characters in such text
act on the terminal (a saved description could set the window's title, clear the screen and draw fake
output), so every line the CLI prints goes through :func:`say`, which keeps newlines and tabs and drops the
rest: escape sequences whole (CSI, OSC, DCS..., in their 7- and 8-bit forms), then any C0 or C1 control,
DEL, and the bidirectional overrides that make text read other than it is stored.
"""
from __future__ import annotations

import re
import sys

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clear screen
    r"|\x9b[0-?]*[ -/]*[@-~]"  # the same, 8-bit
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: window title, hyperlinks, clipboard
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # any other escape (charset switches, ESC c: reset)
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """``text`` as a string safe to print on a terminal: newlines and tabs kept, every other control gone."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", str(text)))


def say(*parts: object, sep: str = " ", end: str = "\n", file=None, flush: bool = False) -> None:
    """``print`` for the CLI: each part through :func:`clean` (``file``: the stream in force now, stdout by default)."""
    print(*(clean(p) for p in parts), sep=sep, end=end, file=file or sys.stdout, flush=flush)


def say_table(rows: list[tuple], out=None) -> None:
    """A table: the first row a header underlined, columns padded to their widest cell (cells as printed, so
    they line up), through :func:`say`."""
    rows = [tuple(map(clean, r)) for r in rows]
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for n, r in enumerate(rows):
        say("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        if n == 0:
            say("  ".join("-" * w for w in widths), file=out)
