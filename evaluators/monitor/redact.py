"""Redaction of a mapped trace before anything reaches a judge or the dashboard (``monitor project --redact``).

E-mail addresses, phone numbers, payment card numbers (Luhn-checked) and the project's own patterns are replaced in
the row's fields by tokens, ``[EMAIL_1]``, ``[PHONE_2]``, ``[CARD_1]``, ``[ORDER_1]`` (a pattern's name), stable in
a scope: the trace, or its conversation when it has one, so ``[EMAIL_1]`` is one address throughout a conversation.
The store numbers the tokens (:meth:`Store.redaction_tokens`) by a keyed digest of each value (HMAC-SHA256 under
the project's own secret), and keeps the value itself only where the project allows it (``--keep-original``), in
a table of its own that exports and the dashboard do not read.

Every pattern, ours and the user's, is matched with RE2 (``google-re2``), in time linear in the text: a pattern
cannot stall the assembler, whatever the text. The built-in ones are written against what production text holds
beside the values they find (versions, dates, times, IP addresses, ISBNs, order numbers, ids), each of which the
tests keep: a phone number needs a ``+`` and its country code, or a national number's shape (``(415) 555-2671``,
``415-555-2671``, ``020 7946 0958``) with its separators; a card number 13 to 19 digits in the groupings cards are
written in, a card network's first digits, and a valid Luhn check digit. (``phonenumbers`` was considered for phone
numbers: it needs a default region for numbers written without their country code, which a project's users do
not share, and its pure-Python matcher costs a thousand times what RE2 does over the same text.)
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Any

from evaluators.core.errors import UsageError

KINDS = {"email": "EMAIL", "phone": "PHONE", "card": "CARD"}  # built-in kinds -> their tokens' label
PATTERN_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,31}")  # a user pattern's name, its tokens' label
MAX_PATTERN = 1000  # characters of a user pattern
MAX_PATTERNS = 20
MAX_PROGRAM = 1 << 23  # bytes of memory RE2 may give one compiled pattern (a pattern needing more is refused)
# A pattern that matches the whole of an ordinary sentence would replace the conversation itself.
ORDINARY = "Hello, how are you today? Fine, thanks: the weather is good."

EMAIL = (r"[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
         r"[A-Za-z]{2,24}\b")
PHONE = (r"\+\d{1,3}(?:[ .\-]?\(\d{1,4}\))?(?:[ .\-]?\d{1,5}){2,6}\b"  # international: + country code
         r"|(?:\(\d{3}\) ?|\b\d{3}[ .\-])\d{3}[ .\-]\d{4}\b"  # North American: (415) 555-2671, 415.555.2671
         r"|\b0\d{1,4}(?:[ \-/]\d{2,8}){1,4}\b")  # national with a trunk 0: 020 7946 0958, 01 23 45 67 89
CARD = r"\b\d(?:[ \-]?\d){12,18}\b"


def _options():
    import re2

    opts = re2.Options()
    opts.log_errors, opts.max_mem = False, MAX_PROGRAM
    return opts


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str):
    """RE2's compiled ``pattern``. Raises ValueError saying why it is refused."""
    import re2

    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"is {len(pattern):,} characters (at most {MAX_PATTERN:,})")
    try:
        rx = re2.compile(pattern, _options())
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"is not a regular expression this program matches ({why}): patterns are matched in time "
                         "linear in the text (RE2), without backreferences (\\1) or lookarounds ((?=...))") from None
    for probe in ("", "a", " ", "a b", "0", ORDINARY):
        m = rx.search(probe)
        if m is not None and m.start() == m.end():
            raise ValueError("matches an empty text (it would put a token between every two characters)")
    m = rx.search(ORDINARY)
    if m is not None and m.group() == ORDINARY:
        raise ValueError(f"matches the whole of an ordinary sentence ({ORDINARY!r}): it would redact everything")
    return rx


def check_settings(kinds: list[str], patterns: dict[str, str]) -> None:
    """Refuse unknown kinds and unsafe or invalid patterns, naming each. Raises UsageError."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UsageError(f"--redact takes {', '.join(KINDS)} (comma-separated), not {', '.join(unknown)}")
    if len(patterns) > MAX_PATTERNS:
        raise UsageError(f"at most {MAX_PATTERNS} --redact-pattern, not {len(patterns)}")
    for name, pattern in patterns.items():
        if not PATTERN_NAME.fullmatch(name) or name in KINDS.values():
            raise UsageError(f"--redact-pattern {name!r}: a name is upper-case letters, digits and _ (starting with "
                             f"a letter, at most 32), other than {', '.join(KINDS.values())}: it names the tokens, "
                             f"e.g. ORDER=ORD-[0-9]+ makes [ORDER_1]")
        try:
            compile_pattern(pattern)
        except ValueError as e:
            raise UsageError(f"--redact-pattern {name}: the pattern {pattern[:200]!r} {e}") from None


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    groups = [len(g) for g in re.split(r"[ \-]", text)]
    grouped = len(groups) == 1 or all(n == 4 for n in groups[:-1]) or groups in ([4, 6, 5], [4, 6, 4])
    network = digits[0] in "3456" or 2221 <= int(digits[:4]) <= 2720  # Amex/Diners/JCB, Visa, Mastercard, Discover
    return 13 <= len(digits) <= 19 and network and grouped and luhn_ok(digits)


def _phone(text: str, before: str) -> bool:
    digits = re.sub(r"\D", "", text)
    if text.startswith("+"):
        return 8 <= len(digits) <= 15 and not (before.isalnum() or (before and before in "+=*/^"))  # not 2+12345678 (a sum)
    if text.startswith("0"):
        return 9 <= len(digits) <= 12 and len(set(re.findall(r"[ \-/]", text))) == 1  # one kind of separator
    seps = re.findall(r"[ .\-]", text.split(")")[-1])
    return (len(digits) == 10 and digits[0] in "23456789" and digits[3] in "23456789"  # NANP's rules
            and len(set(seps)) <= 1 + ("(" in text) and not (before.isalnum() or (before and before in ".-/")))


def _email(text: str) -> bool:
    return not re.fullmatch(r"\d+x", text.split("@", 1)[1].split(".", 1)[0])  # icon@2x.png: an image, not mail


@dataclass(frozen=True)
class Settings:
    """A project's redaction: the built-in kinds on, its own patterns (name -> RE2 pattern), whether originals
    are kept, and the secret its digests are keyed with."""

    kinds: tuple[str, ...] = ()
    patterns: dict = field(default_factory=dict)
    keep_original: bool = False
    secret: str = ""

    @property
    def on(self) -> bool:
        return bool(self.kinds or self.patterns)


def find(text: str, settings: Settings) -> list[tuple[int, int, str]]:
    """The values to redact in ``text``: (start, end, label), left to right, none overlapping (at one place the
    longest, the built-in kinds before the user's patterns)."""
    found = []
    for kind in ("card", "email", "phone"):
        if kind in settings.kinds:
            for m in compile_pattern({"card": CARD, "email": EMAIL, "phone": PHONE}[kind]).finditer(text):
                s, e, v = m.start(), m.end(), m.group()
                before = text[s - 1] if s else ""
                if (kind == "card" and _card(v)) or (kind == "email" and _email(v)) or \
                        (kind == "phone" and _phone(v, before)):
                    found.append((s, e, KINDS[kind]))
    for name, pattern in settings.patterns.items():
        found += [(m.start(), m.end(), name) for m in compile_pattern(pattern).finditer(text) if m.end() > m.start()]
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out, end = [], 0
    for f in found:
        if f[0] >= end:
            out.append(f)
            end = f[1]
    return out


def normal(label: str, value: str) -> str:
    """What makes two values the same one: an address's case, a number's punctuation do not."""
    if label == "EMAIL":
        return value.lower()
    if label in ("PHONE", "CARD"):
        return re.sub(r"[^\d+]", "", value)
    return value


def digest(secret: str, label: str, value: str) -> str:
    return hmac.new(secret.encode(), f"{label}\0{normal(label, value)}".encode("utf-8", "surrogatepass"),
                    hashlib.sha256).hexdigest()


class Redactor:
    """Replaces a row's values by tokens: :meth:`collect` walks the row, :meth:`apply` writes the tokens."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.values: dict[str, tuple[str, str]] = {}  # digest -> (label, a value), in order of first appearance
        self.found: dict[str, list] = {}  # text -> what find() found in it (a row repeats its texts: found once)

    def _find(self, text: str) -> list[tuple[int, int, str]]:
        if text not in self.found:
            self.found[text] = find(text, self.settings)
        return self.found[text]

    def collect(self, value: Any) -> None:
        for text in _strings(value):
            for s, e, label in self._find(text):
                self.values.setdefault(digest(self.settings.secret, label, text[s:e]), (label, text[s:e]))

    def apply(self, value: Any, tokens: dict[str, str]) -> Any:
        """``value`` (any JSON) with every string's values replaced by their ``tokens`` (digest -> token)."""
        if isinstance(value, str):
            parts, at = [], 0
            for s, e, label in self._find(value):
                parts += [value[at:s], tokens[digest(self.settings.secret, label, value[s:e])]]
                at = e
            return "".join(parts) + value[at:] if parts else value
        if isinstance(value, list):
            return [self.apply(v, tokens) for v in value]
        if isinstance(value, dict):
            return {k: self.apply(v, tokens) for k, v in value.items()}
        return value


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def redact_row(store, project: str, trace_id: str, row: dict) -> dict:
    """A mapped trace's ``row`` (``fields``, ``hint``, ``facts``, ``conversation_key``...) with its values replaced by the
    project's tokens, in the scope of its conversation (or of the trace). A conversation key holding a value to
    redact is replaced by its digest (it still groups the conversation's traces). Unchanged when the project
    redacts nothing. A pattern stored that no longer compiles raises (the trace stays open: fails closed)."""
    got = store.redaction_settings(project)
    settings = Settings(tuple(got["kinds"]), got["patterns"], got["keep_original"], got["secret"])
    if not settings.on:
        return row
    key = row.get("conversation_key")
    scope = f"c:{digest(settings.secret, 'KEY', key)}" if key else f"t:{trace_id}"
    r = Redactor(settings)
    r.collect([row.get("fields"), row.get("hint"), row.get("facts")])
    if key and find(key, settings):
        row = {**row, "conversation_key": f"redacted:{digest(settings.secret, 'KEY', key)[:40]}"}
    if not r.values:
        return row
    tokens = store.redaction_tokens(project, scope, [(d, label, value) for d, (label, value) in r.values.items()],
                                    keep_original=settings.keep_original)
    return {**row, "fields": r.apply(row.get("fields"), tokens), "hint": r.apply(row.get("hint"), tokens),
            **({"facts": r.apply(row["facts"], tokens)} if row.get("facts") is not None else {})}  # (filters read it)


def mask(store, project: str, value: Any) -> Any:
    """``value`` (any JSON) with every value the project redacts replaced by its label in brackets ("[EMAIL]"),
    for showing what was never mapped (a trace's raw spans): read-only, no token is made. Unchanged when the
    project redacts nothing; a pattern that no longer compiles raises (nothing is shown: fails closed)."""
    got = store.redaction_settings(project)
    settings = Settings(tuple(got["kinds"]), got["patterns"], got["keep_original"], got["secret"])
    if not settings.on:
        return value

    def one(v: Any) -> Any:
        if isinstance(v, str):
            parts, at = [], 0
            for s, e, label in find(v, settings):
                parts += [v[at:s], f"[{label}]"]
                at = e
            return "".join(parts) + v[at:] if parts else v
        if isinstance(v, list):
            return [one(x) for x in v]
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        return v
    return one(value)


def set_project(store, project: str, kinds: list[str] | None = None, patterns: dict[str, str] | None = None,
                keep_original: bool | None = None, conversation_quiet_seconds: float | None = None) -> None:
    """Check then store a project's redaction settings (``monitor project``): what is not given is kept."""
    check_settings(kinds or [], patterns or {})
    store.set_monitor_redaction(project, kinds, patterns, keep_original, conversation_quiet_seconds)


def parse_patterns(items: list[str]) -> dict[str, str]:
    """``NAME=REGEX`` items (``--redact-pattern``) as name -> pattern. Raises UsageError naming a bad item."""
    out: dict[str, str] = {}
    for item in items:
        name, eq, pattern = item.partition("=")
        if not eq or not pattern:
            raise UsageError(f"--redact-pattern {item[:100]!r}: give it as NAME=REGEX, e.g. ORDER=ORD-[0-9]+")
        if name.strip() in out:
            raise UsageError(f"--redact-pattern {name.strip()!r} is given twice")
        out[name.strip()] = pattern
    return out


def project_settings(store, project: str, redact: str | None, patterns: list[str] | None,
                     keep_original: bool | None, conversation_quiet: float | None) -> list[str]:
    """``monitor project``'s options set (what is not given is kept), then the project's settings as lines."""
    kinds = None if redact is None else [k.strip() for k in redact.split(",") if k.strip() not in ("", "none")]
    named = None if patterns is None else parse_patterns([p for p in patterns if p != "none"])
    set_project(store, project, kinds, named, keep_original, conversation_quiet)
    p = store.monitor_project(project)
    return [f"project {project!r}: quiet period {p['quiet_seconds']:g} s, conversations' {p['conversation_quiet_seconds']:g} s",
            f"  redacts: {', '.join(p['redact']) or 'nothing built in'}"
            + "".join(f"; {n} ({pat})" for n, pat in p["redact_patterns"].items())
            + ("; originals kept apart" if p["keep_original"] else "; originals not kept")]
