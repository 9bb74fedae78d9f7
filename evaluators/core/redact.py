"""Secrets taken out of text before it is stored or shown: a provider may echo the key it was sent in its
error message ("Incorrect API key provided: sk-...", a request's headers quoted back), and that message
becomes a row's error, a run's error, a line of ``rows.jsonl`` and a cell on the Results page.

:func:`redact` is the one rule. It removes every key it is given (the run's judges' and targets' keys, which
only the caller knows) and what looks like a key whoever sent it: ``sk-`` keys, a ``Bearer`` token, the value
of an ``api-key`` / ``authorization`` / ``token`` field, a long hex or base64 run. Ordinary words, numbers,
URLs, UUIDs and short ids are left as they were.
"""
from __future__ import annotations

import json
import re
from typing import Iterable

MARK = "[redacted]"
MIN_KEY = 8  # a configured "key" shorter than this ("unused", "x") is not looked for: it would cut words

_SHAPES = [
    # an OpenAI-style key: sk-..., sk-proj-..., with a digit somewhere (not "sk-learn-compatible")
    (re.compile(r"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{8,}"), MARK),
    # an Authorization header's value, quoted or echoed
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MARK),
    # a named field's value: api-key=..., "api_key": "...", x-api-key: ..., access_token=..., password: ...
    (re.compile(r"(?i)\b((?:x-)?api[-_]?key|access[-_]?token|auth[-_]?token|secret|password|authorization)"
                r"""(["']?\s*[:=]\s*["']?)(?!\[redacted\])(?:bearer\s+)?[^\s"'&,;}]{6,}"""), r"\1\2" + MARK),
    # a long hex secret (an Azure key is 32 hex digits); a UUID's groups are shorter and stay
    (re.compile(r"\b[0-9a-fA-F]{32,}\b"), MARK),
    # a long base64 / url-safe token mixing upper case, lower case and digits
    (re.compile(r"(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]*[A-Z])(?=[A-Za-z0-9+/_-]*[a-z])(?=[A-Za-z0-9+/_-]*\d)"
                r"[A-Za-z0-9+/_-]{40,}={0,2}"), MARK),
]


def redact(text: str | None, keys: Iterable[str | None] = ()) -> str | None:
    """``text`` with every given key, and anything shaped like a key, replaced by ``[redacted]``.

    Args:
        text: an error message (None stays None).
        keys: the secrets in use where the text came from (None and short ones are skipped); each is also
            looked for as JSON would quote it.

    Returns:
        The text, safe to store, log and show.
    """
    if not text:
        return text
    for key in sorted({k for k in keys if k and len(k) >= MIN_KEY}, key=len, reverse=True):
        for form in {key, json.dumps(key)[1:-1]}:
            text = text.replace(form, MARK)
    for pattern, repl in _SHAPES:
        text = pattern.sub(repl, text)
    return text
