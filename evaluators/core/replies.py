"""Reading a judge's reply: the one place that knows about ``<think>`` blocks, code fences and JSON amid prose.

Every kind's parser starts from :func:`answer_body` and finds its object with :func:`json_objects` (or the
tolerant :func:`objects_with` / :func:`field_text` that WildBench's replies need), so that a reasoning
model's thoughts and a reply cut short are read the same way whatever the metric.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator


class ReplyError(ValueError):
    """The judge's reply holds no usable verdict; the message says why."""


class SkippedReply(ReplyError):
    """The judge answered that the row has nothing its metric applies to (e.g. ``"status": "skipped"``): a skip
    on the row, with the judge's reason, not an error (the SDK counts it as not applicable)."""


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def answer_body(text: str | None) -> str:
    """The part of a reply that can hold the answer.

    Closed ``<think>...</think>`` blocks are dropped. An unclosed ``<think>`` (a reply cut at ``max_tokens``
    while the model was still reasoning) is dropped with everything after it: a verdict written inside
    unfinished reasoning is a draft, not an answer. A ``</think>`` with no opener (templates that put the
    opener in the prompt) ends the reasoning: the answer follows it.

    Raises:
        ReplyError: the reply is empty.
    """
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    body = _THINK.sub(" ", text)
    low = body.lower()
    opened = low.rfind("<think>")
    if opened != -1:
        body, low = body[:opened], low[:opened]
    closed = low.rfind("</think>")
    if closed != -1:
        body = body[closed + len("</think>"):]
    return body


def json_objects(text: str) -> Iterator[dict]:
    """Every JSON object in ``text``: first those in code fences, then any ``{...}`` that parses, in order."""
    decoder = json.JSONDecoder()
    for block in _FENCE.findall(text):
        try:
            obj = json.loads(block.strip())
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        i = text.find("{", end)


def objects_with(body: str, key: str, trailing_commas: bool = False) -> list[dict]:
    """JSON objects carrying ``key``, in order (the last is the answer: a model may quote the format first).

    With ``trailing_commas``, when none parses as written, try again with trailing commas removed (the format
    WildBench's templates show ends its object with one).
    """
    found = [o for o in json_objects(body) if key in o]
    if not found and trailing_commas:
        found = [o for o in json_objects(_TRAILING_COMMA.sub(r"\1", body)) if key in o]
    return found


def field_text(body: str, name: str) -> Any:
    """Tolerant field-by-field fallback: ``"name": "text"`` or ``"name": 7`` anywhere in the reply (last wins)."""
    m = None
    for m in re.finditer(r'"%s"\s*:\s*("(?:[^"\\]|\\.)*"|[^,\n}]+)' % re.escape(name), body):
        pass
    if m is None:
        return None
    raw = m.group(1).strip()
    if raw.startswith('"'):
        try:
            return json.loads(raw.replace("\n", "\\n"))
        except ValueError:
            return raw.strip('"')
    return raw


def tolerant_fields(body: str, key: str, names: tuple[str, ...]) -> dict[str, Any]:
    """``names`` read from the last JSON object carrying ``key`` (trailing commas forgiven); when none
    parses, each name found on its own with :func:`field_text`. A missing name is None."""
    objs = objects_with(body, key, trailing_commas=True)
    if objs:
        return {n: objs[-1].get(n) for n in names}
    return {n: field_text(body, n) for n in names}


def as_text(v: Any) -> str | None:
    """A reply's field as text: a list one item a line, any other non-text value as JSON; None stays None."""
    if v is None:
        return None
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return v if isinstance(v, str) else json.dumps(v)


def reason_text(obj: dict, *keys: str) -> str:
    """The first of ``keys`` present in ``obj``, as text ("" when none)."""
    for key in keys:
        if key in obj:
            value = obj[key]
            return value if isinstance(value, str) else json.dumps(value)
    return ""


@dataclass(frozen=True)
class ParsedReply:
    score: float
    reason: str


def parse_score_reply(text: str, low: float, high: float, integer: bool = True) -> ParsedReply:
    """Extract ``{"reason": ..., "score": n}`` from a judge reply.

    Accepts the object bare, in a code fence, or amid prose or a ``<think>`` block;
    the last object carrying a score wins (a model may quote the format first).

    Raises:
        ReplyError: no object with a score, a score that is not a number (or not whole
            when ``integer``), or a score outside ``[low, high]``. Never a guess.
    """
    candidates = objects_with(answer_body(text), "score")
    if not candidates:
        raise ReplyError("no JSON object with a 'score' in the reply")
    obj = candidates[-1]
    raw = obj["score"]
    if isinstance(raw, bool):
        raise ReplyError(f"score is not a number: {raw!r}")
    if isinstance(raw, str):
        try:
            raw = float(raw.strip())
        except ValueError:
            raise ReplyError(f"score is not a number: {obj['score']!r}") from None
    if not isinstance(raw, (int, float)) or not -1e300 < raw < 1e300:  # NaN, ±Infinity (1e999), absurd integers
        raise ReplyError(f"score is not a number: {obj['score']!r}")
    if integer and float(raw) != int(raw):
        raise ReplyError(f"score must be a whole number, got {obj['score']!r}")
    if not (low <= raw <= high):
        raise ReplyError(f"score {obj['score']!r} is outside {low:g}-{high:g}")
    return ParsedReply(float(raw), reason_text(obj, "reason", "explanation"))
