"""From records to a dataset: which column feeds which canonical field, and every row checked against it.

Every problem is reported at once, by file, 1-based row and field; parsed rows are never changed in place,
so one read serves every column mapping the user tries.
"""
from __future__ import annotations

import json
from typing import Any, Collection, Mapping, Sequence

from evaluators.core.errors import ProblemCollector, UsageError
from evaluators.core.registry import FIELDS
from evaluators.data.sdk_compat import CONVERSATION_KEYS, _present, is_sdk_conversation
from evaluators.data import agent_data
from evaluators.data.dataset import Dataset, KNOWN_SCHEMAS, ROLES, TEXT_FIELDS, _as_text, _has_value, sample_text
from evaluators.data.reading import _kind, _too_big


SAMPLE_ROWS = 200  # rows whose values decide whether a column's type fits the field its name suggests


def _fits(fld: str, v: Any) -> bool:
    """Whether a value can feed a field (a missing one always can): text fields take text or a number,
    never a true/false, and a query also chat messages, a ground truth a list of acceptable answers, a
    response an OpenAI Evals API sample object; a context text, documents or citations; messages a list or
    the SDK's conversation object; a checklist a list (each may also come as text)."""
    if not _has_value(v):
        return True
    if fld in TEXT_FIELDS and _as_text(v) is not None:
        return True
    if fld in agent_data.AGENT_FIELDS:
        return agent_data.fits(fld, v)
    if fld in ("query", "response") and agent_data.is_agent_value(v):  # an agent's messages
        return True
    if fld == "query":
        return isinstance(v, list) and all(isinstance(m, dict) and "role" in m for m in v)
    if fld == "ground_truth":
        return isinstance(v, list) and all(_as_text(x) is not None for x in v)
    if fld == "response":
        return isinstance(v, dict) and ("output_text" in v or "output" in v) and sample_text(v) is not None
    if fld == "context":
        return isinstance(v, (str, list, dict))
    if fld == "messages":  # a list of messages, the SDK's {"messages": [...]} object, or either as JSON text
        return isinstance(v, (str, list, dict))
    if fld == "checklist":
        return isinstance(v, (str, list))
    return True


def detect_mapping(columns: list[str], sample: Sequence[dict] = ()) -> tuple[dict[str, str], str]:
    """Guess canonical fields from column names and, in ``sample`` (the first rows), their values. Returns
    (mapping, schema name).

    The schema naming the most fields wins; a field it has no name for is then taken from any
    other schema's names (so ``question, answer, context`` maps ``context`` too). A column whose values do
    not fit the field its name suggests is not mapped to it (a true/false ``label`` is no ground truth),
    unless it is named as the field itself.
    """
    cols = set(columns)
    rows = sample[:SAMPLE_ROWS]

    def usable(fld: str, c: str) -> bool:
        # a column named as the field is that field (a bad value in it is reported, row by row); another
        # name is a guess, taken only when the values fit
        return c in cols and (c == fld or all(_fits(fld, r.get(c)) for r in rows))

    best: tuple[int, dict[str, str], str] = (0, {}, "custom")
    for schema, names in KNOWN_SCHEMAS.items():
        mapping = {}
        for fld, options in names.items():
            hit = next((c for c in options if usable(fld, c)), None)
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
                hit = next((c for c in options if usable(fld, c) and c not in used), None)
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
                  problems: ProblemCollector | None = None, fields: Collection[str] | None = None) -> Dataset:
    """Map columns to fields and check types row by row.

    ``records`` are not changed: a row whose values need converting (a number where text
    belongs becomes its text, a CSV cell holding JSON becomes a list) is copied first, so the
    same parsed rows can be mapped again another way.

    Args:
        records: parsed rows.
        numbers: their row numbers in the source.
        column_mapping: field -> column overrides (e.g. {"query": "question"}; None: no column).
        fields: the canonical fields a run will read (``metric_fields``); None: every mapped field. A
            mapped field outside them (and outside what the shape needs: a conversation's messages) whose
            values do not all check out is left out of the mapping (``Dataset.left_out``), its column
            as it was; the fields in them are checked as strictly as ever.
    Raises:
        UsageError: a mapping to an unknown field or column.
        DataValidationError: wrong types, by row and field.
    """
    columns = list(dict.fromkeys(c for rec in records for c in rec))
    mapping, schema, shape = _map_columns(columns, source, column_mapping, records)
    problems = problems or ProblemCollector(source)
    bad: set[str] = set()
    out = _check_rows(records, numbers, mapping, problems, lenient_fields(mapping, shape, fields), bad)
    left_out = {f: mapping[f] for f in bad}
    if bad and not problems.problems:  # checked again without them: no value of theirs is converted
        mapping = {f: c for f, c in mapping.items() if f not in bad}
        out = _check_rows(records, numbers, mapping, problems)
    problems.raise_if_any()
    return Dataset(name=name, records=out, columns=columns, mapping=mapping, shape=shape,
                   source=source, detected=schema, row_numbers=list(numbers), left_out=left_out)


def lenient_fields(mapping: Mapping[str, str], shape: str, fields: Collection[str] | None) -> frozenset[str]:
    """Mapped fields a run does not read (``fields``: what it reads; None: it reads every one): a value of
    theirs that does not check out leaves the field out of the mapping rather than refusing the row. A
    conversation's messages are always read (they are the shape)."""
    if fields is None:
        return frozenset()
    return frozenset(mapping) - set(fields) - ({"messages"} if shape == "conversation" else set())


def _check_rows(records, numbers, mapping: dict[str, str], problems: ProblemCollector,
                lenient: frozenset = frozenset(), bad: set | None = None) -> list[dict]:
    out: list[dict] = []
    for rec, row in zip(records, numbers):
        out.append(_check_row(rec, row, mapping, problems, lenient, bad))
        if problems.full:
            break
    return out


class _Noted:
    """Stands in for the problem collector while a lenient field is checked: a problem only notes the field."""

    full = False

    def __init__(self, fld: str, bad: set):
        self.fld, self.bad = fld, bad

    def add(self, row: int, col: str, message: str) -> None:
        self.bad.add(self.fld)


def _map_columns(columns: list[str], source: str, column_mapping: Mapping[str, str] | None,
                 sample: Sequence[dict] = ()) -> tuple[dict[str, str], str, str]:
    """(field -> column mapping, schema detected, shape) for these columns (``sample``: the first rows, whose
    values the guess must fit) and the user's overrides."""
    mapping, schema = detect_mapping(columns, sample)
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
    # ranked retrieval's rows need no response (document_retrieval reads the labels and the ranked documents)
    if shape == "single" and "response" not in mapping and "retrieval_ground_truth" not in mapping:
        guess = next((c for c, f in near_misses(columns, mapping).items() if f == "response"), None)
        if guess is not None:
            raise UsageError(f"{source}: no response column found among {', '.join(columns)}: is '{guess}' the "
                             f"response (its name is one letter or two from it)? Map it to response "
                             f"(CLI: --map response={guess})")
        if "query" in mapping:  # questions only (an OpenAI Evals file's input and ideal): a model answers them
            return mapping, schema, shape  # first (run --target-*, New evaluation's "Generate answers with a model")
        raise UsageError(
            f"{source}: no response column found among {', '.join(columns)}; "
            "map one (CLI: --map response=COLUMN)")
    return mapping, schema, shape


def near_misses(columns: Sequence[str], mapping: Mapping[str, str]) -> dict[str, str]:
    """Columns no field reads whose name is a near miss of an unmapped field's, or of a name a known schema reads
    for it (``reponse`` -> response, ``contxt`` -> context): column -> field, for a suggestion."""
    import difflib

    used, out = set(mapping.values()), {}
    for c in columns:
        if c in used:
            continue
        for fld in FIELDS:
            names = {fld, *(n for names in KNOWN_SCHEMAS.values() for n in names.get(fld, ()))}
            if fld not in mapping and fld not in out.values() and c.lower() not in names and \
                    difflib.get_close_matches(c.lower(), sorted(names), n=1, cutoff=0.8):
                out[c] = fld
                break
    return out


def _check_row(rec: dict, row: int, mapping: dict[str, str], problems: ProblemCollector,
               lenient: frozenset = frozenset(), bad: set | None = None) -> dict:
    """One row checked against the mapping (problems added); a copy where a value needed converting. A
    problem in a ``lenient`` field is not added: the field is added to ``bad``."""
    changed: dict[str, Any] = {}
    all_problems = problems
    for fld, col in mapping.items():
        v = rec.get(col)
        if type(v) is str and v and (fld in TEXT_FIELDS or fld == "context" and v[0] not in "[{"):
            continue  # the common case: text where text belongs
        problems = all_problems if fld not in lenient else _Noted(fld, bad)
        if fld in agent_data.AGENT_FIELDS:
            if _has_value(v):
                v = agent_data.check_field(fld, v, problems, row, col)
                if v is not rec.get(col):
                    changed[col] = v
            continue
        if fld in ("messages", "context", "checklist"):
            v = _text_or_json(v)
        elif fld in TEXT_FIELDS and _as_text(v) is None and v is not None and not isinstance(v, float):
            v = _check_structured(fld, v, problems, row, col)  # messages, answers, a sample; else a problem
            if v is not rec.get(col) and v is not None:
                changed[col] = v
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


def _check_structured(fld: str, v: Any, problems: ProblemCollector, row: int, col: str) -> Any:
    """A text field's value that is not text: a query's chat messages (OpenAI Evals' ``input``), a ground
    truth's acceptable answers (``ideal``), a response's Evals API sample object (with ``output_text`` or
    ``output``); anything else is a problem, even an empty list or object. Returns the value as stored
    (numbers in it as text, copied only if so)."""
    if fld in ("query", "response") and agent_data.is_agent_value(v):
        return agent_data.check_agent_messages(fld, v, problems, row, col)
    if fld == "query" and isinstance(v, list) and v:
        return _check_prompt(v, problems, row, col)
    if fld == "ground_truth" and isinstance(v, list) and v:
        bad = next(((k, x) for k, x in enumerate(v) if _as_text(x) is None), None)
        if bad:
            problems.add(row, col, f"ground_truth[{bad[0]}]: each acceptable answer must be text, got {_kind(bad[1])}")
            return v
        return [_as_text(x) for x in v] if any(type(x) is not str for x in v) else v
    if fld == "response" and isinstance(v, dict) and ("output_text" in v or "output" in v):
        if sample_text(v) is None:
            problems.add(row, col, "response: the OpenAI Evals sample has no text 'output_text' nor 'output' "
                                   "messages with text content")
        return v
    problems.add(row, col, f"{fld} must be text, got {_kind(v)}")
    return v


def _check_prompt(v: list, problems: ProblemCollector, row: int, col: str) -> list:
    """A query given as chat messages: each an object with a known role and text content (numbers as text)."""
    fixed = [_check_message(m, f"query[{k}]: ", problems, row, col) for k, m in enumerate(v)]
    return fixed if any(a is not b for a, b in zip(fixed, v)) else v


def _check_message(m: Any, where: str, problems: ProblemCollector, row: int, col: str) -> Any:
    """One chat message: an object with a known role and text content; returned with numeric content as text
    (a copy only then), or as it is with its problems added."""
    if not isinstance(m, dict):
        problems.add(row, col, f"{where}must be an object with role and content, got {_kind(m)}")
        return m
    if m.get("role") not in ROLES:
        got = "no role" if "role" not in m else f"role {m.get('role')!r}"
        problems.add(row, col, f"{where}role must be one of {', '.join(sorted(ROLES))}; this message has {got}")
    text = _as_text(m.get("content"))
    if text is None:
        problems.add(row, col, f"{where}content must be text, got {_kind(m.get('content'))}")
    elif text is not m.get("content"):
        return {**m, "content": text}
    return m


def check_conversation(value: dict, problems, row: int, col: str) -> dict:
    """Report what is wrong with an SDK conversation object (by row and column) to ``problems``.

    Returns:
        The object with its messages as the loader stores them (numbers as text).
    """
    unknown = sorted(set(value) - CONVERSATION_KEYS)
    if unknown:
        problems.add(row, col, f"conversation has unknown key(s) {', '.join(unknown)}; "
                               "expected {'messages': [...], 'context': ...}")
    if not isinstance(value.get("messages"), list):
        problems.add(row, col, f"conversation.messages must be a list of {{role, content}}, "
                               f"got {type(value.get('messages')).__name__}")
        return value
    if _present(value.get("context")):
        _check_context(value["context"], "conversation.", problems, row, col)
    messages = _check_messages(value["messages"], problems, row, col)
    for k, m in enumerate(value["messages"]):
        if isinstance(m, dict) and m.get("role") == "user" and "context" in m:
            _check_context(m["context"], f"messages[{k}]: ", problems, row, col)
    return value if messages is value["messages"] else {**value, "messages": messages}


def _check_messages(v: Any, problems: ProblemCollector, row: int, col: str) -> Any:
    """Check a conversation; returns it with numeric ``content`` as text (copied only if so)."""
    if not isinstance(v, list):
        problems.add(row, col, f"messages must be a list of {{role, content}}, got {_kind(v)}")
        return v
    if agent_data.is_agent_value(v):  # a log with tool calls (either form)
        agent_data.check_agent_messages("messages", v, problems, row, col)
        if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in v):
            problems.add(row, col, "the conversation has no assistant message to evaluate")
        return v
    assistants, fixed = 0, list(v)
    for k, m in enumerate(v):
        where = f"messages[{k}]: "
        fixed[k] = _check_message(m, where, problems, row, col)
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            assistants += 1
            if "context" in m:
                _check_context(m["context"], where, problems, row, col)
    if v and not assistants:
        problems.add(row, col, "the conversation has no assistant message to evaluate")
    return fixed if any(a is not b for a, b in zip(fixed, v)) else v
