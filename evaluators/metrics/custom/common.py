"""What every kind of metric file shares: front matter read with its lines, errors naming file, line and key,
and the :class:`MetricSpec` of a judge metric built (and checked) from its settings."""
from __future__ import annotations

import functools
import hashlib
import math
import re
from typing import Any, Iterable

from evaluators.core.errors import UsageError
from evaluators.core.registry import FIELDS, JudgeTemplates, MetricSpec
from evaluators.metrics.custom.rows import row_tasks

NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
JUDGE_KINDS = ("score", "severity", "label")
# Settings of our template's front matter (and of a Prompty file's, under its own names); any other key is a typo.
JUDGE_KEYS = {"name", "description", "fields", "kind", "range", "higher_is_better", "threshold", "reply_key",
              "reply_pattern", "reason_key", "categories", "integer", "version", "logprobs", "family"}
# A metric file's size: the SDK's Prompty files are 2-6 KB; past this a file is refused before it is parsed.
MAX_DEFINITION_BYTES = 256 * 1024
# A judge's reply a reply_pattern is matched on (replies are max_tokens long: 800 by default, ~3,200 characters).
MAX_MATCHED_CHARS = 200_000


class DefinitionError(UsageError):
    """A metric file refused when loaded: says the file, the line (when known) and the key."""

    def __init__(self, source: str, message: str, line: int | None = None, key: str | None = None):
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {key + ': ' if key else ''}{message}")
        self.source, self.line, self.key = source, line, key


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def front_matter(text: str, source: str) -> tuple[dict[str, Any], dict[str, int], str, int]:
    """Split ``---`` YAML front matter from the body.

    Returns:
        (settings, key -> line of that key in the file, body, line the body starts on).
    Raises:
        DefinitionError: no front matter, YAML that does not parse (its line), or not a mapping.
    """
    import yaml

    check_size(text, source)
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise DefinitionError(source, "a metric file starts with a '---' line and YAML front matter", 1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise DefinitionError(source, "the front matter has no closing '---' line", 1)
    head = "\n".join(lines[1:end])
    _bounded_head(head, source)
    try:
        _no_aliases(head, source)
        node = yaml.compose(head, Loader=yaml.SafeLoader)
        meta = yaml.safe_load(head)
    except RecursionError:
        raise DefinitionError(source, f"the front matter nests deeper than {MAX_HEAD_DEPTH} levels", 2) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DefinitionError(source, f"the front matter is not valid YAML: {problem}",
                              mark.line + 2 if mark is not None else None) from None
    if meta is None:
        meta, node = {}, None
    if not isinstance(meta, dict):
        raise DefinitionError(source, "the front matter must be a mapping of settings (key: value)", 2)
    key_lines = {}
    if node is not None and isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            key_lines[str(k.value)] = k.start_mark.line + 2
    for key, value in meta.items():  # YAML's "\0" escape makes one no text check of the file sees
        if _has_nul(key) or _has_nul(value):
            raise DefinitionError(source, "holds a NUL character (\\0): remove it", key_lines.get(str(key)), str(key))
    return meta, key_lines, "\n".join(lines[end + 1:]), end + 2


def _has_nul(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict) and depth < 50:
        return any(_has_nul(k, depth + 1) or _has_nul(v, depth + 1) for k, v in value.items())
    if isinstance(value, list) and depth < 50:
        return any(_has_nul(v, depth + 1) for v in value)
    return False


def check_size(text: str, source: str) -> None:
    """A definition's text is at most :data:`MAX_DEFINITION_BYTES` (UTF-8); else refused, naming the file."""
    size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > MAX_DEFINITION_BYTES else len(text)
    if size > MAX_DEFINITION_BYTES:
        raise DefinitionError(source, f"the file is {size:,} bytes; a metric file may have {MAX_DEFINITION_BYTES:,}")
    if "\x00" in text:  # no store keeps one (PostgreSQL's text refuses it), and no prompt needs one
        raise DefinitionError(source, "the file holds a NUL character (\\x00): remove it",
                              text.count("\n", 0, text.index("\x00")) + 1)


MAX_HEAD_BYTES = 64 * 1024  # a metric's settings (a Prompty's sample inputs included) are a few KB
MAX_HEAD_DEPTH = 50  # flow collections ([[[...]]], {{...}}) nested deeper than any setting needs


def _bounded_head(head: str, source: str) -> None:
    """Refuse front matter too long or nested too deep before PyYAML reads it: its pure-Python parser spent 42 s
    on 40 KB of ``[[[...]]]`` (then a RecursionError) in the dashboard's process, on every rerun of New metric."""
    if len(head) > MAX_HEAD_BYTES:
        raise DefinitionError(source, f"the front matter is {len(head):,} characters; it may have {MAX_HEAD_BYTES:,}",
                              2)
    depth = 0
    for at, c in enumerate(head):
        if c in "[{":
            depth += 1
            if depth > MAX_HEAD_DEPTH:
                raise DefinitionError(source, f"the front matter nests deeper than {MAX_HEAD_DEPTH} levels",
                                      head.count("\n", 0, at) + 2)
        elif c in "]}":
            depth = max(0, depth - 1)


def _no_aliases(head: str, source: str) -> None:
    """Refuse YAML anchors and aliases (``&a``, ``*a``) in front matter, read as events before anything is
    built: nine levels of aliases in 479 bytes stand for billions of items (41 s and 5.4 GB to load), and a
    metric's settings never need one."""
    import yaml

    for ev in yaml.parse(head, Loader=yaml.SafeLoader):
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None) is not None:
            raise DefinitionError(source, "the front matter uses a YAML anchor or alias (&name, *name); metric files "
                                          "may not (an alias can stand for gigabytes): write the value out",
                                  ev.start_mark.line + 2, "front matter")


class Settings:
    """Front-matter settings read one by one, each error naming the file, the key and its line."""

    def __init__(self, meta: dict[str, Any], key_lines: dict[str, int], source: str):
        self.meta, self.lines, self.source = meta, key_lines, source

    def fail(self, key: str, message: str) -> DefinitionError:
        return DefinitionError(self.source, message, self.lines.get(key.split(".")[0]), key)

    def unknown(self, allowed: Iterable[str]) -> None:
        extra = sorted(set(self.meta) - set(allowed))
        if extra:
            raise self.fail(extra[0], f"unknown setting (known: {', '.join(sorted(allowed))})")

    def text(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        v = self.meta.get(key)
        if v is None:
            if required:
                raise DefinitionError(self.source, "missing (required)", None, key)
            return default
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise self.fail(key, f"must be text, got {type(v).__name__}")
        return str(v)

    def flag(self, key: str, default: bool) -> bool:
        v = self.meta.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(key, f"must be true or false, got {v!r}")
        return v

    def number(self, key: str, default: float | None) -> float | None:
        v = self.meta.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(key, f"must be a number, got {v!r}")
        return float(v)

    def names(self, key: str, required: bool = False) -> list[str]:
        v = self.meta.get(key)
        if v is None:
            if required:
                raise DefinitionError(self.source, "missing (required): the dataset columns the metric reads",
                                      None, key)
            return []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise self.fail(key, "must be a list of names, e.g. [query, response]")
        return [x.strip() for x in v]


@functools.lru_cache(maxsize=64)
def reply_regex(pattern: str):
    """A ``reply_pattern`` compiled with RE2 (``google-re2``), whose matching time is linear in the reply: a
    pattern like ``^(a|aa)+$`` that Python's backtracking engine takes exponential time on cannot stall a run.
    ``.`` matches newlines too (as ``re.S`` did). Backreferences and lookarounds, which need backtracking, are
    refused. Raises ValueError saying why."""
    import re2

    opts = re2.Options()
    opts.dot_nl, opts.log_errors = True, False
    try:
        return re2.compile(pattern, opts)
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"not a regular expression this program matches ({why}): patterns are matched in time "
                         "linear in the reply (RE2), without backreferences (\\1) or lookarounds ((?=...), "
                         "(?<=...))") from None


def check_name(name: str, source: str, line: int | None = None) -> str:
    if not NAME.match(name or ""):
        raise DefinitionError(source, f"{name!r} is not a metric name: lower-case letters, digits and _ "
                                      "(starting with a letter)", line, "name")
    return name


def judge_spec(s: Settings, inline: tuple[str, str, str], definition: dict[str, Any],
               parse: Any, fields: list[str] | None = None) -> MetricSpec:
    """A judge metric's spec from its settings (our front matter's names), every one checked.

    Args:
        s: the settings.
        inline: (format, prompt text, source) of the prompt.
        definition: what a run records to build the metric again.
        parse: the reply parser (``evaluators.metrics.custom.replies.parser``).
        fields: the fields, when the format says them elsewhere (a Prompty file's inputs).
    """
    name = check_name(s.text("name", required=True), s.source, s.lines.get("name"))
    kind = s.text("kind", "score")
    if kind not in JUDGE_KINDS:
        raise s.fail("kind", f"unknown kind {kind!r} (a judge metric is one of: {', '.join(JUDGE_KINDS)})")
    fields = fields if fields is not None else s.names("fields", required=True)
    if not fields:
        raise s.fail("fields", "a metric reads at least one field")
    default_range = {"score": [1, 5], "severity": [0, 7], "label": [0, 1]}[kind]
    rng = s.meta.get("range", default_range)
    if (not isinstance(rng, list) or len(rng) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                                          for x in rng) or not rng[0] < rng[1]):
        raise s.fail("range", f"must be [low, high] with low < high, got {rng!r}")
    if kind == "label" and list(rng) != [0, 1]:
        raise s.fail("range", "a label is true or false: its range is [0, 1]")
    lo, hi = float(rng[0]), float(rng[1])
    integer = s.flag("integer", all(float(x).is_integer() for x in rng) and hi - lo > 1 or kind != "score")
    higher = s.flag("higher_is_better", kind == "score")
    threshold = s.number("threshold", {"score": math.ceil((lo + hi) / 2) if integer else (lo + hi) / 2,
                                       "severity": lo + (hi - lo) * 3 / 7, "label": 0.0}[kind])
    if not lo <= threshold <= hi:
        raise s.fail("threshold", f"{threshold:g} is outside the range {lo:g}-{hi:g}")
    categories = s.names("categories")
    if categories and kind != "label":
        raise s.fail("categories", "only a label metric has categories")
    for c in categories:
        if not NAME.match(c):
            raise s.fail("categories", f"{c!r} is not a name (lower-case letters, digits and _)")
    if s.meta.get("reply_key") is not None and s.meta.get("reply_pattern") is not None:
        raise s.fail("reply_pattern", "give reply_key or reply_pattern, not both")
    pattern = s.text("reply_pattern")
    if pattern is not None:
        try:
            groups = reply_regex(pattern).groups
        except ValueError as e:
            raise s.fail("reply_pattern", str(e)) from None
        if groups != 1:
            raise s.fail("reply_pattern", f"needs exactly one group (the value), has {groups}")
    logprobs = s.flag("logprobs", False)
    if logprobs and (kind == "label" or not integer):
        raise s.fail("logprobs", "scores from probabilities need whole-number scores (kind score or severity)")
    family = s.text("family", "custom")
    from evaluators.core.registry import FAMILIES

    if family not in FAMILIES:
        raise s.fail("family", f"unknown family {family!r} (one of {', '.join(FAMILIES)})")
    canonical = set(fields) <= set(FIELDS) - {"messages", "checklist"}
    outputs = ((f"{name}_label", *(f"{name}_{c}" for c in categories)) if kind == "label"
               else (f"{name}_score",) if kind == "severity" else (name,))
    params = (("reply_key", s.text("reply_key", "label" if kind == "label" else "score")),
              ("reply_pattern", pattern), ("reason_key", s.text("reason_key", "reason")), ("logprobs", logprobs))
    return MetricSpec(
        name=name, family=family, kind=kind, fields=tuple(fields),
        # a conversation's turns carry the canonical fields only: a metric reading other columns is for rows
        conversation_fields=tuple(f for f in fields if f not in ("query", "response")) if canonical else None,
        prefix=name, outputs=outputs, score_range=(lo, hi), higher_is_better=higher, default_threshold=threshold,
        description=s.text("description", "") or "", version=str(definition.get("version") or "1"),
        integer=integer, templates=JudgeTemplates(inline=inline), params=params, parse=parse, row_tasks=row_tasks,
        run_options=("logprobs",) if kind != "label" and integer else (), definition=definition,
    )
