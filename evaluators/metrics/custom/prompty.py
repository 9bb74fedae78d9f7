"""Prompty files (``.prompty``): YAML front matter (name, description, model parameters, inputs, outputs, sample)
and a Jinja2 body cut into chat messages by ``system:`` / ``user:`` / ``assistant:`` lines, the format the Azure AI
Evaluation SDK ships its own evaluators in. The SDK's files load unchanged: a metric's kind, scale and threshold
default to a 1-5 score passing at 3 (what the SDK's quality evaluators use), and may be set in the front matter
with our template's names (``kind``, ``range``, ``threshold``, ``reply_key``...).

The body is rendered as the SDK renders it (:func:`render`): the whole text through a sandboxed Jinja2
environment (``trim_blocks``, ``keep_trailing_newline``), then split at the role lines, each message's text
stripped; so a judge is sent the same messages for the same inputs.
"""
from __future__ import annotations

import json
import re
from typing import Any

from evaluators.core.registry import MetricSpec
from evaluators.metrics.custom.bounded import RenderBoundError, environment, render_rows
from evaluators.metrics.custom.common import JUDGE_KEYS, DefinitionError, Settings, front_matter, judge_spec
from evaluators.metrics.custom.replies import parse_reply

FORMAT = "prompty"
ROLES = ("system", "user", "assistant")
# A line naming a role ("system:", "# user:"), case-insensitive, as the SDK's Prompty reader splits messages.
ROLE_LINE = re.compile(r"(?i)^\s*#?\s*(system|user|assistant|function)\s*:\s*\n", re.M)
PROMPTY_KEYS = {"name", "description", "version", "authors", "tags", "model", "inputs", "outputs", "sample",
                "template", "base", "metadata"}
# Request parameters a Prompty file's model section may set, sent with each call; the judge's own settings
# (temperature, max_tokens) stay the run's, whose defaults (0, 800) are the SDK evaluators' values.
PASSED_PARAMETERS = ("top_p", "presence_penalty", "frequency_penalty", "response_format", "stop")


def metric_name(raw: str) -> str:
    """A Prompty name ("Coherence", "Tone check") as a metric name ("coherence", "tone_check")."""
    return re.sub(r"[^a-z0-9_]+", "_", raw.strip().lower()).strip("_")


def render(body: str, values: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages of a Prompty body for ``values`` (roles in order, text stripped), rendered under the
    bounds of :mod:`evaluators.metrics.custom.bounded` (a user's Jinja2 may loop or grow without end).

    Raises:
        RenderBoundError: the render stopped at a bound or failed; the message says why.
    """
    (text,) = render_rows(body, [values])
    if isinstance(text, RenderBoundError):
        raise text
    return split_messages(text)


def split_messages(text: str) -> list[dict[str, str]]:
    """A rendered body cut into chat messages at its role lines."""
    messages: list[dict[str, str]] = []
    parts = ROLE_LINE.split(text)
    for i in range(1, len(parts), 2):
        messages.append({"role": parts[i].lower(), "content": parts[i + 1].strip()})
    return messages


def _check_body(body: str, fields: list[str], source: str, first_line: int) -> None:
    import jinja2
    from jinja2 import meta

    try:
        ast = environment().parse(body)
    except jinja2.TemplateSyntaxError as e:
        raise DefinitionError(source, f"the template is not valid Jinja2: {e.message}",
                              first_line + (e.lineno or 1) - 1, "template") from None
    except RecursionError:
        raise DefinitionError(source, "the template nests its blocks too deeply", first_line, "template") from None
    for name in sorted(meta.find_undeclared_variables(ast)):
        if name not in fields:
            m = re.search(r"\{[{%][^}]*\b" + re.escape(name) + r"\b", body)
            line = first_line + body.count("\n", 0, m.start()) if m else None
            raise DefinitionError(source, f"the template uses '{name}', which is not among the file's inputs "
                                          f"({', '.join(fields)}); add it under 'inputs'", line, "template")
    roles = [r.lower() for r in ROLE_LINE.findall(body)]
    if not roles:
        raise DefinitionError(source, "the template has no role line ('system:', 'user:' or 'assistant:' on a line "
                                      "of its own)", first_line, "template")
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise DefinitionError(source, f"role '{bad[0]}' is not one a judge takes ({', '.join(ROLES)})", first_line,
                              "template")
    lead = ROLE_LINE.split(body)[0]
    if lead.strip() and not re.fullmatch(r"\s*(\{#.*?#\}\s*)*", lead, re.S):
        raise DefinitionError(source, "text before the first role line would be lost; start with 'system:' or "
                                      "'user:'", first_line, "template")


def load(text: str, source: str, version: str | None = None, name: str | None = None) -> MetricSpec:
    """A Prompty file's text -> its metric. Raises ``DefinitionError`` naming the file, line and key."""
    meta, lines, body, body_line = front_matter(text, source)
    s = Settings(meta, lines, source)
    s.unknown(PROMPTY_KEYS | JUDGE_KEYS)
    inputs = meta.get("inputs") or {}
    if isinstance(inputs, list):
        inputs = {str(k): {} for k in inputs}
    if not isinstance(inputs, dict) or not inputs:
        raise s.fail("inputs", "list the fields the prompt reads under 'inputs' (e.g. query: {type: string})")
    fields = [str(k) for k in inputs]
    model = meta.get("model") or {}
    if not isinstance(model, dict):
        raise s.fail("model", "must be a mapping (api, parameters...)")
    if model.get("api", "chat") != "chat":
        raise s.fail("model.api", f"a judge is a chat model; api {model.get('api')!r} is not supported")
    params = model.get("parameters") or {}
    if not isinstance(params, dict):
        raise s.fail("model.parameters", "must be a mapping")
    outputs = meta.get("outputs") or {}
    settings = dict(meta)
    settings["name"] = name or metric_name(str(meta.get("name") or ""))
    if not settings["name"]:
        raise DefinitionError(source, "missing (required)", None, "name")
    if "reply_key" not in meta and "reply_pattern" not in meta and isinstance(outputs, dict) and outputs:
        settings["reply_key"] = "score" if "score" in outputs else next(iter(outputs))
    _check_body(body, fields, source, body_line)
    request = {k: params[k] for k in PASSED_PARAMETERS if k in params}
    d = {"format": FORMAT, "text": text, "source": source, "version": version or s.text("version"),
         **({"name": name} if name else {})}
    known = {k: settings[k] for k in JUDGE_KEYS if k in settings}
    spec = judge_spec(Settings(known, lines, source), (FORMAT, body, source), d, parse_reply, fields=fields)
    if request:
        from dataclasses import replace

        spec = replace(spec, params=spec.params + (("request", json.dumps(request, sort_keys=True)),))
    return spec


def trial_render(spec: MetricSpec) -> None:
    """Render a Prompty metric's body once, under the bounds, on a sample row (the file's ``sample`` inputs
    where it gives them, else a short text a field): a template that loops or grows without end is refused
    when it is saved, not found on a run's rows.

    Raises:
        DefinitionError: the trial render stopped at a bound or failed (naming the file and the key).
    """
    fmt, body, source = spec.templates.inline or (None, "", "")
    if fmt != FORMAT:
        return
    meta, lines, _, body_line = front_matter(spec.definition["text"], source)
    given = meta.get("sample") if isinstance(meta.get("sample"), dict) else {}
    row = {f: given.get(f, f"(a sample {f})") for f in spec.fields}
    (text,) = render_rows(body, [row])
    if isinstance(text, RenderBoundError):
        raise DefinitionError(source, f"a trial render on a sample row failed: {text}", body_line, "template")
