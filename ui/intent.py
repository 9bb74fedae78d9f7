"""Signs that sign-in is meant but mistyped, read from the whole secrets file and the environment.

Sign-in is off only when nothing says it is wanted. A section named nearly ``[evaldash]`` or ``[auth]``
(another case, a letter or two wrong), a key anywhere that names a password or a digest other than the two
evaldash reads, a setting under ``[evaldash]`` it does not know, or a variable like the password's: each is
a sign, and each refuses the dashboard with what to change (ui.auth). Messages name keys and variables,
never a value. Pure functions over mappings, so each rule is tested alone.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

SECTION, OIDC = "evaldash", "auth"
KNOWN = ("password_sha256", "users", "admins")  # what [evaldash] holds
READS = "evaldash reads a password only as password_sha256 or [evaldash.users] under [evaldash]"
# a key's word that names a password or its digest
SECRET_WORDS = {"pass", "passwd", "pwd", "passphrase", "passcode", "sha256", "sha", "digest", "hash", "scrypt",
                "pbkdf2", "bcrypt", "argon2"}
DIGEST_LIKE = re.compile(r"\s*([0-9a-fA-F]{64}|scrypt:\d+:\d+:\d+\$.*)\s*")


def distance(a: str, b: str) -> int:
    """Edit distance with a swap of two neighbours counting one (optimal string alignment)."""
    prev2, prev = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if prev2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def _squash(name: str) -> str:
    return re.sub(r"[\W_]+", "", name.casefold())


def near(name: str, target: str, most: int) -> bool:
    """``name`` is ``target`` in another case or spelling (``most`` edits at most, separators ignored)."""
    squashed = _squash(name)
    return name != target and abs(len(squashed) - len(target)) <= most and distance(squashed, target) <= most


def _words(key: str) -> list[str]:
    return [w for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", key) if w]


def names_a_password(key: str) -> bool:
    """A key such as ``password``, ``Passwort``, ``pasword_sha256``, ``admin_pwd``, ``digest``, ``pass_hash``."""
    if "passw" in key.casefold():
        return True
    return any(w.casefold() in SECRET_WORDS or (len(w) >= 6 and distance(w.casefold(), "password") <= 2)
               for w in _words(key))


# what Streamlit's OIDC sign-in reads from [auth]: a table holding one anywhere else was meant for [auth]
OIDC_KEYS = {"client_secret", "cookie_secret", "server_metadata_url", "redirect_uri"}


def _walk(table: Mapping, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every key under ``table``, tables and arrays of tables (``[[users]]``) included."""
    for key, value in table.items():
        where = f"{path}.{key}" if path else str(key)
        yield where, value
        if depth > 20:
            continue
        if isinstance(value, Mapping):
            yield from _walk(value, where, depth + 1)
        elif isinstance(value, list):
            for n, item in enumerate(value):
                if isinstance(item, Mapping):
                    yield from _walk(item, f"{where}[{n}]", depth + 1)


def secrets_problems(secrets: Mapping[str, Any]) -> list[str]:
    """What in the secrets says sign-in is meant but is not how it is set (empty: nothing such)."""
    out = []
    for key, value in secrets.items():
        if near(key, SECTION, 2):
            out.append(f"[{key}] looks like [{SECTION}] mistyped: name the section [{SECTION}], in lowercase")
        elif near(key, OIDC, 1):
            out.append(f"[{key}] looks like [{OIDC}] mistyped: Streamlit's sign-in reads [{OIDC}], in lowercase")
        elif key not in (SECTION, OIDC):
            out += _stray(value, str(key)) if isinstance(value, Mapping) else _stray({key: value}, "")
    section = secrets.get(SECTION)
    if isinstance(section, Mapping):
        for key in section:
            if key not in KNOWN:
                out.append(f"[{SECTION}] {key}: not a setting evaldash knows; {READS}")
        if not any(k in section for k in KNOWN):
            out.append(f"[{SECTION}] sets no password: add password_sha256 or an [{SECTION}.users] table")
    return out


def _stray(table: Mapping, path: str) -> list[str]:
    """Keys outside [evaldash] and [auth] that name a password, or hold what looks like a digest."""
    out = []
    for where, value in _walk(table, path):
        key = where.rsplit(".", 1)[-1]
        if names_a_password(key):
            out.append(f"{where}: a password setting outside [{SECTION}]; {READS}")
        elif key in OIDC_KEYS:
            out.append(f"{where}: an OIDC sign-in setting outside [{OIDC}]; Streamlit's sign-in reads it only "
                       f"under [{OIDC}]")
        elif isinstance(value, str) and DIGEST_LIKE.fullmatch(value):
            out.append(f"{where}: holds what looks like a password digest, outside [{SECTION}]; {READS}")
    return out


def environment_problems(environ: Mapping[str, str], expected: str) -> list[str]:
    """Variables that look like the password's, ``expected``, but are not it (EVAL_DASHBOARD_PASSWORD...)."""
    out = []
    for name in environ:
        upper = name.upper()
        if name == expected:
            continue
        looks = upper.startswith("EVAL") and ("PASS" in upper or distance(upper, expected) <= 3)
        # any variable naming a password that holds a digest: DASHBOARD_PASSWORD_SHA256, STREAMLIT_PASSWORD_SHA256
        holds = ("PASS" in upper or "PWD" in upper) and bool(DIGEST_LIKE.fullmatch(environ[name] or ""))
        if looks or holds:
            out.append(f"the environment variable {name} looks like the sign-in password's; set "
                       f"{expected} to the password's SHA-256 digest (and unset {name})")
    return out
