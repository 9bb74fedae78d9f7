"""Rules' filters (``monitor rule add --filter EXPR``): a small expression over a trace's facts
(:mod:`evaluators.monitor.facts`), parsed by hand and evaluated by walking the tree (never ``eval``).

    model == "gpt-4o" and latency_ms > 2000 and not error
    "retrieve" in span_names or attributes["app.tenant"] == "acme"
    feedback < 0.5 and service_name in ["shop", "cart"]

Grammar (``or`` binds loosest; parentheses group)::

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := value [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") value]
    value   := NUMBER | "-" NUMBER | STRING | true | false | null | NAME | attributes "[" STRING "]"
             | "(" expr ")" | "[" [value ("," value)*] "]"

A fact the trace does not have is ``null``: it equals ``null`` only, and every order comparison with it is false
(so is one between a text and a number); ``x in LIST`` is membership, ``"sub" in TEXT`` a substring,
``"key" in attributes`` a key. ``and``/``or``/``not`` read a value as true unless it is null, false, 0, "" or [].

Bounded: at most ``MAX_LENGTH`` characters, ``MAX_DEPTH`` nested groups and ``MAX_NODES`` parts; what is refused
is refused when the rule is added, naming the position (1-based column) of what is wrong.
"""
from __future__ import annotations

import re
from typing import Any

from evaluators.core.errors import UsageError

MAX_LENGTH = 2000
MAX_DEPTH = 32
MAX_NODES = 500
NAMES = ("model", "models", "provider", "service_name", "span_names", "span_count", "attributes", "error",
         "error_message", "latency_ms", "input_tokens", "output_tokens", "tokens", "cost", "feedback",
         "conversation_id", "user_id", "llm_calls")
COMPARE = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
KEYWORDS = {"true": True, "false": False, "null": None}
_TOKEN = re.compile(r"""(?P<ws>\s+)|(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    |(?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|-)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)""", re.X | re.S)
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}


class FilterError(UsageError):
    """A filter that cannot be read: says what and where."""


def _err(text: str, pos: int, what: str) -> FilterError:
    return FilterError(f"--filter: {what} at column {pos + 1}: {text[:pos]}⟨here⟩{text[pos:]}"
                       if len(text) <= 200 else f"--filter: {what} at column {pos + 1}")


def _unquote(raw: str, text: str, pos: int) -> str:
    out, i = [], 1
    while i < len(raw) - 1:
        c = raw[i]
        if c == "\\":
            nxt = raw[i + 1]
            if nxt not in _ESCAPES:
                raise _err(text, pos + i, f"unknown escape \\{nxt} (\\\\, \\\", \\', \\n, \\t)")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            what = "a text not closed" if text[pos] in "\"'" else f"unexpected {text[pos]!r}" + (" (compare with ==)" if text[pos] == "=" else "")
            raise _err(text, pos, what)
        kind, raw = m.lastgroup, m.group()
        if kind == "num":
            out.append(("lit", float(raw) if any(c in raw for c in ".eE") else int(raw), pos))
        elif kind == "str":
            out.append(("lit", _unquote(raw, text, pos), pos))
        elif kind == "name" and raw in KEYWORDS:
            out.append(("lit", KEYWORDS[raw], pos))
        elif kind == "name" and raw in ("and", "or", "not", "in"):
            out.append(("op", raw, pos))
        elif kind != "ws":
            out.append((kind, raw, pos))
        pos = m.end()
    out.append(("end", None, len(text)))
    return out


class _Parser:
    def __init__(self, text: str):
        self.text, self.toks, self.i, self.nodes = text, _tokens(text), 0, 0

    def peek(self, *ops: str) -> bool:
        kind, v, _ = self.toks[self.i]
        return kind == "op" and v in ops

    def take(self):
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, op: str, what: str) -> None:
        if not self.peek(op):
            raise self.error(f"expected {what}")
        self.take()

    def error(self, what: str) -> FilterError:
        kind, v, pos = self.toks[self.i]
        found = "the end" if kind == "end" else repr(v) if kind != "lit" else "a value"
        return _err(self.text, pos, f"{what}, found {found}")

    def node(self, depth: int, *parts) -> tuple:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _err(self.text, self.toks[self.i - 1][2], f"more than {MAX_NODES} parts")
        return parts

    def deeper(self, depth: int) -> int:
        """The depth one level in, checked before going there (so the parser's own recursion is bounded)."""
        if depth + 1 > MAX_DEPTH:
            raise _err(self.text, self.toks[self.i - 1][2], f"nested more than {MAX_DEPTH} deep")
        return depth + 1

    def expr(self, depth: int) -> tuple:
        return self._chain("or", self.conj, depth)

    def conj(self, depth: int) -> tuple:
        return self._chain("and", self.neg, depth)

    def _chain(self, op: str, part, depth: int) -> tuple:
        items = [part(depth)]
        while self.peek(op):
            self.take()
            items.append(part(depth))
        return items[0] if len(items) == 1 else self.node(depth, op, items)

    def neg(self, depth: int) -> tuple:
        if self.peek("not"):
            self.take()
            return self.node(depth, "not", self.neg(self.deeper(depth)))
        left = self.value(depth)
        op = None
        if self.peek(*COMPARE):
            op = self.take()[1]
        elif self.peek("not") and self.toks[self.i + 1][:2] == ("op", "in"):
            self.i += 2
            op = "not in"
        return left if op is None else self.node(depth, "cmp", op, left, self.value(depth))

    def value(self, depth: int) -> tuple:
        kind, v, pos = self.take()
        if kind == "lit":
            return self.node(depth, "lit", v)
        if (kind, v) == ("op", "-") and self.toks[self.i][0] == "lit" and isinstance(self.toks[self.i][1], (int, float)) \
                and not isinstance(self.toks[self.i][1], bool):
            return self.node(depth, "lit", -self.take()[1])
        if kind == "name":
            if v not in NAMES:
                raise _err(self.text, pos, f"unknown name {v!r} (known: {', '.join(NAMES)})")
            if v == "attributes" and self.peek("["):
                self.take()
                key = self.take()
                if key[0] != "lit" or not isinstance(key[1], str):
                    self.i -= 1
                    raise self.error('expected an attribute\'s name in quotes, e.g. attributes["app.tenant"]')
                self.expect("]", "']'")
                return self.node(depth, "attr", key[1])
            return self.node(depth, "name", v)
        if (kind, v) == ("op", "("):
            inner = self.expr(self.deeper(depth))
            self.expect(")", "')'")
            return self.node(depth, "group", inner)
        if (kind, v) == ("op", "["):
            items, inner = [], self.deeper(depth)
            while not self.peek("]"):
                items.append(self.value(inner))
                if not self.peek(","):
                    break
                self.take()
            self.expect("]", "',' or ']'")
            return self.node(depth, "list", items)
        self.i -= 1
        raise self.error("expected a value (a name, a number, a text in quotes, true, false, null, ( or [)")


def parse_filter(text: str) -> tuple:
    """A filter's tree, or :class:`FilterError` naming what is wrong and where."""
    if len(text) > MAX_LENGTH:
        raise FilterError(f"--filter: {len(text):,} characters (at most {MAX_LENGTH:,})")
    if not text.strip():
        raise FilterError("--filter: empty (leave it out to judge every trace)")
    p = _Parser(text)
    tree = p.expr(0)
    if p.toks[p.i][0] != "end":
        raise p.error("expected and, or, a comparison or the end")
    return tree


def _kind(v) -> str:
    if v is None or isinstance(v, bool):
        return "bool" if isinstance(v, bool) else "null"
    return "num" if isinstance(v, (int, float)) else "str" if isinstance(v, str) else "other"


def _eq(a, b) -> bool:
    return _kind(a) == _kind(b) and a == b


def _in(a, b) -> bool:
    if isinstance(b, list):
        return any(_eq(a, x) for x in b)
    if isinstance(b, str):
        return isinstance(a, str) and a in b
    if isinstance(b, dict):
        return isinstance(a, str) and a in b
    return False


def _compare(op: str, a, b) -> bool:
    if op in ("==", "!="):
        return _eq(a, b) == (op == "==")
    if op in ("in", "not in"):
        return _in(a, b) == (op == "in")
    if _kind(a) != _kind(b) or _kind(a) not in ("num", "str"):
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate(tree: tuple, facts: dict[str, Any] | None) -> Any:
    """The filter's value for a trace's facts (None facts: every name is null)."""
    facts = facts or {}
    kind = tree[0]
    if kind == "lit":
        return tree[1]
    if kind == "name":
        v = facts.get(tree[1])
        return {} if v is None and tree[1] == "attributes" else v
    if kind == "attr":
        return (facts.get("attributes") or {}).get(tree[1])
    if kind == "group":
        return evaluate(tree[1], facts)
    if kind == "list":
        return [evaluate(x, facts) for x in tree[1]]
    if kind == "not":
        return not evaluate(tree[1], facts)
    if kind == "and":
        return all(evaluate(x, facts) for x in tree[1])
    if kind == "or":
        return any(evaluate(x, facts) for x in tree[1])
    return _compare(tree[1], evaluate(tree[2], facts), evaluate(tree[3], facts))


def matches(tree: tuple, facts: dict[str, Any] | None) -> bool:
    return bool(evaluate(tree, facts))
