"""Reading a JSON-lines file the engine wrote (a run's ``rows.jsonl``, a scan's ``attacks.jsonl``): each line an
object; a line that is not names the file and the line."""
from __future__ import annotations

import json
from pathlib import Path

from evaluators.core.errors import UsageError


def json_objects(f: Path) -> list[tuple[int, dict]]:
    """(line number, object) for each non-blank line of ``f``.

    Raises:
        UsageError: a line is not JSON, or not a JSON object (the file and the line named).
    """
    out = []
    for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise UsageError(f"{f}: line {n} is not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{f}: line {n} is not a JSON object")
        out.append((n, obj))
    return out
