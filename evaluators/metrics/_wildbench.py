"""Shared by the two WildBench metrics: planning a row's judge inputs and parsing the judge's reply.

Inputs are filled as WildBench fills its own templates (``evaluators.suites.wildbench``): earlier turns as
``USER:`` / ``ASSISTANT:`` blocks, the last user turn as the query, one ``- item`` line per checklist
item, each response cut to 1,000 words with a truncation marker and an empty one shown as an explicit
marker. The facts stored with each verdict (lengths, empty or truncated, task groups, model names)
feed the leaderboard aggregates.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from evaluators.core.kinds import Verdict
from evaluators.judge.templates import ReplyError, _json_objects
from evaluators.suites.wildbench import (LABEL_REWARD, checklist_text, conversation_of, is_excluded, model_name, shorten, shown_response, tags_of)

if TYPE_CHECKING:
    from evaluators.data.dataset import Dataset
    from evaluators.core.registry import MetricSpec

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
NO_QUERY = "no user request: give messages, conversation_input, or history with user_query"


def _inputs(ds: "Dataset", i: int) -> tuple[dict, dict[str, Any], str | None]:
    rec, canon = ds.records[i], ds.canonical(i)
    history, query = conversation_of(rec, canon.get("query"))
    values = {"history": history, "query": query, "checklist": checklist_text(canon.get("checklist"))}
    return rec, values, canon.get("response")


def score_row_tasks(ds: "Dataset", i: int, spec: "MetricSpec") -> list:
    """One task: the row's response judged alone (turn 0)."""
    from evaluators.run.runner import RowTask

    rec, values, response = _inputs(ds, i)
    shown = shorten(response or "")
    facts = {"model": _name(rec.get("model") or rec.get("model_test")), "length": len(shown),
             "excluded": is_excluded(shown), "groups": tags_of(rec)}
    if values["query"] is None:
        return [RowTask(0, values, "single", skip=NO_QUERY)]
    return [RowTask(0, {**values, "response": shown}, "single", facts=facts)]


def pairwise_row_tasks(ds: "Dataset", i: int, spec: "MetricSpec") -> list:
    """Turn 0 shows candidate_A as A; with the ``both_orders`` param, turn 1 shows the pair swapped."""
    from evaluators.run.runner import RowTask

    rec, values, a = _inputs(ds, i)
    b = rec.get("candidate_B")
    shown_a, shown_b = shown_response(a), shown_response(b if isinstance(b, str) else None)
    facts = {"model_A": _name(rec.get("model_A")) or "A", "model_B": _name(rec.get("model_B")) or "B",
             "len_A": len(shown_a), "len_B": len(shown_b),
             "excluded": is_excluded(shown_a) or is_excluded(shown_b), "groups": tags_of(rec)}
    if values["query"] is None or not isinstance(b, str):
        why = NO_QUERY if values["query"] is None else "no candidate_B (text) to compare with"
        return [RowTask(0, values, "single", skip=why)]
    tasks = [RowTask(0, {**values, "candidate_A": shown_a, "candidate_B": shown_b}, "single", facts=facts)]
    if dict(spec.params).get("both_orders"):
        tasks.append(RowTask(1, {**values, "candidate_A": shown_b, "candidate_B": shown_a}, "single", facts=facts))
    return tasks


def _name(v: Any) -> str | None:
    return model_name(v) if v else None


# ---------------------------------------------------------------- replies
def _body(text: str | None) -> str:
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    body = _THINK.sub(" ", text)
    low = body.lower()
    if "<think>" in low:  # an unclosed think block: the answer can only follow it
        body = body[low.rfind("</think>") + 8:] if "</think>" in low else ""
    return body


def _objects(body: str, key: str) -> list[dict]:
    """JSON objects carrying ``key``: as written, then with trailing commas removed (the format the
    WildBench templates show ends its object with one)."""
    found = [o for o in _json_objects(body) if key in o]
    if not found:
        found = [o for o in _json_objects(_TRAILING_COMMA.sub(r"\1", body)) if key in o]
    return found


def _field(body: str, name: str) -> Any:
    """Tolerant field-by-field fallback: ``"name": "text"`` or ``"name": 7`` anywhere in the reply."""
    m = None
    for m in re.finditer(r'"%s"\s*:\s*("(?:[^"\\]|\\.)*"|[^,\n}]+)' % re.escape(name), body):
        pass  # the last occurrence wins (a model may quote the format first)
    if m is None:
        return None
    raw = m.group(1).strip()
    if raw.startswith('"'):
        try:
            return json.loads(raw.replace("\n", "\\n"))
        except ValueError:
            return raw.strip('"')
    return raw


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return v if isinstance(v, str) else json.dumps(v)


def _fields(body: str, key: str, names: tuple[str, ...]) -> dict[str, Any]:
    objs = _objects(body, key)
    if objs:
        return {n: objs[-1].get(n) for n in names}
    return {n: _field(body, n) for n in names}


def parse_score_reply(spec: "MetricSpec", text: str) -> Verdict:
    """``{"strengths", "weaknesses", "score"}`` -> verdict; the score may be a string ("7").

    Raises:
        ReplyError: no score, a score that is not a number, or one outside the metric's range.
    """
    body = _body(text)
    got = _fields(body, "score", ("strengths", "weaknesses", "score"))
    raw = got["score"]
    if raw is None:
        raise ReplyError("no 'score' in the reply")
    if isinstance(raw, bool):
        raise ReplyError(f"score is not a number: {raw!r}")
    try:
        score = float(str(raw).strip().strip("[]").strip())
    except ValueError:
        raise ReplyError(f"score is not a number: {raw!r}") from None
    lo, hi = spec.score_range
    if score != score or not lo <= score <= hi:
        raise ReplyError(f"score {raw!r} is outside {lo:g}-{hi:g}")
    p = spec.prefix
    strengths, weaknesses = _text(got["strengths"]), _text(got["weaknesses"])
    reason = "\n".join(x for x in (strengths and f"Strengths: {strengths}", weaknesses and f"Weaknesses: {weaknesses}") if x)
    return Verdict({spec.primary: score, f"{p}_strengths": strengths, f"{p}_weaknesses": weaknesses}, reason or None)


_PAIR_FIELDS = {"analysis of A": "analysis_A", "analysis of B": "analysis_B", "reason of A=B": "reason_tie",
                "reason of A>B": "reason_A", "reason of B>A": "reason_B"}


def normalise_choice(raw: Any) -> str:
    """``" [A+] "`` -> ``"A+"``; raises ReplyError unless it is one of A++, A+, A=B, B+, B++."""
    label = re.sub(r"[\s\[\]`'\"]", "", str(raw)).upper() if raw is not None else ""
    if label not in LABEL_REWARD:
        raise ReplyError(f"choice {raw!r} is not one of A++, A+, A=B, B+, B++")
    return label


def parse_pairwise_reply(spec: "MetricSpec", text: str) -> Verdict:
    """The pairwise JSON -> verdict: the label as shown, its reward for the reply shown as A, and
    each analysis and reason.

    Raises:
        ReplyError: no choice, or a choice that is not one of the five labels.
    """
    body = _body(text)
    got = _fields(body, "choice", (*_PAIR_FIELDS, "choice"))
    if got["choice"] is None:
        raise ReplyError("no 'choice' in the reply")
    label = normalise_choice(got["choice"])
    details = {short: _text(got[long]) for long, short in _PAIR_FIELDS.items()}
    reason = " | ".join(f"{k}: {details[v]}" for k, v in (("A>B", "reason_A"), ("B>A", "reason_B"),
                                                           ("A=B", "reason_tie")) if details[v])
    return Verdict({spec.primary: float(LABEL_REWARD[label]), "choice": label, **details}, reason or None)
