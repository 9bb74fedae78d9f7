"""Judge prompt templates: load, render, and parse the judge's reply.

A template is a text file. ``{{ name }}`` placeholders (and WildBench's ``{$name}``)
are filled from the row; an optional ``[system]`` section before a ``[user]`` line
becomes the system message. Built-in templates live in ``evaluators/metrics/prompts``; a
user's own file can replace any of them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from evaluators.core.errors import UsageError

# Built-in prompts are data kept beside the metrics that use them (read as files, not imported).
PROMPTS_DIR = Path(__file__).resolve().parent.parent / "metrics" / "prompts"
# ``--template relevance=builtin:relevance_turn.md`` picks a built-in template by name; anything else is a path.
BUILTIN_PREFIX = "builtin:"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}|\{\$([A-Za-z_][A-Za-z0-9_]*)\}")
# Placeholders a template may use; anything else is a setup error, found before any call.
KNOWN_PLACEHOLDERS = {"query", "response", "context", "ground_truth", "history", "user_query", "model_output",
                      "checklist", "candidate_A", "candidate_B"}
KNOWN_PLACEHOLDERS |= {"tool_definitions", "tool_calls"}  # agents: the tools' schemas, the calls judged
_ALIASES = {"user_query": "query", "model_output": "response"}  # WildBench names


@dataclass(frozen=True)
class Template:
    """A loaded template. ``sha`` identifies its exact text (recorded with every result)."""

    source: str
    system: str | None
    user: str
    sha: str
    # request parameters sent with each call made from this template, beside the judge's own: a Prompty
    # file's (``response_format``...), ``top_logprobs`` for scores from probabilities; as (name, JSON) pairs
    request: tuple[tuple[str, str], ...] = ()
    # a user's template (a file of theirs, a metric of theirs) rather than one of ours: rendered under the bounds
    # of ``evaluators.metrics.custom.bounded`` (our form here: its size checked before it is made)
    bounded: bool = False

    def request_params(self) -> dict:
        """:attr:`request` as the keyword arguments of ``JudgeClient.complete`` (``extra``)."""
        return {k: json.loads(v) for k, v in self.request}

    @property
    def placeholders(self) -> set[str]:
        text = (self.system or "") + self.user
        return {_ALIASES.get(a or b, a or b) for a, b in _PLACEHOLDER.findall(text)}

    def render(self, values: dict[str, str]) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled.

        A missing ``{{name}}`` value becomes '(none)'; WildBench's ``{$name}`` placeholders are
        filled verbatim, an empty value staying empty, as WildBench itself fills them.
        """

        def fill(text: str) -> str:
            def sub(m: re.Match) -> str:
                key = _ALIASES.get(m.group(1) or m.group(2), m.group(1) or m.group(2))
                value = values.get(key)
                if m.group(2):
                    return "" if value is None else str(value)
                return str(value) if value not in (None, "") else "(none)"

            return _PLACEHOLDER.sub(sub, text)

        if self.bounded:
            self._check_size(values)
        msgs = [{"role": "system", "content": fill(self.system)}] if self.system else []
        msgs.append({"role": "user", "content": fill(self.user)})
        return msgs

    def _check_size(self, values: dict) -> None:
        """A user's template in our form fills placeholders and nothing else, so its render is linear in its
        text; only its size needs a bound (a placeholder written 10,000 times over a long field), and the size
        is known before the text is made. Raises RenderBoundError past the bound."""
        from evaluators.metrics.custom.bounded import MAX_CHARS, RenderBoundError

        size = len(self.system or "") + len(self.user)
        for key, (count, verbatim) in _placeholder_counts((self.system or "") + "\n" + self.user).items():
            v = values.get(key)
            size += count * (len(str(v)) if v is not None and (verbatim or v != "") else 6)
        if size > MAX_CHARS:
            raise RenderBoundError(f"the rendered prompt would have {size:,} characters, past the {MAX_CHARS:,} a "
                                   "prompt may have (a judge's context is far smaller)", "size")


def parse_template(text: str, source: str, bounded: bool = False) -> Template:
    """Parse template text; raises UsageError naming the file on an unknown placeholder.

    Args:
        bounded: a user's template, rendered under a size bound (:attr:`Template.bounded`).
    """
    system, user = None, text
    stripped = text.lstrip()
    if stripped.startswith("[user]"):  # a [user] line with no [system] before it: the header is not the text
        user = stripped[len("[user]"):]
    elif stripped.startswith("[system]"):
        body = stripped[len("[system]"):]
        if "\n[user]" not in body:
            raise UsageError(f"{source}: a template with a [system] section needs a [user] line")
        system, user = body.split("\n[user]", 1)
        system = system.strip()
    user = user.strip("\n")
    unknown = {a or b for a, b in _PLACEHOLDER.findall(text)} - KNOWN_PLACEHOLDERS
    if unknown:
        raise UsageError(
            f"{source}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(KNOWN_PLACEHOLDERS))}"
        )
    if not user.strip():
        raise UsageError(f"{source}: the template has no user message")
    return Template(source, system, user, hashlib.sha256(text.encode()).hexdigest()[:12], bounded=bounded)


def load_template(name_or_path: str | Path) -> Template:
    """Load a built-in template by its file name (e.g. ``coherence.md``), or a template file by path.

    A bare name of a built-in always means the built-in; anything else is a path that must exist
    (a missing file is an error, never a silent fall back to a built-in prompt).
    """
    name = str(name_or_path)
    builtin = PROMPTS_DIR / name
    if Path(name).name == name and builtin.is_file():
        return parse_template(builtin.read_text(encoding="utf-8"), name)
    return parse_template(load_user_template_text(name), name, bounded=True)


def load_user_template_text(path: str | Path, metric: str | None = None) -> str:
    """The text of a user's template file, read from ``path`` as given (relative to the working folder),
    or of a built-in template named ``builtin:<file name>``.

    Raises:
        UsageError: the file does not exist, cannot be read, or is not UTF-8 (naming the metric and path).
    """
    what = f"template for {metric}" if metric else "template"
    text = str(path)
    if text.startswith(BUILTIN_PREFIX):  # a built-in by name, said explicitly
        name = text[len(BUILTIN_PREFIX):]
        builtin = PROMPTS_DIR / name
        if Path(name).name != name or not builtin.is_file():
            known = ", ".join(sorted(f.name for f in PROMPTS_DIR.glob("*.md")))
            raise UsageError(f"{what}: no built-in template '{name}'; built-in: {known}")
        return builtin.read_text(encoding="utf-8")
    p = Path(path).expanduser()
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = (f"; for the built-in template of that name write {BUILTIN_PREFIX}{text}"
                if Path(text).name == text and (PROMPTS_DIR / text).is_file() else "")
        raise UsageError(f"{what}: file not found: {path} (looked in {p.resolve().parent}){hint}") from None
    except IsADirectoryError:
        raise UsageError(f"{what}: {path} is a folder, not a file") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: template is not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"{what}: cannot read {path}: {e.strerror}") from None


# ---------------------------------------------------------------- what a judge call was given
# The Azure AI Evaluation SDK (1.18) records, in ``<metric>_properties.sample_input``, the inputs of
# its prompt (not the prompt text): ``json.dumps([{"role": "user", "content": json.dumps(inputs)}])``,
# ``inputs`` being the prompt's declared fields in the order query, response, context, ground_truth.
# We write the same thing for the fields our template filled, with the text it filled them with.
SDK_FIELD_ORDER = ("query", "response", "context", "ground_truth")


def filled_fields(template: Template, values: dict) -> dict[str, str]:
    """Field -> the text ``template.render(values)`` puts in its place, for each field it uses.

    Order: the SDK's (query, response, context, ground_truth), then any other field by name.
    """
    filled: dict[str, str] = {}
    for key, verbatim in _fields_plan((template.system or "") + "\n" + template.user):
        v = values.get(key)
        if verbatim:  # WildBench's {$name}: verbatim, empty stays empty (as render() fills it)
            filled[key] = "" if v is None else str(v)
        else:
            filled[key] = str(v) if v not in (None, "") else "(none)"
    return filled


@functools.lru_cache(maxsize=64)
def _placeholder_counts(text: str) -> dict[str, tuple[int, bool]]:
    """Field -> (placeholders of it in ``text``, filled verbatim), read once per template."""
    counts: dict[str, tuple[int, bool]] = {}
    for m in _PLACEHOLDER.finditer(text):
        key = _ALIASES.get(m.group(1) or m.group(2), m.group(1) or m.group(2))
        n, verbatim = counts.get(key, (0, bool(m.group(2))))
        counts[key] = (n + 1, verbatim)
    return counts


@functools.lru_cache(maxsize=64)
def _fields_plan(text: str) -> tuple[tuple[str, bool], ...]:
    """(field, filled verbatim) for each field a template's text uses, once, in :func:`filled_fields`'s
    order; the first placeholder of a field decides how it is filled. Read once per template, not per row."""
    first: dict[str, bool] = {}
    for m in _PLACEHOLDER.finditer(text):
        first.setdefault(_ALIASES.get(m.group(1) or m.group(2), m.group(1) or m.group(2)), bool(m.group(2)))
    order = [f for f in SDK_FIELD_ORDER if f in first] + sorted(set(first) - set(SDK_FIELD_ORDER))
    return tuple((f, first[f]) for f in order)


def sample_input(template: Template, values: dict) -> str:
    """``<metric>_properties.sample_input`` as SDK 1.18 serialises it, for one judge call."""
    return json.dumps([{"role": "user", "content": json.dumps(filled_fields(template, values))}])
