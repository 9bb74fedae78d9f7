"""OpenAI Evals API graders, in their JSON form, as metrics: ``string_check`` and ``text_similarity`` computed
here, ``score_model`` and ``label_model`` asked of the run's judge. A file holds one grader, a list of them, or
an eval's ``{"testing_criteria": [...]}``.

Their templates read ``{{item.<column>}}`` (a dataset column) and ``{{sample.output_text}}`` (the response);
both are read as fields of the row. ``text_similarity`` scores with our own classic metrics (``bleu``, ``gleu``,
``meteor``, ``rouge_1``-``rouge_5`` and ``rouge_l`` the SDK's way; ``fuzzy_match`` as Python's ``difflib`` ratio);
``cosine`` needs an embedding model and is refused. Model graders' ``model`` and ``sampling_params`` are
not used: the run's judge answers them, asked to reply in a JSON object (our instruction, appended).
"""
from __future__ import annotations

import difflib
import json
import re
from typing import Any, Callable, Mapping

from evaluators.core.kinds import Verdict
from evaluators.core.registry import MetricSpec
from evaluators.core.replies import ReplyError, answer_body, objects_with, reason_text
from evaluators.metrics.custom.common import DefinitionError, Settings, check_name, judge_spec
from evaluators.metrics.custom.prompty import metric_name
from evaluators.metrics.custom.replies import parse_reply
from evaluators.metrics.custom.rows import row_tasks

FORMAT = "openai_grader"
TYPES = ("string_check", "text_similarity", "score_model", "label_model")
_REF = re.compile(r"\{\{\s*(item\.[A-Za-z_][A-Za-z0-9_]*|sample\.output_text|sample\.[A-Za-z_.]+|[^{}]*?)\s*\}\}")
SIMILARITY = {"bleu": "bleu", "gleu": "gleu", "meteor": "meteor", "rouge_l": "rougeL",
              **{f"rouge_{n}": f"rouge{n}" for n in range(1, 6)}}
OPERATIONS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "like": lambda a, b: b in a,
              "ilike": lambda a, b: b.lower() in a.lower()}


def _fields(text: str, where: str, key: str) -> tuple[str, list[str]]:
    """A grader template with ``{{item.x}}`` -> ``{{x}}`` and ``{{sample.output_text}}`` -> ``{{response}}``."""
    fields: list[str] = []

    def sub(m: re.Match) -> str:
        ref = m.group(1)
        if ref == "sample.output_text":
            field = "response"
        elif ref.startswith("item."):
            field = ref[5:]
        else:
            raise DefinitionError(where, f"'{{{{{ref}}}}}' is not supported: a grader here reads {{{{item.<column>}}}} "
                                         "and {{sample.output_text}}", None, key)
        if field not in fields:
            fields.append(field)
        return "{{" + field + "}}"

    return _REF.sub(sub, text), fields


def _fill(text: str, row: Mapping[str, Any]) -> str:
    return re.sub(r"\{\{(\w+)\}\}", lambda m: "" if row.get(m.group(1)) is None else str(row[m.group(1)]), text)


def _computed(g: dict, name: str, where: str, definition: dict) -> MetricSpec:
    kind = g["type"]
    if not isinstance(g.get("input"), str) or not isinstance(g.get("reference"), str):
        raise DefinitionError(where, "needs 'input' and 'reference' templates (text)", None, "input")
    inp, f1 = _fields(g["input"], where, "input")
    ref, f2 = _fields(g["reference"], where, "reference")
    fields = list(dict.fromkeys(f1 + f2))
    if kind == "string_check":
        op = OPERATIONS.get(g.get("operation"))
        if op is None:
            raise DefinitionError(where, f"operation {g.get('operation')!r} is not one of {', '.join(OPERATIONS)}",
                                  None, "operation")
        score: Callable[[str, str], float] = lambda a, b: float(op(a, b))  # noqa: E731
        threshold = 1.0
    else:
        metric = g.get("evaluation_metric")
        if metric == "fuzzy_match":
            score = lambda a, b: difflib.SequenceMatcher(None, a, b).ratio()  # noqa: E731
        elif metric in SIMILARITY:
            from evaluators.core.registry import get_metric

            ours = SIMILARITY[metric]
            score = lambda a, b: get_metric(ours).compute({"response": a, "ground_truth": b})[  # noqa: E731
                get_metric(ours).primary]
        else:
            raise DefinitionError(where, f"{metric!r} is not supported (one of fuzzy_match, "
                                         f"{', '.join(SIMILARITY)}; cosine needs an embedding model)", None,
                                  "evaluation_metric")
        threshold = g.get("pass_threshold", 0.5)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise DefinitionError(where, f"must be a number from 0 to 1, got {threshold!r}", None, "pass_threshold")

    def compute(row: Mapping[str, Any]) -> dict[str, float]:
        return {name: score(_fill(inp, row), _fill(ref, row))}

    return MetricSpec(name=name, family="custom", kind="score", fields=tuple(fields), conversation_fields=None,
                      prefix=name, outputs=(name,), score_range=(0.0, 1.0), higher_is_better=True,
                      default_threshold=float(threshold), description=f"OpenAI {kind} grader",
                      compute=compute, row_tasks=row_tasks, definition=definition,
                      params=(("grader", kind), ("operation", g.get("operation") or g.get("evaluation_metric"))))


def _messages(g: dict, where: str) -> tuple[str, list[str]]:
    """A model grader's ``input`` messages as a Prompty body (role lines), placeholders as our fields."""
    msgs = g.get("input")
    if isinstance(msgs, str):
        msgs = [{"role": "user", "content": msgs}]
    if not isinstance(msgs, list) or not msgs:
        raise DefinitionError(where, "a model grader's input is a list of messages (role, content)", None, "input")
    parts, fields = [], []
    for k, m in enumerate(msgs):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, dict) and content.get("type") in ("input_text", "output_text"):
            content = content.get("text")
        role = m.get("role") if isinstance(m, dict) else None
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise DefinitionError(where, "each message needs a role (system, developer, user, assistant) and text "
                                         "content", None, f"input[{k}]")
        text, f = _fields(content, where, f"input[{k}]")
        fields += [x for x in f if x not in fields]
        parts.append(f"{role}:\n{text}")
    return "\n".join(parts), fields


def _judged(g: dict, name: str, where: str, definition: dict) -> MetricSpec:
    body, fields = _messages(g, where)
    if g["type"] == "score_model":
        rng = g.get("range", [0, 1])
        lo_hi = f"{rng[0]} to {rng[1]}" if isinstance(rng, list) and len(rng) == 2 else "the scale"
        body += (f"\n\nReply with one JSON object and nothing else: {{\"reason\": \"<a sentence or two>\", "
                 f"\"score\": <a number from {lo_hi}>}}")
        meta = {"name": name, "kind": "score", "range": rng, "integer": False,
                "threshold": g.get("pass_threshold", (rng[0] + rng[1]) / 2 if isinstance(rng, list) and len(rng) == 2
                                   else None), "description": "OpenAI score_model grader"}
        return judge_spec(Settings(meta, {}, where), ("prompty", body, where), definition, parse_reply, fields=fields)
    labels, passing = g.get("labels"), g.get("passing_labels")
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise DefinitionError(where, "a label_model grader lists its labels", None, "labels")
    if not isinstance(passing, list) or not passing or set(passing) - set(labels):
        raise DefinitionError(where, "passing_labels must be some of the labels", None, "passing_labels")
    body += (f"\n\nReply with one JSON object and nothing else: {{\"reason\": \"<a sentence or two>\", "
             f"\"label\": \"<one of: {', '.join(labels)}>\"}}")
    meta = {"name": name, "kind": "label", "description": f"OpenAI label_model grader (passing: {', '.join(passing)})"}
    spec = judge_spec(Settings(meta, {}, where), ("prompty", body, where), definition, _label_parser, fields=fields)
    from dataclasses import replace

    return replace(spec, params=spec.params + (("labels", tuple(labels)), ("passing_labels", tuple(passing))))


def _label_parser(spec: MetricSpec, text: str) -> Verdict:
    """A label_model's reply: its label must be one of the grader's; the metric's label is true (flagged) when
    it is not a passing one, and the judge's label leads the reason."""
    objs = objects_with(answer_body(text), "label")
    if not objs:
        raise ReplyError("no JSON object with a 'label' in the reply")
    label = objs[-1]["label"]
    if label not in spec.param("labels"):
        raise ReplyError(f"label {json.dumps(label)} is not one of {', '.join(spec.param('labels'))}")
    reason = reason_text(objs[-1], "reason")
    return Verdict({spec.primary: label not in spec.param("passing_labels")}, f"{label}: {reason}" if reason else label)


def load(text: str, source: str, version: str | None = None, name: str | None = None) -> list[MetricSpec]:
    """A grader file's metrics. Raises ``DefinitionError`` naming the file, the grader and the key."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise DefinitionError(source, f"not valid JSON: {e.msg}", getattr(e, "lineno", None)) from None
    if isinstance(data, dict) and "testing_criteria" in data:
        data = data["testing_criteria"]
    graders = data if isinstance(data, list) else [data]
    out = []
    for k, g in enumerate(graders):
        where = f"{source} (grader {k + 1})" if len(graders) > 1 else source
        if not isinstance(g, dict) or g.get("type") not in TYPES:
            got = g.get("type") if isinstance(g, dict) else type(g).__name__
            raise DefinitionError(where, f"unknown grader type {got!r} (one of {', '.join(TYPES)})", None, "type")
        gname = name if name and len(graders) == 1 else metric_name(str(g.get("name") or ""))
        check_name(gname, where)
        definition = {"format": FORMAT, "text": text, "source": source, "version": version, "index": k,
                      **({"name": name} if name else {})}
        make = _computed if g["type"] in ("string_check", "text_similarity") else _judged
        out.append(make(g, gname, where, definition))
    return out
