"""Reading a judge's reply for a metric defined in a file: the value under the metric's ``reply_key`` (or the
one group of its ``reply_pattern``), the reason under ``reason_key``; with ``logprobs``, the score weighted by
the judge's token probabilities (:mod:`evaluators.core.logprobs`)."""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from evaluators.core.kinds import Verdict
from evaluators.core.logprobs import open_envelope, weighted_score
from evaluators.core.replies import ReplyError, answer_body, objects_with, reason_text
from evaluators.metrics.custom.common import MAX_MATCHED_CHARS, reply_regex

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec

_TRUE, _FALSE = ("true", "yes", "pass", "1"), ("false", "no", "fail", "0")


def _number(raw: Any, spec: "MetricSpec", what: str) -> float:
    if isinstance(raw, str):
        try:
            raw = float(raw.strip())
        except ValueError:
            raise ReplyError(f"{what} is not a number: {raw!r}") from None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not -1e300 < raw < 1e300:
        raise ReplyError(f"{what} is not a number: {raw!r}")
    if spec.integer and float(raw) != int(raw):
        raise ReplyError(f"{what} must be a whole number, got {raw!r}")
    lo, hi = spec.score_range
    if not lo <= raw <= hi:
        raise ReplyError(f"{what} {raw!r} is outside {lo:g}-{hi:g}")
    return float(raw)


def _label(raw: Any, what: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (int, str)) and str(raw).strip().lower() in _TRUE + _FALSE:
        return str(raw).strip().lower() in _TRUE
    raise ReplyError(f"{what} must be true or false, got {json.dumps(raw)}")


def parse_reply(spec: "MetricSpec", text: str) -> Verdict:
    """A judge reply -> verdict, as the metric's settings say where its value is. Raises ``ReplyError``."""
    content, tokens = open_envelope(text)
    body = answer_body(content)
    key, pattern, reason_key = spec.param("reply_key"), spec.param("reply_pattern"), spec.param("reason_key")
    reason, obj = None, {}
    if pattern:
        if len(body) > MAX_MATCHED_CHARS:
            raise ReplyError(f"the reply is {len(body):,} characters; a reply_pattern is matched on at most "
                             f"{MAX_MATCHED_CHARS:,}")
        found = list(reply_regex(pattern).finditer(body))
        if not found:
            raise ReplyError(f"the reply does not match the metric's reply_pattern {pattern!r}")
        raw, at = found[-1].group(1), found[-1].start(1)
        objs = objects_with(body, reason_key)
        reason = reason_text(objs[-1], reason_key) if objs else None
    else:
        objs = objects_with(body, key)
        if not objs:
            raise ReplyError(f"no JSON object with a '{key}' in the reply")
        obj = objs[-1]
        raw, at = obj[key], None
        reason = reason_text(obj, reason_key) or None
    what = pattern and "the value" or f"'{key}'"
    if spec.kind == "label":
        outputs: dict[str, Any] = {spec.primary: _label(raw, what)}
        for out in spec.outputs[1:]:
            cat = out[len(spec.prefix) + 1:]
            if cat not in obj and outputs[spec.primary]:
                raise ReplyError(f"the label is true but '{cat}' is not answered")
            outputs[out] = _label(obj[cat], f"'{cat}'") if cat in obj else False
        return Verdict(outputs, reason)
    value = _number(raw, spec, what)
    if spec.param("logprobs"):
        if tokens is None:
            raise ReplyError("scores from probabilities need the judge's logprobs, and the reply has none")
        if at is None:  # where the JSON object's value was written, in the text the tokens spell
            m = None
            for m in re.finditer(r'"%s"\s*:\s*"?\s*(-?\d)' % re.escape(key), body):
                pass
            if m is None:
                raise ReplyError(f"cannot find where '{key}' was written in the reply")
            at = m.start(1)
        at += len(content) - len(body) if content.endswith(body) else 0  # (answer_body may drop a <think> prefix)
        try:
            weighted, shares = weighted_score(tokens, at, *spec.score_range)
        except ValueError as e:
            raise ReplyError(str(e)) from None
        return Verdict({spec.primary: weighted, f"{spec.primary}_sampled": value,
                        f"{spec.primary}_probabilities": json.dumps(shares)}, reason)
    return Verdict({spec.primary: value}, reason)
