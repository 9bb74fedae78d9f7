"""Named users' password hashes: scrypt, salted, in Werkzeug's documented format, so that a hash made by
``werkzeug.security.generate_password_hash(pw, "scrypt")`` works here too::

    scrypt:N:R:P$SALT$HEX      e.g. scrypt:32768:8:1$Jq0v...$9f2c... (HEX: 64 bytes of hashlib.scrypt)

A salted slow hash rather than the shared password's bare SHA-256: one user's leaked secrets file then
costs an attacker ~0.1 s and 32 MB per guess and per user, not a table lookup. Make one with
``python -m ui.passwords NAME`` (the password is read from the terminal, never from the command line).
"""
from __future__ import annotations

import getpass
import hashlib
import hmac
import re
import secrets
import string
import sys

N, R, P = 2 ** 15, 8, 1  # Werkzeug's default for scrypt: 32 MB, ~0.1 s a check
FORMAT = re.compile(r"scrypt:(\d{1,8}):(\d{1,3}):(\d{1,3})\$([^$]{8,64})\$([0-9a-f]{128})")


class HashError(ValueError):
    """A configured hash that cannot be used. The message says why; it never quotes the hash."""


def make(password: str, n: int = N, r: int = R, p: int = P) -> str:
    """A new salted hash of ``password`` (16 random letters or digits of salt, as Werkzeug makes them)."""
    salt = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(16))
    return f"scrypt:{n}:{r}:{p}${salt}${_scrypt(password, salt, n, r, p)}"


def check(value: object) -> tuple[int, int, int, str, str]:
    """The parts of a configured hash; HashError when it is not one this server will check. Bounds: N a power
    of two from 2^14 (weaker is refused) to 2^20, R up to 32 and P up to 16 (a larger one would let a sign-in
    take the server's memory or minutes)."""
    if not isinstance(value, str):
        raise HashError(f"a value of type {type(value).__name__}, not a hash")
    m = FORMAT.fullmatch(value.strip())
    if not m:
        raise HashError("not a hash made by `python -m ui.passwords NAME` (scrypt:N:R:P$SALT$HEX, 128 hex digits)")
    n, r, p = (int(x) for x in m.groups()[:3])
    if n & (n - 1) or not 2 ** 14 <= n <= 2 ** 20 or not 1 <= r <= 32 or not 1 <= p <= 16:
        raise HashError(f"scrypt's cost N={n}, R={r}, P={p} is refused: N a power of two from 16384 to "
                        "1048576, R from 1 to 32, P from 1 to 16")
    return n, r, p, m.group(4), m.group(5)


def verify(password: str, value: str) -> bool:
    """Whether ``password`` gives the hash ``value`` (checked by :func:`check` first), compared in constant time."""
    n, r, p, salt, expected = check(value)
    return hmac.compare_digest(_scrypt(password, salt, n, r, p).encode(), expected.encode())


def _scrypt(password: str, salt: str, n: int, r: int, p: int) -> str:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt.encode("utf-8"), n=n, r=r, p=p,
                          maxmem=132 * n * r * p, dklen=64).hex()


def main(argv: list[str]) -> int:
    """``python -m ui.passwords NAME``: asks the password twice, prints the line for ``[evaldash.users]``."""
    if len(argv) != 1 or not argv[0].strip():
        print("usage: python -m ui.passwords NAME   (prints NAME = \"scrypt:...\" for [evaldash.users])",
              file=sys.stderr)
        return 2
    first = getpass.getpass(f"Password for {argv[0]}: ")
    if not first or getpass.getpass("Again: ") != first:
        print("The two passwords differ, or are empty: nothing printed.", file=sys.stderr)
        return 1
    name = argv[0].strip().replace("\\", "\\\\").replace('"', '\\"')
    print(f'"{name}" = "{make(first)}"')
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
