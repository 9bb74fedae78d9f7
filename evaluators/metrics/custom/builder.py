"""The dashboard's New metric form as a metric file: name, description, fields, scale, direction, threshold and
rubric -> our template's text (editable afterwards); and a definition's text exported as the other format
(our template <-> Prompty)."""
from __future__ import annotations

import re
from typing import Any

import yaml

from evaluators.metrics.custom import prompty, template
from evaluators.metrics.custom.common import front_matter

# scale -> (kind, range, whole numbers, what the judge is asked to write)
SCALES: dict[str, tuple[str, list[float], bool, str]] = {
    "1-5": ("score", [1, 5], True, '"score": <whole number from 1 to 5>'),
    "1-10": ("score", [1, 10], True, '"score": <whole number from 1 to 10>'),
    "0-1": ("score", [0, 1], False, '"score": <number from 0 to 1>'),
    "pass/fail": ("score", [0, 1], True, '"score": <1 if it passes, 0 if it fails>'),
    "labels": ("label", [0, 1], True, '"label": <true if the property holds, else false>'),
}
TITLES = {"query": "The user's message", "response": "The response to judge", "context": "The context it was given",
          "ground_truth": "The expected answer"}


def build_template(name: str, description: str, fields: list[str], scale: str, higher_is_better: bool,
                   threshold: float, rubric: str, categories: list[str] | None = None) -> str:
    """Our template's text for the form's answers (checked when loaded, like any file)."""
    kind, rng, integer, answer = SCALES[scale]
    meta: dict[str, Any] = {"name": name, "description": description, "fields": list(fields), "kind": kind}
    if kind == "score":
        meta.update({"range": rng, "integer": integer, "higher_is_better": bool(higher_is_better),
                     "threshold": threshold})
    elif categories:
        meta["categories"] = list(categories)
    meta.update({"reply_key": "score" if kind == "score" else "label", "reason_key": "reason"})
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None).strip()
    blocks = "\n\n".join(f"{TITLES.get(f, f)}:\n{{{{{f}}}}}" for f in fields)
    extra = "".join(f', "{c}": <true or false>' for c in categories or []) if kind == "label" else ""
    return (f"---\n{head}\n---\n[system]\nYou are an evaluator. You judge one property of an AI assistant's output "
            f"and nothing else. You are strict, consistent and brief.\n[user]\nProperty to judge: "
            f"{description.strip() or name}\n\n{rubric.strip()}\n\n{blocks}\n\nAnswer with exactly one JSON object "
            f"and nothing else:\n{{\"reason\": \"<one or two sentences>\", {answer}{extra}}}\n")


def to_prompty(text: str) -> str:
    """Our template as a Prompty file: the same settings (inputs from its fields), its sections as role lines."""
    meta, _, body, line = front_matter(text, "template")
    system, user = template.split_sections(body, "template", line)
    head = {"name": meta.get("name"), "description": meta.get("description", ""),
            "model": {"api": "chat"},
            "inputs": {f: {"type": "string"} for f in meta.get("fields") or []},
            **{k: v for k, v in meta.items() if k not in ("name", "description", "fields")}}
    dumped = yaml.safe_dump(head, sort_keys=False, allow_unicode=True).strip()
    parts = ([f"system:\n{system}"] if system else []) + [f"user:\n{user}"]
    return f"---\n{dumped}\n---\n" + "\n\n".join(parts) + "\n"


def to_template(text: str) -> str:
    """A Prompty file as our template, when its body is plain text and ``{{field}}`` placeholders (no Jinja
    statements) and its roles are system then user. Raises ValueError saying what stands in the way."""
    meta, _, body, _ = front_matter(text, "prompty")
    if re.search(r"\{%|\{#", body) or re.search(r"\{\{(?!\s*\w+\s*\}\})", body):
        raise ValueError("its prompt uses Jinja2 statements or expressions, which our template has no form for")
    parts = prompty.ROLE_LINE.split(body)
    roles = [parts[i].lower() for i in range(1, len(parts), 2)]
    if roles not in (["user"], ["system", "user"]):
        raise ValueError(f"its messages are {', '.join(roles)}; our template has a system then a user message")
    texts = [parts[i + 1].strip() for i in range(1, len(parts), 2)]
    ours = {"name": prompty.metric_name(str(meta.get("name") or "")), "description": meta.get("description", ""),
            "fields": list(meta.get("inputs") or {}),
            **{k: v for k, v in meta.items() if k in ("kind", "range", "integer", "higher_is_better", "threshold",
                                                      "reply_key", "reply_pattern", "reason_key", "categories")}}
    head = yaml.safe_dump(ours, sort_keys=False, allow_unicode=True, default_flow_style=None).strip()
    body_out = (f"[system]\n{texts[0]}\n[user]\n{texts[1]}" if len(texts) == 2 else texts[0])
    return f"---\n{head}\n---\n{body_out}\n"


def export(text: str, fmt: str, to: str) -> str:
    """A saved definition's text in format ``to`` (template or prompty)."""
    if fmt == to:
        return text
    if (fmt, to) == (template.FORMAT, prompty.FORMAT):
        return to_prompty(text)
    if (fmt, to) == (prompty.FORMAT, template.FORMAT):
        return to_template(text)
    raise ValueError(f"a {fmt} definition is exported as itself only")


__all__ = ["SCALES", "build_template", "export"]
