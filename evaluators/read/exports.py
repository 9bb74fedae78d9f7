"""Writing results out: rows.jsonl, metrics.json and CSV. Files appear whole or not at all."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

# Spreadsheet programs run a cell starting with these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def jsonl_text(rows: Iterable[dict]) -> str:
    return "".join(json.dumps({k: _clean(v) for k, v in r.items()}, ensure_ascii=False, default=str) + "\n"
                   for r in rows)


def neutralise(v: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula gets a leading quote."""
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def csv_text(rows: list[dict]) -> str:
    """Rows as CSV; nested values as JSON; formula-like cells neutralised."""
    columns: list[str] = []
    for r in rows:
        for k in r:
            if k not in columns:
                columns.append(k)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([neutralise(c) for c in columns])
    for r in rows:
        cells = []
        for c in columns:
            v = _clean(r.get(c))
            if isinstance(v, (dict, list)):
                v = json.dumps(v, ensure_ascii=False)
            cells.append("" if v is None else neutralise(v))
        w.writerow(cells)
    return buf.getvalue()


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_outputs(out_dir: str | Path, rows: list[dict], metrics: dict) -> None:
    """``DIR/rows.jsonl`` (input order) and ``DIR/metrics.json``."""
    out = Path(out_dir)
    write_atomic(out / "rows.jsonl", jsonl_text(rows))
    write_atomic(out / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
