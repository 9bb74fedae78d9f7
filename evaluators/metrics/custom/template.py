"""Our own metric file: YAML front matter (the metric's settings) and a body that is the prompt, in the
built-in templates' form (an optional ``[system]`` section, then ``[user]``; ``{{field}}`` placeholders)::

    ---
    name: politeness
    fields: [response]
    kind: score
    range: [1, 5]
    ---
    Rate how polite this answer is ... {{response}} ... {"reason": "...", "score": <1-5>}
"""
from __future__ import annotations

import re
from typing import Any

from evaluators.core.registry import MetricSpec
from evaluators.metrics.custom.common import JUDGE_KEYS, DefinitionError, Settings, front_matter, judge_spec
from evaluators.metrics.custom.replies import parse_reply

FORMAT = "template"
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_placeholders(body: str, fields: list[str], source: str, first_line: int) -> None:
    """Every ``{{...}}`` in the body is a declared field; else refused, naming its line."""
    for m in PLACEHOLDER.finditer(body):
        line = first_line + body.count("\n", 0, m.start())
        name = m.group(1)
        if not _IDENT.match(name):
            raise DefinitionError(source, f"'{{{{{name}}}}}' is not a field placeholder ({{{{field}}}}: a column "
                                          "name)", line, "template")
        if name not in fields:
            raise DefinitionError(source, f"the template uses {{{{{name}}}}}, which is not among the metric's "
                                          f"fields ({', '.join(fields)}); add it to 'fields'", line, "template")


def split_sections(body: str, source: str, first_line: int) -> tuple[str | None, str]:
    """(system, user) of a body with an optional ``[system]`` section before a ``[user]`` line."""
    stripped = body.strip("\n")
    if stripped.lstrip().startswith("[system]"):
        rest = stripped.lstrip()[len("[system]"):]
        if "\n[user]" not in rest:
            raise DefinitionError(source, "a [system] section needs a [user] line after it", first_line, "template")
        system, user = rest.split("\n[user]", 1)
        return system.strip(), user.strip("\n")
    return None, stripped


def definition(text: str, source: str, version: str | None = None) -> dict[str, Any]:
    return {"format": FORMAT, "text": text, "source": source, "version": version}


def load(text: str, source: str, version: str | None = None) -> MetricSpec:
    """Our template file's text -> its metric. Raises ``DefinitionError`` naming the file, line and key."""
    meta, lines, body, body_line = front_matter(text, source)
    s = Settings(meta, lines, source)
    s.unknown(JUDGE_KEYS)
    fields = s.names("fields", required=True)
    _, user = split_sections(body, source, body_line)
    if not user.strip():
        raise DefinitionError(source, "the prompt (the text after the front matter) is empty", body_line, "template")
    check_placeholders(body, fields, source, body_line)
    d = definition(text, source, version or s.text("version"))
    return judge_spec(s, (FORMAT, body, source), d, parse_reply)
