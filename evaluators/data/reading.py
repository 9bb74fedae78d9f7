"""Reading a file's records: JSON lines, JSON, CSV and Parquet, with every problem named by file, row and field.

Hostile files (archives, binary data, UTF-16/32, over-long or over-deep values, unclosed CSV quotes) are named
as such rather than failing somewhere later; an upload is size-limited (``max_upload_bytes``). JSON lines are
parsed one line at a time from the bytes. Row numbers: the line in JSONL, the record (header not counted) in
CSV, the element in a JSON array, the record in Parquet.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from evaluators.core.errors import ProblemCollector, UsageError


# ---------------------------------------------------------------- reading files

def _limit_from_env(name: str, default: int) -> int:
    """A size limit an operator may lower or raise through the environment (read, never written)."""
    raw = os.environ.get(name)
    try:
        return int(float(raw)) if raw else default
    except ValueError:
        raise UsageError(f"{name} must be a number, got {raw!r}") from None


def max_upload_bytes() -> int:
    """The largest file an upload may be: ``EVAL_MAX_UPLOAD_MB`` (default 200, as Streamlit's
    ``server.maxUploadSize`` in .streamlit/config.toml), checked by the engine, not only the browser."""
    return _limit_from_env("EVAL_MAX_UPLOAD_MB", 200) * 1024 * 1024


# One text value may be at most this long (characters): 4 million is about a million tokens, more
# than any judge reads; a longer one is an export mistake, refused with its row and field.
MAX_FIELD_CHARS = 4_000_000
# Lists and objects may nest this deep; deeper data is refused before anything walks it recursively.
MAX_DEPTH = 64

_MAGIC = [(b"PK\x03\x04", "a ZIP archive (or an .xlsx/.docx file)", "unzip it or export the data as {what}"),
          (b"\x1f\x8b", "a gzip-compressed file", "decompress it first"),
          (b"PAR1", "a Parquet file", "give it a .parquet name"),
          (b"SQLite format 3\x00", "an SQLite database", "export a table as {what}")]
_WHAT = {"jsonl": "JSON lines", "json": "JSON", "csv": "CSV"}


def _json_safe(v: Any) -> Any:
    """pandas/numpy/pyarrow values -> plain JSON values (NaN -> None)."""
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, Mapping):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if hasattr(v, "tolist"):
        return _json_safe(v.tolist())
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):
        return _json_safe(v.item())
    return str(v)


def _sniff(data: bytes, fmt: str) -> str | None:
    """Why a file cannot be a text file of ``fmt`` (archives, binary data, UTF-16/32), or None."""
    if len(data) == 0:
        return "the file is empty (0 bytes)"
    head = bytes(data[:65536])
    what = _WHAT.get(fmt, fmt)
    for magic, kind, todo in _MAGIC:
        if head.startswith(magic):
            return f"this is {kind}, not {what} text; {todo.format(what=what)}"
    for bom, enc in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                     (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if head.startswith(bom):
            return f"the file is {enc} text (byte-order mark {bom.hex(' ')}); save it as UTF-8"
    even, odd = head[0::2], head[1::2]
    if len(head) >= 4 and (odd.count(0) > len(odd) * 0.3) != (even.count(0) > len(even) * 0.3):
        return f"the file looks like UTF-16 text without a byte-order mark ({'LE' if odd.count(0) > even.count(0) else 'BE'}); save it as UTF-8"
    nul = head.find(b"\x00")
    if nul != -1:
        return f"binary data (a NUL byte at offset {nul}), not {what} text"
    return None


def _utf8(raw: bytes, problems: ProblemCollector) -> bool:
    """Check the bytes are UTF-8, a megabyte at a time (no copy of the whole text); name the first bad line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    for at in range(0, len(raw), 2**20):
        pending = len(decoder.getstate()[0])  # bytes of a character split at the last chunk's end
        try:
            decoder.decode(view[at:at + 2**20], final=at + 2**20 >= len(raw))
        except UnicodeDecodeError as e:
            bad = max(0, min(at - pending + e.start, len(raw) - 1))
            problems.add(raw.count(b"\n", 0, bad) + 1, "",
                         f"not UTF-8: byte 0x{raw[bad]:02x} at offset {bad}; save the file as UTF-8")
            return False
    return True


def _too_big(v: Any, depth: int = 0) -> str | None:
    """Why a value is too long or too deep to accept, or None. Walks containers only."""
    if isinstance(v, str):
        return f"{len(v):,} characters; at most {MAX_FIELD_CHARS:,} are accepted in one field" if len(v) > MAX_FIELD_CHARS else None
    if isinstance(v, (list, dict)):
        if depth >= MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} levels deep"
        for x in (v.values() if isinstance(v, dict) else v):
            if isinstance(x, (str, list, dict)):
                why = _too_big(x, depth + 1)
                if why:
                    return why
    return None


def _keep(rec: dict, row: int, records: list, numbers: list, problems: ProblemCollector) -> None:
    """Add a parsed record unless one of its values is too long or too deep (then name the row and field)."""
    ok = True
    for col, v in rec.items():
        if type(v) is str and len(v) <= MAX_FIELD_CHARS:  # the common case, checked inline
            continue
        if isinstance(v, (str, list, dict)):
            why = _too_big(v)
            if why:
                problems.add(row, str(col), why)
                ok = False
    if ok:
        records.append(rec)
        numbers.append(row)


def _json_lines(data: bytes, problems: ProblemCollector, records: list, numbers: list) -> None:
    """Parse JSON lines one at a time: the file's text is never held whole, only one line of it."""
    view = memoryview(data)  # slices of a view are not copies
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte-order mark
    n, size = 0, len(data)
    while start < size:
        n += 1
        end = data.find(b"\n", start)
        end = size if end == -1 else end
        chunk = view[start:end]
        start = end + 1
        obj = _json_line(chunk, n, problems)
        if obj is None:
            continue
        _keep(obj, n, records, numbers, problems)
        if problems.full:
            return


def _json_line(chunk, n: int, problems: ProblemCollector) -> dict | None:
    """Line ``n`` (bytes, without its newline) as a JSON object, or None (a blank line, or a problem added)."""
    try:
        line = str(chunk, "utf-8")
    except UnicodeDecodeError as e:
        problems.add(n, "", f"not UTF-8: byte 0x{chunk[e.start]:02x} at column {e.start + 1}; save the file as UTF-8")
        return None
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        problems.add(n, "", f"broken JSON line: {e.msg} at column {e.colno}")
        return None
    except RecursionError:
        problems.add(n, "", f"nested more than {MAX_DEPTH} levels deep")
        return None
    except ValueError as e:  # an integer longer than Python converts to int
        problems.add(n, "", f"broken JSON line: {_value_error(e)}")
        return None
    if not isinstance(obj, dict):
        problems.add(n, "", f"each line must be a JSON object, got {_kind(obj)}")
        return None
    return obj


def _jsonl_file(path: Path, problems: ProblemCollector):
    """(record, line number) of a JSON-lines file read from disk a line at a time, with the same checks
    as :func:`read_records` (rows it would leave out are left out, their problems added)."""
    kept: list = []
    numbers: list = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            obj = _json_line(raw[:-1] if raw.endswith(b"\n") else raw, n, problems)
            if obj is None:
                continue
            _keep(obj, n, kept, numbers, problems)
            if kept:
                yield kept.pop(), numbers.pop()
            if problems.full:
                return


def _value_error(e: ValueError) -> str:
    return "a number with more than 4,300 digits" if "digits" in str(e) else str(e)


def _kind(v: Any) -> str:
    """A JSON value's type as a user knows it."""
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return f"a number ({v!r})"
    return {str: "text", list: "a list", dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)


def _parquet(data: bytes, problems: ProblemCollector, records: list, numbers: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(pa.py_buffer(data)))
    except Exception as e:  # noqa: BLE001 — pyarrow raises many types for a corrupt file
        problems.add(0, "", f"not a readable Parquet file ({type(e).__name__}: {e})")
        return
    meta = table.schema.pandas_metadata or {}
    index = {c for c in meta.get("index_columns", []) if isinstance(c, str)}  # pandas' saved index
    table = table.drop_columns([c for c in table.column_names if c in index])
    row = 0
    for batch in table.to_batches(max_chunksize=10_000):  # Python objects for one batch at a time
        for rec in batch.to_pylist():
            row += 1
            _keep({str(c): _json_safe(v) for c, v in rec.items()}, row, records, numbers, problems)


def read_records(data: bytes, source: str, fmt: str,
                 problems: ProblemCollector | None = None) -> tuple[list[dict], list[int]]:
    """Parse file bytes into records and their row numbers.

    Unreadable rows are added to ``problems`` (and left out) so that validation can go on
    and report everything at once; a file that cannot be read at all raises at once.

    Raises:
        DataValidationError: the file as a whole is unreadable or empty.
    """
    problems = problems or ProblemCollector(source)
    if not isinstance(data, bytes):
        data = bytes(data)
    records: list[dict] = []
    numbers: list[int] = []
    if fmt not in ("jsonl", "json", "csv", "parquet"):
        raise UsageError(f"{source}: unknown format '{fmt}'")
    why = _sniff(data, fmt) if fmt != "parquet" else ("the file is empty (0 bytes)" if len(data) == 0 else None)
    if why:
        problems.add(0, "", why)
        problems.raise_if_any()
    if fmt == "parquet":
        _parquet(data, problems, records, numbers)
    elif fmt == "jsonl":
        _json_lines(data, problems, records, numbers)
    else:
        if not _utf8(data, problems):
            problems.raise_if_any()
        if fmt == "json":
            text = str(data, "utf-8-sig")  # a JSON array is parsed whole
            try:
                obj = json.loads(text) if text.strip() else []
            except json.JSONDecodeError as e:
                problems.add(e.lineno, "", f"broken JSON: {e.msg} at line {e.lineno}, column {e.colno}")
                problems.raise_if_any()
            except RecursionError:
                problems.add(0, "", f"nested more than {MAX_DEPTH} levels deep")
                problems.raise_if_any()
            except ValueError as e:
                problems.add(0, "", f"broken JSON: {_value_error(e)}")
                problems.raise_if_any()
            del text
            if isinstance(obj, dict) and isinstance(obj.get("data", obj.get("rows")), list):
                obj = obj.get("data", obj.get("rows"))
            if not isinstance(obj, list):
                problems.add(0, "", f"a JSON file must hold an array of objects, got {_kind(obj)}")
                problems.raise_if_any()
            for k, item in enumerate(obj, 1):
                if isinstance(item, dict):
                    _keep(item, k, records, numbers, problems)
                else:
                    problems.add(k, "", f"each element must be an object, got {_kind(item)}")
        else:  # decoded as the reader goes: the whole text is never held
            _csv(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline=""), problems, records, numbers)
    if not records:
        if not problems.problems:
            problems.add(0, "", "the file holds no rows")
        problems.raise_if_any()
    return records, numbers


def _csv(stream, problems: ProblemCollector, records: list, numbers: list) -> None:
    # A cell may hold a whole document; our own per-field limit names its row and column,
    # so the csv module's 128 KiB cap (one message for the whole file) is lifted for this read.
    csv.field_size_limit(max(csv.field_size_limit(), 2 ** 31 - 1))
    # strict: a quote opened and never closed is an error, not a cell that swallows every later row
    reader = csv.DictReader(stream, strict=True)
    k = 0
    try:
        if reader.fieldnames and len(set(reader.fieldnames)) != len(reader.fieldnames):
            dup = next(c for c in reader.fieldnames if reader.fieldnames.count(c) > 1)
            problems.add(0, dup, "this column name appears twice in the header")
            return
        for k, rec in enumerate(reader, 1):
            if None in rec:
                problems.add(k, "", f"{len(rec[None])} more value(s) than header columns")
                continue
            _keep({c: (v if v != "" else None) for c, v in rec.items()}, k, records, numbers, problems)
            if problems.full:
                return
    except csv.Error as e:
        hint = "; a quoted value starting in this row is never closed" if "end of data" in str(e) else ""
        problems.add(k + 1, "", f"broken CSV: {e}{hint}")
