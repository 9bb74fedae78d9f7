"""Load, map and validate datasets.

Two shapes: single-turn rows (query, response, optional context and ground_truth)
and conversations (``messages`` with optional per-turn ``context.citations``).
Everything is checked at the door and every problem is reported at once, by
file, 1-based row and field. Row numbers: the line in JSONL, the record (header
not counted) in CSV, the element in a JSON array, the record in Parquet.

Hostile files (archives, binary data, UTF-16/32, over-long or over-deep values,
unclosed CSV quotes) are named as such rather than failing somewhere later; an
upload is size-limited here (``max_upload_bytes``), and its name is only text.
JSON lines are parsed one line at a time from the bytes, and parsed rows are
never changed in place, so one read serves every column mapping the user tries.
"""
from __future__ import annotations

import codecs
import csv
import hashlib
import io
import itertools
import json
import math
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import MAX_PROBLEMS, DataValidationError, Problem, ProblemCollector, UsageError
from .registry import FIELDS, MetricSpec, get_metric, missing_fields
from .sdk_compat import check_conversation, conversation_messages, is_sdk_conversation

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# Column names other tools use, mapped to our canonical fields; the first hit wins.
KNOWN_SCHEMAS: dict[str, dict[str, list[str]]] = {
    "azure": {"query": ["query"], "response": ["response"], "context": ["context"],
              "ground_truth": ["ground_truth"], "messages": ["messages", "conversation"]},
    "deepeval": {"query": ["input"], "response": ["actual_output"], "ground_truth": ["expected_output"],
                 "context": ["retrieval_context", "context"]},
    "inspect": {"query": ["input"], "response": ["output", "completion"], "ground_truth": ["target"]},
    "common": {"query": ["question", "prompt", "user_input"], "response": ["answer", "output", "prediction", "completion"],
               "ground_truth": ["reference", "expected", "ideal", "gold", "label", "target"],
               "context": ["contexts", "documents", "retrieved_contexts", "passage"]},
    # WildBench rows: the conversation (messages, conversation_input or history + user_query) and the
    # pair's second response stay in their own columns, which the wildbench_* metrics read.
    "wildbench": {"query": ["user_query"], "response": ["model_output", "candidate_A"], "checklist": ["checklist"]},
}
TEXT_FIELDS = ("query", "response", "ground_truth")
ROLES = {"system", "user", "assistant", "tool", "developer"}


@dataclass
class Turn:
    """One assistant turn of a conversation, with what a judge needs to see."""

    index: int
    query: str
    response: str
    context: str | None
    ground_truth: str | None
    history: str


@dataclass
class Dataset:
    """A validated dataset: original records plus a mapping to canonical fields."""

    name: str
    records: list[dict[str, Any]]
    columns: list[str]
    mapping: dict[str, str]
    shape: str  # "single" | "conversation"
    source: str = "<data>"
    detected: str = "custom"
    # Row numbers as the source file counts them (see module docstring).
    row_numbers: list[int] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        """SHA-256 of ``json.dumps([mapping, records], sort_keys=True, separators=(",", ":"))``,
        fed one record at a time so that no second copy of the data is built."""
        return _records_hash(self.mapping, self.records)

    def __len__(self) -> int:
        return len(self.records)

    def value(self, i: int, fld: str) -> Any:
        col = self.mapping.get(fld)
        return None if col is None else self.records[i].get(col)

    def canonical(self, i: int) -> dict[str, Any]:
        """Row ``i`` as canonical fields (text fields as text, context rendered)."""
        row = {f: self.value(i, f) for f in FIELDS}
        if row["context"] is not None:
            row["context"] = render_context(row["context"])
        return row

    def fields(self) -> set[str]:
        """Canonical fields the data provides (for conversations, what any turn carries)."""
        if self.shape == "conversation":
            out = {"messages", "query", "response"}
            for rec in self.records:
                for m in conversation_messages(rec.get(self.mapping["messages"])):
                    if isinstance(m, dict) and m.get("role") == "assistant":
                        if _has_value(m.get("context")):
                            out.add("context")
                        if _has_value(m.get("ground_truth")):
                            out.add("ground_truth")
            return out
        return {f for f, col in self.mapping.items() if any(_has_value(r.get(col)) for r in self.records)}

    def turns(self, i: int) -> list[Turn]:
        return conversation_turns(self.messages(i))

    def shown_text(self, i: int) -> tuple[str, str]:
        """Row ``i``'s query and response as a table shows them: a conversation's last turn, its
        query after the number of turns."""
        if self.shape == "conversation":
            turns = self.turns(i)
            q, r = (turns[-1].query, turns[-1].response) if turns else ("", "")
            return f"[{len(turns)} turns] {q}", r
        c = self.canonical(i)
        return c.get("query") or "", c.get("response") or ""

    def messages(self, i: int) -> list[dict]:
        """Row ``i``'s messages (also from the SDK's ``{"messages": [...], "context": ...}`` object)."""
        return conversation_messages(self.value(i, "messages"))

    def availability(self) -> dict[str, list[str]]:
        """Every registered metric -> the fields it lacks here ([] = available)."""
        from .registry import all_metrics

        have = self.fields()
        return {s.name: missing_fields(s, self.shape, have) for s in all_metrics()}

    def check_metrics(self, names: Iterable[str]) -> list[MetricSpec]:
        """Resolve metric names and check every row can feed them.

        Raises:
            UsageError: an unknown metric, or one the dataset's fields cannot feed.
            DataValidationError: rows lacking a field a chosen metric needs.
        """
        specs = [get_metric(n) for n in names]
        have = self.fields()
        for s in specs:
            lacking = missing_fields(s, self.shape, have)
            if lacking:
                what = "conversations" if self.shape == "conversation" else "single-turn rows"
                raise UsageError(f"metric '{s.name}' needs {', '.join(lacking)}, which {self.source} ({what}) does not have")
        if self.shape == "single":
            # one walk of the records (a streamed file is parsed once, not once per metric and field);
            # problems are reported in the order metric, field, row, as before
            needs = [(s, f, self.mapping[f]) for s in specs for f in s.fields]
            cols = list(dict.fromkeys(col for _, _, col in needs))
            empty: dict[str, list[int]] = {col: [] for col in cols}
            for i, rec in enumerate(self.records):
                for col in cols:
                    if not _has_value(rec.get(col)) and len(empty[col]) <= MAX_PROBLEMS:
                        empty[col].append(i)  # past the collector's limit, one more only says "truncated"
            problems = ProblemCollector(self.source)
            for s, f, col in needs:
                for i in empty[col]:
                    problems.add(self.row_no(i), col, f"empty, but metric '{s.name}' needs {f}")
            problems.raise_if_any()
        return specs

    def row_no(self, i: int) -> int:
        return self.row_numbers[i] if self.row_numbers else i + 1


def _records_hash(mapping: dict, records: Iterable[dict]) -> str:
    """:attr:`Dataset.content_hash` of these records (fed one record at a time)."""
    h = hashlib.sha256()
    dump = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode
    h.update(b"[" + dump(mapping).encode() + b",[")
    for k, rec in enumerate(records):
        h.update((b"," if k else b"") + dump(rec).encode())
    h.update(b"]]")
    return h.hexdigest()


def _has_value(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, float) and math.isnan(v):
        return False
    if isinstance(v, (str, list, dict)) and len(v) == 0:
        return False
    return True


def render_context(ctx: Any) -> str:
    """Context as the judge reads it: text as is, documents numbered with id and title."""
    if isinstance(ctx, str):
        return ctx
    if isinstance(ctx, dict):
        ctx = ctx.get("citations", ctx.get("documents", [ctx]))
    parts = []
    for k, doc in enumerate(ctx, 1):
        if isinstance(doc, dict):
            head = " ".join(str(x) for x in (doc.get("id"), doc.get("title")) if x)
            parts.append(f"[doc{k}] {head}\n{doc.get('content', '')}".strip())
        else:
            parts.append(f"[doc{k}] {doc}")
    return "\n\n".join(parts)


def conversation_turns(messages: list[dict]) -> list[Turn]:
    """Split a conversation into judged turns: each assistant reply with the user message before it."""
    turns, history, last_user = [], [], ""
    for m in messages:
        role, content = m.get("role"), _as_text(m.get("content")) or ""  # a number is its text here too
        if role == "assistant":
            ctx = m.get("context")
            turns.append(Turn(len(turns), last_user, content,
                              render_context(ctx) if _has_value(ctx) else None,
                              m.get("ground_truth") if _has_value(m.get("ground_truth")) else None,
                              "\n".join(history)))
        elif role == "user":
            last_user = content
        history.append(f"{(role or '?').capitalize()}: {content}")
    return turns


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


def detect_mapping(columns: list[str]) -> tuple[dict[str, str], str]:
    """Guess canonical fields from column names. Returns (mapping, schema name).

    The schema naming the most fields wins; a field it has no name for is then taken from any
    other schema's names (so ``question, answer, context`` maps ``context`` too).
    """
    cols = set(columns)
    best: tuple[int, dict[str, str], str] = (0, {}, "custom")
    for schema, names in KNOWN_SCHEMAS.items():
        mapping = {}
        for fld, options in names.items():
            hit = next((c for c in options if c in cols), None)
            if hit:
                mapping[fld] = hit
        score = len(mapping) + (1 if "response" in mapping else 0)
        if score > best[0]:
            best = (score, mapping, schema)
    mapping, schema = dict(best[1]), best[2]
    if mapping:
        for names in KNOWN_SCHEMAS.values():
            for fld, options in names.items():
                used = set(mapping.values())
                hit = next((c for c in options if c in cols and c not in used), None)
                if fld not in mapping and fld != "messages" and hit:
                    mapping[fld] = hit
    if "messages" in mapping:
        schema = "azure" if schema == "azure" and cols & {"messages", "conversation"} else "openai-messages"
    return mapping, schema


def _text_or_json(v: Any) -> Any:
    """CSV cells hold JSON for lists/objects; decode them when they look like JSON."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            obj = json.loads(v)
        except (ValueError, RecursionError):
            return v
        return obj if isinstance(obj, (list, dict)) and _too_big(obj) is None else v
    return v


def _as_text(v: Any) -> str | None:
    """Text as is; a finite number as its text (42 -> "42", 0.5 -> "0.5"); anything else None."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return str(v)
    return None


def _check_context(v: Any, where, problems: ProblemCollector, row: int, col: str) -> None:
    if isinstance(v, str) or v is None:
        return
    docs = v.get("citations", v.get("documents")) if isinstance(v, dict) else v
    if not isinstance(docs, list):
        problems.add(row, col, f"{where}context must be text, a list of texts or {{'citations': [...]}}, got {_kind(v)}")
        return
    for d in docs:
        if isinstance(d, dict) and _as_text(d.get("content", "")) is None:
            problems.add(row, col, f"{where}citation content must be text, got {_kind(d.get('content'))}")
            return
        if not isinstance(d, (str, dict)) and _as_text(d) is None:
            problems.add(row, col, f"{where}each document must be text or an object with 'content', got {_kind(d)}")
            return


def build_dataset(records: list[dict], numbers: list[int], source: str, name: str,
                  column_mapping: Mapping[str, str] | None = None,
                  problems: ProblemCollector | None = None) -> Dataset:
    """Map columns to fields and check types row by row.

    ``records`` are not changed: a row whose values need converting (a number where text
    belongs becomes its text, a CSV cell holding JSON becomes a list) is copied first, so the
    same parsed rows can be mapped again another way.

    Args:
        records: parsed rows.
        numbers: their row numbers in the source.
        column_mapping: field -> column overrides (e.g. {"query": "question"}; None: no column).
    Raises:
        UsageError: a mapping to an unknown field or column.
        DataValidationError: wrong types, by row and field.
    """
    columns = list(dict.fromkeys(c for rec in records for c in rec))
    mapping, schema, shape = _map_columns(columns, source, column_mapping)
    problems = problems or ProblemCollector(source)
    out: list[dict] = []
    for rec, row in zip(records, numbers):
        out.append(_check_row(rec, row, mapping, problems))
        if problems.full:
            break
    problems.raise_if_any()
    return Dataset(name=name, records=out, columns=columns, mapping=mapping, shape=shape,
                   source=source, detected=schema, row_numbers=list(numbers))


def _map_columns(columns: list[str], source: str,
                 column_mapping: Mapping[str, str] | None) -> tuple[dict[str, str], str, str]:
    """(field -> column mapping, schema detected, shape) for these columns and the user's overrides."""
    mapping, schema = detect_mapping(columns)
    for fld, col in (column_mapping or {}).items():
        if fld not in FIELDS:
            raise UsageError(f"cannot map '{fld}': fields are {', '.join(FIELDS)}")
        if col is None:  # no column for this field, even one that detection found
            mapping.pop(fld, None)
            schema = "custom"
            continue
        if col not in columns:
            raise UsageError(f"{source}: no column '{col}' to map to {fld}; columns are {', '.join(columns)}")
        mapping = {f: c for f, c in mapping.items() if c != col}
        mapping[fld] = col
        schema = "custom"
    shape = "conversation" if "messages" in mapping else "single"
    if shape == "single" and "response" not in mapping:
        raise UsageError(
            f"{source}: no response column found among {', '.join(columns)}; "
            "map one (CLI: --map response=COLUMN)")
    return mapping, schema, shape


def _check_row(rec: dict, row: int, mapping: dict[str, str], problems: ProblemCollector) -> dict:
    """One row checked against the mapping (problems added); a copy where a value needed converting."""
    changed: dict[str, Any] = {}
    for fld, col in mapping.items():
        v = rec.get(col)
        if type(v) is str and v and (fld in TEXT_FIELDS or fld == "context" and v[0] not in "[{"):
            continue  # the common case: text where text belongs
        if fld in ("messages", "context", "checklist"):
            v = _text_or_json(v)
        elif fld in TEXT_FIELDS and v is not None and not isinstance(v, float) and _as_text(v) is None:
            problems.add(row, col, f"{fld} must be text, got {_kind(v)}")  # even an empty list or object
            continue
        if not _has_value(v):
            if fld in ("response", "messages"):
                problems.add(row, col, f"missing {fld}")
            continue
        if fld in TEXT_FIELDS:
            text = _as_text(v)
            if text is None:
                problems.add(row, col, f"{fld} must be text, got {_kind(v)}")
            v = text
        elif fld == "context":
            if _as_text(v) is not None:
                v = _as_text(v)
            _check_context(v, "", problems, row, col)
        elif fld == "messages" and is_sdk_conversation(v):
            v = check_conversation(v, problems, row, col)
        elif fld == "messages":
            v = _check_messages(v, problems, row, col)
        elif fld == "checklist" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            problems.add(row, col, f"checklist must be a list of texts, got {type(v).__name__}")
        if v is not rec.get(col) and v is not None:
            changed[col] = v
    return {**rec, **changed} if changed else rec


def _check_messages(v: Any, problems: ProblemCollector, row: int, col: str) -> Any:
    """Check a conversation; returns it with numeric ``content`` as text (copied only if so)."""
    if not isinstance(v, list):
        problems.add(row, col, f"messages must be a list of {{role, content}}, got {_kind(v)}")
        return v
    assistants, fixed = 0, list(v)
    for k, m in enumerate(v):
        where = f"messages[{k}]: "
        if not isinstance(m, dict):
            problems.add(row, col, f"{where}must be an object with role and content, got {_kind(m)}")
            continue
        if m.get("role") not in ROLES:
            got = "no role" if "role" not in m else f"role {m.get('role')!r}"
            problems.add(row, col, f"{where}role must be one of {', '.join(sorted(ROLES))}; this message has {got}")
        text = _as_text(m.get("content"))
        if text is None:
            problems.add(row, col, f"{where}content must be text, got {_kind(m.get('content'))}")
        elif text is not m.get("content"):
            fixed[k] = {**m, "content": text}
        if m.get("role") == "assistant":
            assistants += 1
            if "context" in m:
                _check_context(m["context"], where, problems, row, col)
    if v and not assistants:
        problems.add(row, col, "the conversation has no assistant message to evaluate")
    return fixed if any(a is not b for a, b in zip(fixed, v)) else v


def upload_name(name: str) -> str:
    """A file name as shown and stored: its last path part, printable, at most 200 characters.

    An upload's name is text to show, never a path to write to: ``../../evil.jsonl`` is ``evil.jsonl``.
    """
    base = str(name).replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()[:200]
    return base if base not in ("", ".", "..") else "upload"


def _limit_problem(size: int, source: str) -> Problem | None:
    limit = max_upload_bytes()
    if size <= limit:
        return None
    return Problem(source, 0, "", f"the file is {size / 2**20:,.1f} MB; uploads are limited to "
                                  f"{limit / 2**20:,.0f} MB (EVAL_MAX_UPLOAD_MB)")


def load_dataset(data: Any, column_mapping: Mapping[str, str] | None = None, name: str | None = None,
                 fmt: str | None = None) -> Dataset:
    """Load and validate a dataset.

    Args:
        data: a path (JSONL, JSON, CSV, Parquet), bytes (with ``name`` or ``fmt``; at most
            :func:`max_upload_bytes`), a pandas DataFrame, a list of dicts, or an existing :class:`Dataset`.
        column_mapping: field -> column overrides.
        name: display name (defaults to the file name).
        fmt: format when it cannot be told from a file name.
    Returns:
        A validated :class:`Dataset`.
    Raises:
        DataValidationError, UsageError: see :func:`read_records` and :func:`build_dataset`.
    """
    if isinstance(data, Dataset):
        return data
    if isinstance(data, (str, Path)):
        path = Path(data)
        fmt = fmt or FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise UsageError(f"{path}: unknown file type; use .jsonl, .json, .csv or .parquet")
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror}") from None
        problems = ProblemCollector(path.name)
        records, numbers = read_records(raw, path.name, fmt, problems)
        del raw
        return build_dataset(records, numbers, path.name, name or path.name, column_mapping, problems)
    if isinstance(data, (bytes, bytearray, memoryview)):
        src = upload_name(name or "upload")
        fmt = fmt or FORMATS.get(Path(src).suffix.lower())
        if fmt is None:
            raise UsageError(f"{src}: unknown file type; use .jsonl, .json, .csv or .parquet")
        too_big = _limit_problem(len(data), src)
        if too_big:
            raise DataValidationError([too_big])
        problems = ProblemCollector(src)
        records, numbers = read_records(bytes(data), src, fmt, problems)
        return build_dataset(records, numbers, src, src, column_mapping, problems)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a DataFrame
        data = [{str(c): _json_safe(v) for c, v in r.items()} for r in data.to_dict(orient="records")]
    if isinstance(data, list):
        if not data:
            raise DataValidationError([Problem(name or "<data>", 0, "", "no rows")])
        bad = [k for k, r in enumerate(data, 1) if not isinstance(r, dict)]
        if bad:
            raise UsageError(f"{name or '<data>'}: row {bad[0]} is not a dict")
        return build_dataset(list(data), list(range(1, len(data) + 1)), name or "<data>", name or "<data>", column_mapping)
    raise UsageError(f"cannot load data of type {type(data).__name__}")


class FileRecords(Sequence):
    """A JSON-lines file's records, read from disk, checked and converted as :func:`build_dataset`
    does each time they are walked: a dataset of any size without its rows in memory. A small file's
    checked records may be given (``kept``): walks then read them, not the file (each walk of the
    file parses every line again; a CLI run walks its dataset three times after the check)."""

    def __init__(self, path: Path, mapping: dict[str, str], n: int, kept: list[dict] | None = None):
        self.path, self.mapping, self.n, self.kept = path, mapping, n, kept

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        if self.kept is not None:
            for rec in self.kept:
                yield dict(rec)  # a fresh dict each walk, as a walk of the file gives
            return
        problems = ProblemCollector(self.path.name)
        k = 0
        for rec, row in _jsonl_file(self.path, problems):
            k += 1
            yield _check_row(rec, row, self.mapping, problems)
        if problems.problems or k != self.n:
            raise UsageError(f"{self.path} changed while it was being read; run again")

    def __getitem__(self, i):  # rare here (a run reads its rows from the store): a walk to row i
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return next(itertools.islice(iter(self), i, None))


@dataclass
class FileDataset(Dataset):
    """A :class:`Dataset` over :class:`FileRecords`, with its content hash and fields computed in
    the one checking pass (each would otherwise be another read of the file)."""

    known_hash: str = ""
    known_fields: frozenset = frozenset()

    @property
    def content_hash(self) -> str:
        return self.known_hash

    def fields(self) -> set[str]:
        return set(self.known_fields)


KEEP_BYTES = 8 * 2**20  # a JSON-lines file up to this size keeps its checked records in memory after the check
# (some 40 MB of them at most; 100,000 judged rows grew a run's peak from 91 to 145 MB with 32 MB)


def load_dataset_streaming(data: Any, column_mapping: Mapping[str, str] | None = None,
                           name: str | None = None) -> Dataset:
    """:func:`load_dataset`, reading a JSON-lines file from disk without holding its rows: one pass
    for the columns, one to check every row (and hash them, and note the fields present); the rows
    are read again when they are used (e.g. stored). Anything else, or a file with any problem, goes
    through :func:`load_dataset`, so errors are word for word the same.

    Returns:
        A :class:`FileDataset` (records on disk) or what :func:`load_dataset` returns.
    """
    if not isinstance(data, (str, Path)) or FORMATS.get(Path(data).suffix.lower()) != "jsonl":
        return load_dataset(data, column_mapping, name)
    path = Path(data)
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return load_dataset(data, column_mapping, name)  # says why it cannot be read
    problems = ProblemCollector(path.name)
    if _sniff(head, "jsonl"):
        return load_dataset(data, column_mapping, name)
    columns: dict[str, None] = {}
    n = 0
    try:
        small = path.stat().st_size <= KEEP_BYTES
    except OSError:
        small = False
    parsed: list | None = [] if small else None  # a small file is parsed once; a big one streamed each walk
    for rec, row in _jsonl_file(path, problems):
        n += 1
        if parsed is not None:
            parsed.append((rec, row))
        for c in rec:
            if c not in columns:
                columns[c] = None
    if problems.problems or not n:
        return load_dataset(data, column_mapping, name)
    cols = list(columns)
    mapping, schema, shape = _map_columns(cols, path.name, column_mapping)
    numbers = array("q")
    fields: set[str] = set()
    chunk: list[dict] = []
    probe = Dataset(name="", records=chunk, columns=cols, mapping=mapping, shape=shape)  # fields() of a chunk

    kept: list[dict] | None = [] if parsed is not None else None

    def checked():
        for rec, row in (parsed if parsed is not None else _jsonl_file(path, problems)):
            out = _check_row(rec, row, mapping, problems)
            numbers.append(row)
            if kept is not None:
                kept.append(out)
            chunk.append(out)
            if len(chunk) >= 1000:
                fields.update(probe.fields())
                chunk.clear()
            yield out

    digest = _records_hash(mapping, checked())
    fields.update(probe.fields() if chunk else ())
    if problems.problems or len(numbers) != n:
        return load_dataset(data, column_mapping, name)
    return FileDataset(name=name or path.name, records=FileRecords(path, mapping, n, kept), columns=cols,
                       mapping=mapping, shape=shape, source=path.name, detected=schema, row_numbers=numbers,
                       known_hash=digest, known_fields=frozenset(fields))


@dataclass
class ParsedFile:
    """An upload read once (records and reading problems), to map and check as often as the user remaps."""

    name: str
    records: list[dict]
    numbers: list[int]
    problems: list  # list[Problem] found while reading
    truncated: bool = False
    readable: bool = True  # False: nothing could be read (too big, binary, empty...)


@dataclass
class Inspection:
    """What the dashboard shows about an upload before it is saved."""

    name: str
    columns: list[str]
    mapping: dict[str, str]
    detected: str
    preview: list[dict[str, Any]]
    problems: list  # list[Problem]; empty when ``dataset`` is set
    dataset: Dataset | None
    truncated: bool = False
    # The source file's 1-based row number of each preview row (as in ``problems``).
    preview_rows: list[int] = field(default_factory=list)


def read_upload(data: bytes, name: str) -> ParsedFile:
    """Read an upload's bytes, collecting problems instead of raising.

    Args:
        data: the file's bytes (refused beyond :func:`max_upload_bytes`).
        name: its file name (gives the format; only its last path part is kept, see :func:`upload_name`).
    """
    name = upload_name(name)
    fmt = FORMATS.get(Path(name).suffix.lower())
    if fmt is None:
        return ParsedFile(name, [], [], [Problem(name, 0, "", "unknown file type; use .jsonl, .json, .csv or .parquet")],
                          readable=False)
    too_big = _limit_problem(len(data), name)
    if too_big:
        return ParsedFile(name, [], [], [too_big], readable=False)
    problems = ProblemCollector(name)
    try:
        records, numbers = read_records(data, name, fmt, problems)
    except DataValidationError as e:
        return ParsedFile(name, [], [], e.problems, e.truncated, readable=False)
    return ParsedFile(name, records, numbers, list(problems.problems), problems.truncated)


def inspect_parsed(parsed: ParsedFile, column_mapping: Mapping[str, str] | None = None,
                   preview_rows: int = 20) -> Inspection:
    """Map and check a read upload, collecting every problem instead of raising.

    The preview holds the first ``preview_rows`` rows and, when there are problems, up to as many
    rows named in them, each with its source row number (``Inspection.preview_rows``).
    """
    name = parsed.name
    if not parsed.readable:
        return Inspection(name, [], {}, "custom", [], parsed.problems, None, parsed.truncated)
    problems = ProblemCollector(name)
    problems.problems, problems.truncated = list(parsed.problems), parsed.truncated
    columns = list(dict.fromkeys(c for r in parsed.records for c in r))
    detected, schema = detect_mapping(columns)
    mapping = {f: c for f, c in {**detected, **(column_mapping or {})}.items() if c is not None}
    try:
        ds = build_dataset(parsed.records, parsed.numbers, name, name, column_mapping, problems)
    except DataValidationError as e:
        preview, rows = _preview(parsed.records, parsed.numbers, preview_rows, {p.row for p in e.problems})
        return Inspection(name, columns, mapping, schema, preview, e.problems, None, e.truncated, rows)
    except UsageError as e:
        preview, rows = _preview(parsed.records, parsed.numbers, preview_rows, set())
        usage = Problem(name, 0, "", str(e).removeprefix(f"{name}: "))
        return Inspection(name, columns, mapping, schema, preview, [usage, *problems.problems], None,
                          problems.truncated, rows)
    preview, rows = _preview(ds.records, ds.row_numbers, preview_rows, set())
    return Inspection(name, columns, ds.mapping, ds.detected, preview, [], ds, False, rows)


def _preview(records: list[dict], numbers: list[int], n: int, wanted: set[int]) -> tuple[list[dict], list[int]]:
    picked = list(range(min(n, len(records))))
    if wanted:
        picked += [k for k, row in enumerate(numbers) if row in wanted and k >= n][:n]
    return [records[k] for k in picked], [numbers[k] for k in picked]


def inspect_file(data: bytes, name: str, column_mapping: Mapping[str, str] | None = None,
                 preview_rows: int = 20) -> Inspection:
    """Read an upload, detect its mapping and validate it, collecting every problem instead of raising.

    Args:
        data: the file's bytes.
        name: its file name (gives the format).
        column_mapping: field -> column chosen by the user (others detected).
    """
    return inspect_parsed(read_upload(data, name), column_mapping, preview_rows)
