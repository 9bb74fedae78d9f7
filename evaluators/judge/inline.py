"""The prompt of a metric defined in a file (``JudgeTemplates.inline``) as a :class:`Template`: our template
form rendered as the built-ins are, a Prompty body rendered with Jinja2 the way the Azure SDK renders it.

Its ``sha`` (recorded with each result and part of every cache key) covers the prompt's text, the metric's
version and its settings (a probability-weighted score asks the judge for more than a sampled one).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from evaluators.core.registry import MetricSpec
from evaluators.judge.templates import Template
from evaluators.metrics.custom import prompty
from evaluators.metrics.custom.template import split_sections

TOP_LOGPROBS = 20  # alternatives asked for each token when a metric scores from probabilities (the API's most)


@dataclass(frozen=True)
class PromptyTemplate(Template):
    """A Jinja2 body cut into messages at its role lines (``user`` holds the body)."""

    def render(self, values: dict[str, Any]) -> list[dict[str, str]]:
        return prompty.render(self.user, {k: "" if v is None else v for k, v in values.items()})


def inline_template(spec: MetricSpec) -> Template:
    fmt, text, source = spec.templates.inline
    request = dict(json.loads(spec.param("request"))) if "request" in dict(spec.params) else {}
    if "logprobs" in dict(spec.params) and spec.param("logprobs"):
        request["top_logprobs"] = TOP_LOGPROBS
    pairs = tuple((k, json.dumps(v, sort_keys=True)) for k, v in sorted(request.items()))
    ident = json.dumps([fmt, text, spec.name, spec.version, [list(p) for p in spec.params]], sort_keys=True,
                       default=str)
    sha = hashlib.sha256(ident.encode()).hexdigest()[:12]
    if fmt == prompty.FORMAT:
        return PromptyTemplate(source, None, text, sha, pairs, bounded=True)
    system, user = split_sections(text, source, 1)
    return Template(source, system, user, sha, pairs, bounded=True)
