"""Writing results out: rows.jsonl, metrics.json, CSV and the dashboard's downloads. Files appear whole or
not at all.

A run's exports are written a chunk of rows at a time (:func:`iter_rows`, :func:`write_export`): at
100,000 rows a run's rows as dicts take gigabytes, one chunk a few megabytes. ``csv_text`` and
``jsonl_text`` write the same bytes into a string, for small inputs.
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TextIO

from evaluators.read.chunks import CHUNK_ROWS, row_chunks

if TYPE_CHECKING:
    from evaluators.read.results import RunResults


# Spreadsheet programs run a cell starting with these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _jsonl_line(r: dict) -> str:
    return json.dumps({k: _clean(v) for k, v in r.items()}, ensure_ascii=False, default=str) + "\n"


def write_jsonl(rows: Iterable[dict], out: TextIO) -> None:
    """Rows as JSON lines, a row at a time; top-level NaN and infinities as null."""
    for r in rows:
        out.write(_jsonl_line(r))


def jsonl_text(rows: Iterable[dict]) -> str:
    return "".join(_jsonl_line(r) for r in rows)


def neutralise(v: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula gets a leading quote."""
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def _cells(r: dict, columns: list[str]) -> list[Any]:
    cells = []
    for c in columns:
        v = _clean(r.get(c))
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False)
        cells.append("" if v is None else neutralise(v))
    return cells


def _widen(line: str, known: int, width: int) -> str:
    """A CSV line written when ``known`` columns were known, given empty cells up to ``width``: what it
    would have been with every column known (a row has no value in a column first seen after it).
    csv.writer ends a line with "\r\n" and writes a row of one empty cell as ``""``, the only row it
    quotes for being empty."""
    body = line[:-2]
    if known == 0:
        return ('""' if width == 1 else "," * (width - 1)) + "\r\n"
    if known == 1 and body == '""':
        body = ""
    return body + "," * (width - known) + "\r\n"


_PIECE = 1 << 20  # characters copied per read from the temporary body


def write_csv(rows: Iterable[dict], out: TextIO, chunk: int = CHUNK_ROWS) -> None:
    """Rows as CSV (``out`` opened with ``newline=""``); nested values as JSON; formula-like cells
    neutralised. The columns are every key of every row, in the order first seen.

    The header comes first but names keys that a later row may bring, so the body is written row by
    row to a temporary file (with the number of columns known when each chunk of rows was written and
    each line's length: a cell may hold line breaks), then copied after the header a piece at a time;
    a line written before its last columns were seen gets their empty cells then. Memory holds one
    chunk of rows, whatever their number.
    """
    columns: list[str] = []
    seen: set[str] = set()
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as body:
        parts: list[tuple[int, list[int]]] = []  # per chunk: columns known, each line's length in characters
        w = csv.writer(body)
        it = iter(rows)
        while batch := list(itertools.islice(it, chunk)):
            for r in batch:
                for k in r:
                    if k not in seen:
                        seen.add(k)
                        columns.append(k)
            parts.append((len(columns), [w.writerow(_cells(r, columns)) for r in batch]))  # "\r\n" counted
        csv.writer(out).writerow([neutralise(c) for c in columns])
        body.seek(0)
        width = len(columns)
        for known, lengths in parts:
            if known < width:
                for n in lengths:
                    out.write(_widen(body.read(n), known, width))
                continue
            left = sum(lengths)
            while left:
                piece = body.read(min(left, _PIECE))
                if not piece:
                    raise OSError("the temporary CSV body is shorter than what was written to it")
                out.write(piece)
                left -= len(piece)


def csv_text(rows: Iterable[dict]) -> str:
    """Rows as CSV (see :func:`write_csv`), as one string."""
    buf = io.StringIO()
    write_csv(rows, buf)
    return buf.getvalue()


def iter_rows(res: "RunResults", chunk: int = CHUNK_ROWS, rows: Sequence[int] | None = None,
              extra: Callable[[list[int]], dict[int, dict]] | None = None) -> Iterator[dict[str, Any]]:
    """A run's rows with the SDK's keys (as ``res.rows()``; ``rows``: only these), read a chunk of rows at a time;
    ``extra`` gives a chunk's rows further keys (people's verdicts: ``review.io.review_keys``, passed in from above)."""
    for idx in row_chunks(res, chunk, rows):
        more = extra(idx) if extra is not None else {}
        for i in idx:
            yield {**res.row(i), **more.get(i, {})}


FORMATS = ("csv", "jsonl", "html")


def write_export(res: "RunResults", fmt: str, path: str | Path, run: dict[str, Any] | None = None,
                 rows: Sequence[int] | None = None, extra: Callable[[list[int]], dict[int, dict]] | None = None) -> Path:
    """Write a run's export to ``path``, whole or not at all, a chunk of rows at a time.

    Args:
        res: the run's results, thresholds applied.
        fmt: "csv" or "jsonl" (every row with the SDK's keys) or "html" (the report).
        run: the stored run record; the HTML report's heading reads it.
        rows: only these rows (0-based indices, in this order; e.g. a filter's), the report's summary still the
            whole run's; None: every row.
        extra: further keys of a chunk's rows in CSV and JSONL (see :func:`iter_rows`).
    Returns:
        ``path``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"export format {fmt!r}: one of {', '.join(FORMATS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            if fmt == "csv":
                write_csv(iter_rows(res, rows=rows, extra=extra), f)
            elif fmt == "jsonl":
                write_jsonl(iter_rows(res, rows=rows, extra=extra), f)
            else:
                from evaluators.read.report import write_html_report  # the report draws charts: loaded when asked

                write_html_report(res, run or {}, f, rows=rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
