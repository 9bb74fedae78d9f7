"""A dataset: canonical rows in two shapes, single-turn rows (query, response, optional context and ground_truth)
and conversations (``messages`` with optional per-turn ``context.citations``, or one ``context`` beside them for
every turn that has none of its own), and what each shape offers the metrics. Reading files is
:mod:`evaluators.data.reading`, mapping and checking :mod:`evaluators.data.mapping`, loading
:mod:`evaluators.data.loading`.

Other tools' row formats are read as they are written, the record never rewritten: OpenAI Evals'
``input`` (text, or chat messages whose last user turn is the query and whose other messages are the
judge's ``history``), ``ideal`` (text, or a list of acceptable answers whose first is the ground truth)
and the Evals API's ``sample`` object (its ``output_text``, or the text of its ``output`` messages).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from evaluators.core.errors import MAX_PROBLEMS, ProblemCollector, UsageError
from evaluators.core.registry import FIELDS, MetricSpec, get_metric, missing_fields
from evaluators.data.agent_data import has_tool_calls
from evaluators.data.sdk_compat import conversation_messages, render_context  # noqa: F401 (also read from here)

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# Column names other tools use, mapped to our canonical fields; the first hit wins.
KNOWN_SCHEMAS: dict[str, dict[str, list[str]]] = {
    "azure": {"query": ["query"], "response": ["response", "actions"], "context": ["context"],
              "ground_truth": ["ground_truth", "expected_actions"], "messages": ["messages", "conversation"],
              "tool_definitions": ["tool_definitions"], "tool_calls": ["tool_calls"],
              "retrieval_ground_truth": ["retrieval_ground_truth"], "retrieved_documents": ["retrieved_documents"]},
    "deepeval": {"query": ["input"], "response": ["actual_output"], "ground_truth": ["expected_output"],
                 "context": ["retrieval_context", "context"]},
    "inspect": {"query": ["input"], "response": ["output", "completion"], "ground_truth": ["target"]},
    # OpenAI Evals: "input" (text or chat messages), "ideal" (text or a list of acceptable answers); the answer
    # judged is a model-graded eval's "completion", or the Evals API's "sample" (text or its sample object)
    "openai-evals": {"query": ["input"], "response": ["completion", "sample", "output"], "ground_truth": ["ideal"]},
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
    # field -> column left out of the mapping when loaded for a run: no chosen metric reads the field, and
    # some row's value in that column would not check out for it (see ``build_dataset``'s ``fields``)
    left_out: dict[str, str] = field(default_factory=dict)

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
        """Row ``i`` as canonical fields (text fields as text, context rendered). A query given as chat
        messages is its last user turn, with the other messages as ``history``; a list of acceptable
        answers is its first; an Evals API sample object is its output text."""
        row = {f: self.value(i, f) for f in FIELDS}
        if row["context"] is not None:
            row["context"] = render_context(row["context"])
        if isinstance(row["query"], list):
            row["query"], row["history"] = prompt_parts(row["query"])
        if isinstance(row["ground_truth"], list):
            row["ground_truth"] = first_answer(row["ground_truth"])
        if isinstance(row["response"], dict):
            row["response"] = sample_text(row["response"])
        elif isinstance(row["response"], list):  # an agent's messages: its last text, for text metrics
            row["response"] = final_text(row["response"])
        return row

    def fields(self) -> set[str]:
        """Canonical fields the data provides (for conversations, what any turn carries); ``tool_calls`` also
        when a response (or a conversation) holds a tool call."""
        out = self._fields()
        if "tool_calls" not in out:
            fld = "messages" if self.shape == "conversation" else "response"
            col = self.mapping.get(fld)
            if col is not None and any(has_tool_calls(r.get(col) if fld == "response" else self._messages_of(r))
                                       for r in self.records):
                out.add("tool_calls")
        return out

    def _fields(self) -> set[str]:
        if self.shape == "conversation":
            out = {"messages", "query", "response"}
            for rec in self.records:
                for m in self._messages_of(rec):
                    if isinstance(m, dict) and m.get("role") == "assistant":
                        if _has_value(m.get("context")):
                            out.add("context")
                        if _has_value(m.get("ground_truth")):
                            out.add("ground_truth")
            return out
        return {f for f, col in self.mapping.items() if any(_has_value(r.get(col)) for r in self.records)}

    def readable(self) -> set[str]:
        """What a metric may read here: :meth:`fields`, and on single-turn rows any other column with a value,
        by its name (a metric defined in a file may read a ``policy_id`` column)."""
        have = self.fields()
        if self.shape != "single":
            return have
        return have | {c for c in self.columns if c not in FIELDS and c not in self.mapping.values()
                       and any(_has_value(r.get(c)) for r in self.records)}

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
        """Row ``i``'s messages (also from the SDK's ``{"messages": [...], "context": ...}`` object), each
        assistant turn without a context of its own given the row's ``context`` column, when one is mapped."""
        return self._messages_of(self.records[i])

    def _messages_of(self, rec: dict) -> list[dict]:
        messages = conversation_messages(rec.get(self.mapping.get("messages")))
        shared = rec.get(self.mapping["context"]) if "context" in self.mapping else None
        if not _has_value(shared):
            return messages
        return [{**m, "context": shared} if isinstance(m, dict) and m.get("role") == "assistant"
                and not _has_value(m.get("context")) else m for m in messages]

    def questions_only(self) -> bool:
        """Single-turn rows with questions and no answers (no response column): a model answers them first."""
        return self.shape == "single" and "response" not in self.mapping and "query" in self.mapping \
            and "retrieval_ground_truth" not in self.mapping

    def availability(self) -> dict[str, list[str]]:
        """Every registered metric -> the fields it lacks here ([] = available)."""
        from evaluators.core.registry import all_metrics

        have = self.readable()
        return {s.name: missing_fields(s, self.shape, have) for s in all_metrics()}

    def check_metrics(self, names: Iterable[str]) -> list[MetricSpec]:
        """Resolve metric names and check every row can feed them.

        Raises:
            UsageError: an unknown metric, or one the dataset's fields cannot feed.
            DataValidationError: rows lacking a field a chosen metric needs.
        """
        specs = [get_metric(n) for n in names]
        have = self.readable()
        for s in specs:
            lacking = missing_fields(s, self.shape, have)
            if lacking:
                what = "conversations" if self.shape == "conversation" else "single-turn rows"
                hint = ("; this file has questions only: have a model answer them first (run --target-base-url URL "
                        "--target-model M, or New evaluation's \"Generate answers with a model\")"
                        if self.questions_only() else "")
                raise UsageError(f"metric '{s.name}' needs {', '.join(lacking)}, which {self.source} ({what}) does "
                                 f"not have{hint}")
        if self.shape == "single":
            # one walk of the records (a streamed file is parsed once, not once per metric and field);
            # problems are reported in the order metric, field, row, as before
            # a metric that plans its own rows (row_tasks) says itself which rows it skips (document_retrieval
            # takes an empty list of retrieved documents, as the SDK does); a derived field has no column; your
            # own metric's field may be any column of the data, read by its own name
            needs = [(s, f, self.mapping.get(f, f)) for s in specs if s.row_tasks is None for f in s.fields
                     if f in self.mapping or f in self.columns]
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


def prompt_parts(messages: list) -> tuple[str, str]:
    """(query, history) of a prompt given as chat messages (OpenAI Evals' ``input``): the query is the last
    user message (the last message when none is a user's), the history every other message in order, one
    ``Role: content`` line each (``Role (name): ...`` for a named one, as Evals' few-shot examples are)."""
    at = max((k for k, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"),
             default=len(messages) - 1)
    lines = []
    for k, m in enumerate(messages):
        if k != at and isinstance(m, dict):
            role = str(m.get("role") or "?").capitalize()
            name = f" ({m['name']})" if isinstance(m.get("name"), str) and m["name"] else ""
            lines.append(f"{role}{name}: {_content_text(m.get('content'))}")
    query = messages[at].get("content") if at >= 0 and isinstance(messages[at], dict) else None
    return _content_text(query), "\n".join(lines)


def _content_text(content: Any) -> str:
    """A message's text: its content, or the text of its parts (an agent's message in the SDK's form)."""
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return _as_text(content) or ""


def first_answer(answers: list) -> str | None:
    """The ground truth of a list of acceptable answers (OpenAI Evals' ``ideal``, Inspect's ``target``): the
    first, as the one reference F1, BLEU, ROUGE and the judge's similarity compare with."""
    return _as_text(answers[0]) if answers else None


def sample_text(sample: dict) -> str | None:
    """The answer in an OpenAI Evals API sample object: its ``output_text``, else the content of its
    ``output`` messages (assistant ones; several joined by a blank line); None when it has neither as text."""
    if _as_text(sample.get("output_text")) is not None:
        return _as_text(sample["output_text"])
    out = sample.get("output")
    if not isinstance(out, list):
        return None
    texts = [_as_text(m.get("content")) for m in out if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
    return "\n\n".join(texts) if texts and all(t is not None for t in texts) else None


def final_text(messages: list) -> str:
    """An agent's answer: the text of its last assistant message that has text (either message form)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "assistant":
            c = m.get("content")
            parts = [p.get("text") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)] \
                if isinstance(c, list) else [_as_text(c)]
            text = "\n".join(p for p in parts if p)
            if text:
                return text
    return ""


def _as_text(v: Any) -> str | None:
    """Text as is; a finite number as its text (42 -> "42", 0.5 -> "0.5"); anything else None."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return str(v)
    return None
