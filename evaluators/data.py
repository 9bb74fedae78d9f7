"""Load, map and validate datasets.

Two shapes: single-turn rows (query, response, optional context and ground_truth)
and conversations (``messages`` with optional per-turn ``context.citations``).
Everything is checked at the door and every problem is reported at once, by
file, 1-based row and field. Row numbers: the line in JSONL, the record (header
not counted) in CSV, the element in a JSON array, the record in Parquet.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import DataValidationError, Problem, ProblemCollector, UsageError
from .registry import FIELDS, MetricSpec, get_metric, missing_fields

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
        blob = json.dumps([self.mapping, self.records], sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

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
                for m in rec.get(self.mapping["messages"]) or []:
                    if isinstance(m, dict) and m.get("role") == "assistant":
                        if _has_value(m.get("context")):
                            out.add("context")
                        if _has_value(m.get("ground_truth")):
                            out.add("ground_truth")
            return out
        return {f for f, col in self.mapping.items() if any(_has_value(r.get(col)) for r in self.records)}

    def turns(self, i: int) -> list[Turn]:
        return conversation_turns(self.value(i, "messages") or [])

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
            problems = ProblemCollector(self.source)
            for s in specs:
                for f in s.fields:
                    col = self.mapping[f]
                    for i, rec in enumerate(self.records):
                        if not _has_value(rec.get(col)):
                            problems.add(self.row_no(i), col, f"empty, but metric '{s.name}' needs {f}")
            problems.raise_if_any()
        return specs

    def row_no(self, i: int) -> int:
        return self.row_numbers[i] if self.row_numbers else i + 1


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
        role, content = m.get("role"), m.get("content") or ""
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

def _json_safe(v: Any) -> Any:
    """pandas/numpy/pyarrow values -> plain JSON values (NaN -> None)."""
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, Mapping):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if hasattr(v, "tolist") and not isinstance(v, (bytes, bytearray)):
        return _json_safe(v.tolist())
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):
        return _json_safe(v.item())
    return str(v)


def _decode(raw: bytes, source: str, problems: ProblemCollector) -> str | None:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        problems.add(line, "", f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}; save the file as UTF-8")
        return None


def read_records(data: bytes, source: str, fmt: str,
                 problems: ProblemCollector | None = None) -> tuple[list[dict], list[int]]:
    """Parse file bytes into records and their row numbers.

    Unreadable rows are added to ``problems`` (and left out) so that validation can go on
    and report everything at once; a file that cannot be read at all raises at once.

    Raises:
        DataValidationError: the file as a whole is unreadable or empty.
    """
    problems = problems or ProblemCollector(source)
    records, numbers = [], []
    if fmt == "parquet":
        import pandas as pd

        try:
            frame = pd.read_parquet(io.BytesIO(data))
        except Exception as e:  # pyarrow raises many types for a corrupt file
            problems.add(0, "", f"not a readable Parquet file ({type(e).__name__}: {e})")
            problems.raise_if_any()
        for k, rec in enumerate(frame.to_dict(orient="records")):
            records.append({str(c): _json_safe(v) for c, v in rec.items()})
            numbers.append(k + 1)
    else:
        text = _decode(data, source, problems)
        if text is None:
            problems.raise_if_any()
        if fmt == "jsonl":
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    problems.add(n, "", f"broken JSON line: {e.msg} at column {e.colno}")
                    continue
                if not isinstance(obj, dict):
                    problems.add(n, "", f"each line must be a JSON object, got {type(obj).__name__}")
                    continue
                records.append(obj)
                numbers.append(n)
        elif fmt == "json":
            try:
                obj = json.loads(text) if text.strip() else []
            except json.JSONDecodeError as e:
                problems.add(e.lineno, "", f"broken JSON: {e.msg} at line {e.lineno}, column {e.colno}")
                problems.raise_if_any()
            if isinstance(obj, dict) and isinstance(obj.get("data", obj.get("rows")), list):
                obj = obj.get("data", obj.get("rows"))
            if not isinstance(obj, list):
                problems.add(0, "", "a JSON file must hold an array of objects")
                problems.raise_if_any()
            for k, item in enumerate(obj, 1):
                if isinstance(item, dict):
                    records.append(item)
                    numbers.append(k)
                else:
                    problems.add(k, "", f"each element must be an object, got {type(item).__name__}")
        elif fmt == "csv":
            reader = csv.DictReader(io.StringIO(text, newline=""))
            try:
                for k, rec in enumerate(reader, 1):
                    if None in rec:
                        problems.add(k, "", f"{len(rec[None])} more value(s) than header columns")
                        continue
                    records.append({c: (v if v != "" else None) for c, v in rec.items()})
                    numbers.append(k)
            except csv.Error as e:
                problems.add(reader.line_num, "", f"broken CSV: {e}")
        else:
            raise UsageError(f"{source}: unknown format '{fmt}'")
    if not records:
        if not problems.problems:
            problems.add(0, "", "the file holds no rows")
        problems.raise_if_any()
    return records, numbers


def detect_mapping(columns: list[str]) -> tuple[dict[str, str], str]:
    """Guess canonical fields from column names. Returns (mapping, schema name)."""
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
    mapping, schema = best[1], best[2]
    if "messages" in mapping:
        schema = "azure" if schema == "azure" and "messages" in cols else "openai-messages"
    return mapping, schema


def _text_or_json(v: Any) -> Any:
    """CSV cells hold JSON for lists/objects; decode them when they look like JSON."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _check_context(v: Any, where, problems: ProblemCollector, row: int, col: str) -> None:
    if isinstance(v, str) or v is None:
        return
    docs = v.get("citations", v.get("documents")) if isinstance(v, dict) else v
    if not isinstance(docs, list):
        problems.add(row, col, f"{where}context must be text, a list of texts or {{'citations': [...]}}, got {type(v).__name__}")
        return
    for d in docs:
        if isinstance(d, dict) and not isinstance(d.get("content", ""), str):
            problems.add(row, col, f"{where}citation content must be text")
            return
        if not isinstance(d, (str, dict)):
            problems.add(row, col, f"{where}each document must be text or an object with 'content'")
            return


def build_dataset(records: list[dict], numbers: list[int], source: str, name: str,
                  column_mapping: Mapping[str, str] | None = None,
                  problems: ProblemCollector | None = None) -> Dataset:
    """Map columns to fields and check types row by row.

    Args:
        records: parsed rows.
        numbers: their row numbers in the source.
        column_mapping: field -> column overrides (e.g. {"query": "question"}).
    Raises:
        UsageError: a mapping to an unknown field or column.
        DataValidationError: wrong types, by row and field.
    """
    columns: list[str] = []
    for rec in records:
        for c in rec:
            if c not in columns:
                columns.append(c)
    mapping, schema = detect_mapping(columns)
    for fld, col in (column_mapping or {}).items():
        if fld not in FIELDS:
            raise UsageError(f"cannot map '{fld}': fields are {', '.join(FIELDS)}")
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
    problems = problems or ProblemCollector(source)
    for rec, row in zip(records, numbers):
        for fld, col in mapping.items():
            v = rec.get(col)
            if fld in ("messages", "context", "checklist"):
                v = rec[col] = _text_or_json(v)
            if not _has_value(v):
                if fld in ("response", "messages"):
                    problems.add(row, col, f"missing {fld}")
                continue
            if fld in ("query", "response", "ground_truth"):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    rec[col] = str(v)
                elif not isinstance(v, str):
                    problems.add(row, col, f"{fld} must be text, got {type(v).__name__}")
            elif fld == "context":
                _check_context(v, "", problems, row, col)
            elif fld == "messages":
                _check_messages(v, problems, row, col)
            elif fld == "checklist" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                problems.add(row, col, f"checklist must be a list of texts, got {type(v).__name__}")
        if problems.full:
            break
    problems.raise_if_any()
    return Dataset(name=name, records=records, columns=columns, mapping=mapping, shape=shape,
                   source=source, detected=schema, row_numbers=list(numbers))


def _check_messages(v: Any, problems: ProblemCollector, row: int, col: str) -> None:
    if not isinstance(v, list):
        problems.add(row, col, f"messages must be a list of {{role, content}}, got {type(v).__name__}")
        return
    assistants = 0
    for k, m in enumerate(v):
        where = f"messages[{k}]: "
        if not isinstance(m, dict):
            problems.add(row, col, f"{where}must be an object with role and content")
            continue
        if m.get("role") not in ROLES:
            problems.add(row, col, f"{where}role must be one of {', '.join(sorted(ROLES))}, got {m.get('role')!r}")
        if not isinstance(m.get("content"), str):
            problems.add(row, col, f"{where}content must be text")
        if m.get("role") == "assistant":
            assistants += 1
            if "context" in m:
                _check_context(m["context"], where, problems, row, col)
    if v and not assistants:
        problems.add(row, col, "the conversation has no assistant message to evaluate")


def load_dataset(data: Any, column_mapping: Mapping[str, str] | None = None, name: str | None = None,
                 fmt: str | None = None) -> Dataset:
    """Load and validate a dataset.

    Args:
        data: a path (JSONL, JSON, CSV, Parquet), bytes (with ``name`` or ``fmt``), a pandas
            DataFrame, a list of dicts, or an existing :class:`Dataset`.
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
        return build_dataset(records, numbers, path.name, name or path.name, column_mapping, problems)
    if isinstance(data, (bytes, bytearray)):
        src = name or "upload"
        fmt = fmt or FORMATS.get(Path(src).suffix.lower())
        if fmt is None:
            raise UsageError(f"{src}: unknown file type; use .jsonl, .json, .csv or .parquet")
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
        records = [dict(r) for r in data]
        return build_dataset(records, list(range(1, len(records) + 1)), name or "<data>", name or "<data>", column_mapping)
    raise UsageError(f"cannot load data of type {type(data).__name__}")


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


def inspect_file(data: bytes, name: str, column_mapping: Mapping[str, str] | None = None,
                 preview_rows: int = 20) -> Inspection:
    """Read an upload, detect its mapping and validate it, collecting every problem instead of raising.

    Args:
        data: the file's bytes.
        name: its file name (gives the format).
        column_mapping: field -> column chosen by the user (others detected).
    """
    fmt = FORMATS.get(Path(name).suffix.lower())
    if fmt is None:
        return Inspection(name, [], {}, "custom", [], [Problem(name, 0, "", "unknown file type; use .jsonl, .json, .csv or .parquet")], None)
    problems = ProblemCollector(name)
    try:
        records, numbers = read_records(data, name, fmt, problems)
    except DataValidationError as e:
        return Inspection(name, [], {}, "custom", [], e.problems, None, e.truncated)
    columns = list(dict.fromkeys(c for r in records for c in r))
    detected, schema = detect_mapping(columns)
    preview = [dict(r) for r in records[:preview_rows]]
    try:
        ds = build_dataset(records, numbers, name, name, column_mapping, problems)
    except DataValidationError as e:
        mapping = {**detected, **(column_mapping or {})}
        return Inspection(name, columns, mapping, schema, preview, e.problems, None, e.truncated)
    except UsageError as e:
        mapping = {**detected, **(column_mapping or {})}
        usage = Problem(name, 0, "", str(e).removeprefix(f"{name}: "))
        return Inspection(name, columns, mapping, schema, preview, [usage, *problems.problems], None)
    return Inspection(name, columns, ds.mapping, ds.detected, preview, [], ds)
