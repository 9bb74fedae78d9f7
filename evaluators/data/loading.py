"""Loading a dataset from what a user gives (a path, bytes, records, a DataFrame): at once, streamed for large
JSON-lines files, or inspected for the dashboard's upload preview (the file read once, re-mapped at will)."""
from __future__ import annotations

import itertools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping

from evaluators.core.errors import DataValidationError, Problem, ProblemCollector, UsageError
from evaluators.core.registry import FIELDS, get_metric
from evaluators.data.dataset import Dataset, FORMATS, _records_hash
from evaluators.data.mapping import (SAMPLE_ROWS, _check_row, _map_columns, build_dataset, detect_mapping,
                                     lenient_fields, near_misses)
from evaluators.data.reading import _json_safe, _jsonl_file, _sniff, max_upload_bytes, read_records


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


def metric_fields(metrics: Iterable[str], templated: Iterable[str] = ()) -> frozenset[str] | None:
    """The canonical fields a run of these metrics reads, for the loaders' ``fields``: each metric's
    single-turn fields and the fields its conversation turns need, the query too for a judge metric (every
    built-in judge template shows the user's message, the safety ones too), and every field when a metric
    has a user's template (``templated``: it may read any). None when a name is unknown: every field is
    then checked, and the run refused for the name once the data is loaded, as before.
    """
    out: set[str] = set()
    templated = set(templated)
    for name in metrics:
        try:
            spec = get_metric(name)
        except UsageError:
            return None
        if name in templated:
            return frozenset(FIELDS)
        out.update(spec.fields, spec.conversation_fields or ())
        if spec.is_judge:
            out.add("query")
    return frozenset(out)


def load_dataset(data: Any, column_mapping: Mapping[str, str] | None = None, name: str | None = None,
                 fmt: str | None = None, fields: Collection[str] | None = None) -> Dataset:
    """Load and validate a dataset.

    Args:
        data: a path (JSONL, JSON, CSV, Parquet), bytes (with ``name`` or ``fmt``; at most
            :func:`max_upload_bytes`), a pandas DataFrame, a list of dicts, or an existing :class:`Dataset`.
        column_mapping: field -> column overrides.
        name: display name (defaults to the file name).
        fmt: format when it cannot be told from a file name.
        fields: the fields a run reads (:func:`metric_fields`); a mapped field outside them whose values
            do not check out is left out of the mapping instead of refusing rows (see :func:`build_dataset`).
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
        return build_dataset(records, numbers, path.name, name or path.name, column_mapping, problems, fields)
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
        return build_dataset(records, numbers, src, src, column_mapping, problems, fields)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a DataFrame
        data = [{str(c): _json_safe(v) for c, v in r.items()} for r in data.to_dict(orient="records")]
    if isinstance(data, list):
        if not data:
            raise DataValidationError([Problem(name or "<data>", 0, "", "no rows")])
        bad = [k for k, r in enumerate(data, 1) if not isinstance(r, dict)]
        if bad:
            raise UsageError(f"{name or '<data>'}: row {bad[0]} is not a dict")
        return build_dataset(list(data), list(range(1, len(data) + 1)), name or "<data>", name or "<data>",
                             column_mapping, None, fields)
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
                           name: str | None = None, fields: Collection[str] | None = None) -> Dataset:
    """:func:`load_dataset`, reading a JSON-lines file from disk without holding its rows: one pass
    for the columns, one to check every row (and hash them, and note the fields present); the rows
    are read again when they are used (e.g. stored). Anything else, or a file with any problem, goes
    through :func:`load_dataset`, so errors are word for word the same. ``fields`` as there: when a
    field is left out, the rows are checked (and hashed) once more without it.

    Returns:
        A :class:`FileDataset` (records on disk) or what :func:`load_dataset` returns.
    """
    if not isinstance(data, (str, Path)) or FORMATS.get(Path(data).suffix.lower()) != "jsonl":
        return load_dataset(data, column_mapping, name, fields=fields)
    path = Path(data)
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return load_dataset(data, column_mapping, name, fields=fields)  # says why it cannot be read
    problems = ProblemCollector(path.name)
    if _sniff(head, "jsonl"):
        return load_dataset(data, column_mapping, name, fields=fields)
    try:
        small = path.stat().st_size <= KEEP_BYTES
    except OSError:
        small = False
    cols, n, sample, parsed = _scan(path, problems, small)
    if problems.problems or not n:
        return load_dataset(data, column_mapping, name, fields=fields)
    mapping, schema, shape = _map_columns(cols, path.name, column_mapping, sample)

    def rows():
        return parsed if parsed is not None else _jsonl_file(path, problems)

    bad: set[str] = set()
    digest, numbers, present, kept = _check_pass(rows(), mapping, shape, cols, problems,
                                                 lenient_fields(mapping, shape, fields), bad, small)
    left_out = {f: mapping[f] for f in bad}
    if bad and not problems.problems and len(numbers) == n:  # again without them: none of their values converted
        mapping = {f: c for f, c in mapping.items() if f not in bad}
        digest, numbers, present, kept = _check_pass(rows(), mapping, shape, cols, problems, frozenset(), None, small)
    if problems.problems or len(numbers) != n:
        return load_dataset(data, column_mapping, name, fields=fields)
    return FileDataset(name=name or path.name, records=FileRecords(path, mapping, n, kept), columns=cols,
                       mapping=mapping, shape=shape, source=path.name, detected=schema, row_numbers=numbers,
                       left_out=left_out, known_hash=digest, known_fields=frozenset(present))


def _scan(path: Path, problems: ProblemCollector, small: bool) -> tuple[list[str], int, list[dict], list | None]:
    """The pass for the columns: (columns, rows, the first rows, every (record, row) when ``small``: a small
    file is parsed once; a big one streamed each walk)."""
    columns: dict[str, None] = {}
    n = 0
    parsed: list | None = [] if small else None
    sample: list[dict] = []  # the first rows: the column guess must fit their values
    for rec, row in _jsonl_file(path, problems):
        n += 1
        if parsed is not None:
            parsed.append((rec, row))
        if n <= SAMPLE_ROWS:
            sample.append(rec)
        for c in rec:
            if c not in columns:
                columns[c] = None
    return list(columns), n, sample, parsed


def _check_pass(rows, mapping: dict[str, str], shape: str, cols: list[str], problems: ProblemCollector,
                lenient: frozenset, bad: set | None, keep: bool) -> tuple[str, array, set[str], list[dict] | None]:
    """One checking pass over (record, row) pairs: (content hash, row numbers, fields present, the checked
    records when ``keep``)."""
    numbers = array("q")
    fields: set[str] = set()
    chunk: list[dict] = []
    probe = Dataset(name="", records=chunk, columns=cols, mapping=mapping, shape=shape)  # fields() of a chunk
    kept: list[dict] | None = [] if keep else None

    def checked():
        for rec, row in rows:
            out = _check_row(rec, row, mapping, problems, lenient, bad)
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
    return digest, numbers, fields, kept


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
    # Columns no field reads named nearly as a field no column feeds: column -> field (``mapping.near_misses``)
    near_misses: dict[str, str] = field(default_factory=dict)


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
    detected, schema = detect_mapping(columns, parsed.records)
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
    return Inspection(name, columns, ds.mapping, ds.detected, preview, [], ds, False, rows,
                      near_misses(columns, ds.mapping))


def bad_rows(problems: list, truncated: bool) -> list[int]:
    """The file rows the problems name, when leaving them out can help: every problem is known (reading stops at
    ``MAX_PROBLEMS``, so rows after it are unread) and is a row's (none the whole file's, like a missing response
    column). Empty otherwise."""
    rows = sorted({p.row for p in problems})
    return [] if truncated or not rows or rows[0] == 0 else rows


def without_rows(parsed: ParsedFile, rows: Collection[int]) -> ParsedFile:
    """The upload with these file rows left out (as if the file did not have them), to save a dataset without the
    rows that do not check out. The rows kept keep their file row numbers, and the name says which were left out
    (a saved dataset's ``source``: the note stays with it)."""
    gone = set(rows)
    kept = [(r, n) for r, n in zip(parsed.records, parsed.numbers) if n not in gone]
    note = rows_text(sorted(gone), max(40, 280 - len(parsed.name)))  # a stored source is at most 300 characters
    return ParsedFile(f"{parsed.name} without {note}", [r for r, _ in kept], [n for _, n in kept],
                      [p for p in parsed.problems if p.row not in gone], parsed.truncated, parsed.readable)


def rows_text(rows: list[int], limit: int = 200) -> str:
    """'row 3', 'rows 3, 7 and 10-14': the file rows named, within ``limit`` characters (then '... (N rows)')."""
    spans: list[str] = []
    for n in rows:
        if spans and spans[-1].split("-")[-1] == str(n - 1):
            spans[-1] = f"{spans[-1].split('-')[0]}-{n}"
        else:
            spans.append(str(n))
    text = spans[0] if len(spans) == 1 else ", ".join(spans[:-1]) + " and " + spans[-1]
    if len(text) > limit:
        text = text[:limit].rsplit(",", 1)[0] + f"... ({len(rows):,} rows)"
    return ("row " if len(rows) == 1 else "rows ") + text


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
