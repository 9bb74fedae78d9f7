"""Shared by the judged agent metrics (intent_resolution, task_adherence, ...): one judge call per row on the
agent's inputs, read and written as azure-ai-evaluation 1.18's agent evaluators do.

Inputs: ``query`` (text or messages), ``response`` (text or messages with tool calls and results, either form:
:mod:`evaluators.core.agent`), ``tool_definitions``, ``ground_truth``; an OpenAI chat log mapped as ``messages``
is split into query (up to the last user message) and response (the rest). The judge answers
``{"reason", "score", "status"?, "properties"?}``; the row's ``K_properties`` is the reply's ``properties``
followed by the call's usage, as the SDK writes it. A response that stops at a pending call is not judged
(the SDK's "intermediate response"), nor a row a metric finds nothing to judge in (``skip``).
"""
from __future__ import annotations

import json
from typing import Any, Callable

from evaluators.core.agent import is_intermediate, parse_json_text, sdk_messages, split_log, tool_calls, tool_names, \
    transcript
from evaluators.core.kinds import Verdict
from evaluators.core.registry import JudgeTemplates, MetricSpec, register
from evaluators.core.replies import SkippedReply, answer_body, objects_with, parse_score_reply, reason_text
from evaluators.core.tasks import RowTask

VERSION = "1"
# SDK 1.18's task_adherence and task_completion do not hand their threshold to their base class, whose default (3)
# is what they write as K_threshold; their verdict is score >= 1 whatever the threshold. Written as they write it so
# that rows compare key by key; the pass rule applied is still 1.
SDK_STATED_THRESHOLD = 3
INTERMEDIATE = "Intermediate response. Please provide the agent's final response for evaluation."
PROPS = "_properties"  # the output key holding the reply's own properties (the SDK puts them first)


def raw_inputs(ds, i: int) -> dict[str, Any]:
    """The row's agent inputs as the file gives them (a conversation's log split into query and response)."""
    if ds.shape == "conversation":
        query, response = split_log(ds.messages(i))
    else:
        query, response = ds.value(i, "query"), ds.value(i, "response")
    return {"query": parse_json_text(query), "response": sdk_messages(parse_json_text(response)),
            "tool_definitions": parse_json_text(ds.value(i, "tool_definitions")),
            "tool_calls": parse_json_text(ds.value(i, "tool_calls")),
            "ground_truth": ds.value(i, "ground_truth")}


def shown(raw: dict[str, Any], definitions: dict | None = None) -> dict[str, Any]:
    """The template's values: messages as transcripts, tool definitions as JSON."""
    defs = definitions if definitions is not None else tool_names(raw["tool_definitions"])
    calls = tool_calls(raw["response"]) or (raw["tool_calls"] if isinstance(raw["tool_calls"], list) else [])
    return {"query": transcript(raw["query"]), "response": transcript(raw["response"]),
            "tool_definitions": json.dumps(list(defs.values()), ensure_ascii=False, indent=1) if defs else None,
            "tool_calls": transcript([{"role": "assistant", "content": [c for c in calls if isinstance(c, dict)]}])
            if calls else None,
            "ground_truth": raw["ground_truth"] if isinstance(raw["ground_truth"], str) else
            (json.dumps(raw["ground_truth"], ensure_ascii=False) if raw["ground_truth"] is not None else None)}


def planner(skip: Callable[[dict], str | None] | None = None, defs: Callable[[dict], dict] | None = None,
            inputs_first: bool = False):
    """``row_tasks`` for an agent metric: one judged task per row, or a skipped one saying why (``skip`` asked
    before the intermediate-response check with ``inputs_first``, as the SDK's tool-call metrics check their
    inputs first)."""

    def row_tasks(ds, i: int, spec: MetricSpec) -> list[RowTask]:
        raw = raw_inputs(ds, i)
        why = skip(raw) if skip and inputs_first else None
        if not why and is_intermediate(raw["response"]):
            why = INTERMEDIATE
        why = why or (skip(raw) if skip else None)
        if why:
            return [RowTask(0, {}, "single", skip=why)]
        return [RowTask(0, shown(raw, defs(raw) if defs else None), "single")]

    return row_tasks


def parse(spec: MetricSpec, text: str) -> Verdict:
    """``{"reason", "score", "status", "properties"}``: the score on the metric's scale, the properties kept."""
    lo, hi = spec.score_range
    said = objects_with(answer_body(text), "status")
    if said and str(said[-1]["status"]).lower() == "skipped":  # as the SDK, before the score (it may have none)
        raise SkippedReply(reason_text(said[-1], "reason") or "the judge found nothing to judge")
    p = parse_score_reply(text, lo, hi, integer=spec.integer)
    obj = objects_with(answer_body(text), "score")[-1]
    props = obj.get("properties")
    outputs = {k: p.score for k in spec.outputs}
    outputs[PROPS] = props if isinstance(props, dict) else {}
    return Verdict(outputs, p.reason)


def properties(spec: MetricSpec, outputs: dict, threshold: float) -> dict[str, Any]:
    """The reply's own properties (the usage keys follow them), with a metric's figure computed from them."""
    props = dict(outputs.get(PROPS) or {})
    extra = _EXTRA.get(spec.name)
    if props and extra:
        props.update(extra(props))
    return props


# metric -> what it adds to non-empty reply properties (the SDK's post-processing)
_EXTRA: dict[str, Callable[[dict], dict]] = {}


def percent(part: Any, whole: Any, empty: float = 100.0) -> float:
    """``part`` of ``whole`` as a percentage rounded to 2 places; ``empty`` when ``whole`` is 0."""
    return round(part / whole * 100, 2) if whole else empty


def agent_metric(name: str, description: str, fields: tuple[str, ...], template: str, binary: bool = False,
                 outputs: tuple[str, ...] = (), skip: Callable[[dict], str | None] | None = None,
                 defs: Callable[[dict], dict] | None = None, inputs_first: bool = False,
                 extra: Callable[[dict], dict] | None = None, stated_threshold: float | None = None) -> MetricSpec:
    """Register a judged agent metric: 1-5 passing at 3, or (``binary``) 0/1 passing at 1; ``extra`` adds
    figures computed from the reply's properties; ``stated_threshold``: see :class:`MetricSpec`."""
    if extra:
        _EXTRA[name] = extra
    return register(MetricSpec(
        name=name, family="agents", kind="score", fields=fields, conversation_fields=(), prefix=name,
        outputs=(name, *outputs), score_range=(0.0, 1.0) if binary else (1.0, 5.0), higher_is_better=True,
        default_threshold=1.0 if binary else 3.0, integer=True, description=description,
        templates=JudgeTemplates(single=template), version=VERSION, parse=parse, row_tasks=planner(skip, defs, inputs_first),
        properties=properties, stated_threshold=stated_threshold))
