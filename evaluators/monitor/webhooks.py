"""Delivering an alert to a webhook: a JSON body signed with the rule's secret, retried, then given up.

The body is the alert as compact JSON (keys sorted, UTF-8). The header ``X-Signature`` is the HMAC-SHA256 of
exactly those bytes under the rule's secret, in hex, so the receiver recomputes it over the raw body it got and
compares with :func:`hmac.compare_digest` (:func:`verify` does that). A delivery is tried at most
:data:`ATTEMPTS` times; after a failure (no connection, a timeout, a status other than 2xx) it waits
``BACKOFF * 2 ** (attempt - 1)`` seconds before the next, and after the last it is given up (the caller marks the
alert). Each attempt is bounded in time (``timeout``) and in the reply it reads (:data:`MAX_REPLY` bytes; more is
a failure). The secret is never in a message this module returns or raises: errors name the URL's host only.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

ATTEMPTS = 5
BACKOFF = 1.0
TIMEOUT = 10.0
MAX_REPLY = 64 * 1024


@dataclass(frozen=True)
class Delivery:
    delivered: bool
    attempts: int
    error: str | None  # the last failure, None when delivered


def body_of(alert: dict) -> bytes:
    return json.dumps(alert, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(body: bytes, secret: str) -> str:
    if not secret:
        raise ValueError("a webhook needs a non-empty secret to sign with")
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(body: bytes, signature: str, secret: str) -> bool:
    """What a receiver does: the signature matches the raw body under the secret."""
    return hmac.compare_digest(sign(body, secret), signature or "")


def _check_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"webhook URL must be http(s)://host/..., got scheme {parts.scheme!r}")
    return parts.hostname


def _attempt(url: str, body: bytes, signature: str, timeout: float, max_reply: int) -> str | None:
    """One POST; None when delivered, else why not."""
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "X-Signature": signature, "User-Agent": "evaldash-alerts"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - scheme checked above
            reply = resp.read(max_reply + 1)
            if len(reply) > max_reply:
                return f"reply over {max_reply} bytes"
            return None
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}"
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        return f"{type(reason).__name__}: {reason}"


def deliver(url: str, alert: dict, secret: str, *, attempts: int = ATTEMPTS, backoff: float = BACKOFF,
            timeout: float = TIMEOUT, max_reply: int = MAX_REPLY,
            sleep: Callable[[float], None] = time.sleep) -> Delivery:
    """POST ``alert`` to ``url`` signed with ``secret``, retrying with exponential backoff; never raises on the
    receiver's failures (a bad URL or an empty secret is the caller's error and raises ValueError)."""
    host = _check_url(url)
    body = body_of(alert)
    signature = sign(body, secret)
    error = None
    for n in range(1, attempts + 1):
        error = _attempt(url, body, signature, timeout, max_reply)
        if error is None:
            return Delivery(True, n, None)
        if n < attempts:
            sleep(backoff * 2 ** (n - 1))
    return Delivery(False, attempts, f"gave up after {attempts} attempts to {host}: {error}")
