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
_ALIASES = {"user_query": "query", "model_output": "response"}  # WildBench names


@dataclass(frozen=True)
class Template:
    """A loaded template. ``sha`` identifies its exact text (recorded with every result)."""

    source: str
    system: str | None
    user: str
    sha: str

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

        msgs = [{"role": "system", "content": fill(self.system)}] if self.system else []
        msgs.append({"role": "user", "content": fill(self.user)})
        return msgs


def parse_template(text: str, source: str) -> Template:
    """Parse template text; raises UsageError naming the file on an unknown placeholder."""
    system, user = None, text
    stripped = text.lstrip()
    if stripped.startswith("[system]"):
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
    return Template(source, system, user, hashlib.sha256(text.encode()).hexdigest()[:12])


def load_template(name_or_path: str | Path) -> Template:
    """Load a built-in template by its file name (e.g. ``coherence.md``), or a template file by path.

    A bare name of a built-in always means the built-in; anything else is a path that must exist
    (a missing file is an error, never a silent fall back to a built-in prompt).
    """
    name = str(name_or_path)
    builtin = PROMPTS_DIR / name
    if Path(name).name == name and builtin.is_file():
        return parse_template(builtin.read_text(encoding="utf-8"), name)
    return parse_template(load_user_template_text(name), name)


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


class ReplyError(ValueError):
    """The judge's reply holds no usable score; the message says why."""


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _json_objects(text: str):
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
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    body = _THINK.sub(" ", text)
    if "<think>" in body.lower():  # unclosed think block: the answer can only follow it
        body = body[body.lower().rfind("</think>") + 8:] if "</think>" in body.lower() else ""
    candidates = [o for o in _json_objects(body) if "score" in o]
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
    reason = obj.get("reason", obj.get("explanation", ""))
    return ParsedReply(float(raw), reason if isinstance(reason, str) else json.dumps(reason))


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


class JudgeInputs:
    """Re-creates at read time what each judge call of a run was given, from the stored run spec
    (its template texts) and the stored dataset: nothing per row is stored for it.

    Args:
        dataset: the run's dataset.
        run_spec: the run's :class:`evaluators.run.runner.RunSpec`.
    """

    def __init__(self, dataset, run_spec):
        self.dataset, self.run_spec = dataset, run_spec
        self._templates: dict[str, dict[str, Template]] = {}

    def _resolved(self, spec) -> dict[str, Template]:
        if spec.name not in self._templates:
            from evaluators.run.runner import resolve_templates  # lazy: the runner imports this module

            self._templates[spec.name] = resolve_templates(spec, self.run_spec.templates, self.run_spec.template_texts)
        return self._templates[spec.name]

    def sample_input(self, spec, result) -> str | None:
        """The SDK's ``sample_input`` for one stored judge result, or None when it cannot be re-created
        exactly (the row or turn is gone, or the template in force is not the one the call used)."""
        from evaluators.run.runner import default_row_tasks

        try:
            planner = spec.row_tasks or default_row_tasks
            task = next((t for t in planner(self.dataset, result.row_idx, spec) if t.turn == result.turn), None)
            template = self._resolved(spec).get(task.mode) if task is not None else None
        except (IndexError, KeyError, UsageError):
            return None
        if template is None:
            return None
        used = (result.meta or {}).get("prompt_sha")
        if used is not None and used != template.sha:
            return None
        return sample_input(template, task.values)
