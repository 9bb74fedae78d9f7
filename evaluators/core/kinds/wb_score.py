"""The ``wb_score`` kind: WildBench's checklist-guided 1-10 score with strengths and weaknesses.

Like ``score`` (mean, pass rate at a threshold), plus the judge's strengths and weaknesses as row
keys and WildBench's leaderboard aggregates (``WB_score``, category scores from task tags,
``WB_score.task_macro``, each with a 95% bootstrap interval; see :mod:`evaluators.suites.wildbench`). Its own
kind because text outputs must reach the row keys and the aggregates need each row's stored facts
(response length, empty or truncated, task groups, model), which the plain score kind drops.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from evaluators.core.kinds.base import Kind, MetricCell, Verdict, register_kind
from evaluators.core.replies import ReplyError, answer_body, as_text, tolerant_fields
from evaluators.core.wb_rules import score_aggregates, score_rows_from_cells

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.store.schema import Result

FACTS = ("model", "length", "excluded", "groups")


def parse_score_reply(spec: "MetricSpec", text: str) -> Verdict:
    """``{"strengths", "weaknesses", "score"}`` -> verdict; the score may be a string ("7").

    Raises:
        ReplyError: no score, a score that is not a number, or one outside the metric's range.
    """
    body = answer_body(text)
    got = tolerant_fields(body, "score", ("strengths", "weaknesses", "score"))
    raw = got["score"]
    if raw is None:
        raise ReplyError("no 'score' in the reply")
    if isinstance(raw, bool):
        raise ReplyError(f"score is not a number: {raw!r}")
    try:
        score = float(str(raw).strip().strip("[]").strip())
    except ValueError:
        raise ReplyError(f"score is not a number: {raw!r}") from None
    lo, hi = spec.score_range
    if score != score or not lo <= score <= hi:
        raise ReplyError(f"score {raw!r} is outside {lo:g}-{hi:g}")
    p = spec.prefix
    strengths, weaknesses = as_text(got["strengths"]), as_text(got["weaknesses"])
    reason = "\n".join(x for x in (strengths and f"Strengths: {strengths}", weaknesses and f"Weaknesses: {weaknesses}") if x)
    return Verdict({spec.primary: score, f"{p}_strengths": strengths, f"{p}_weaknesses": weaknesses}, reason or None)


class WBScoreKind(Kind):
    name = "wb_score"
    columnar = False  # aggregates need the facts stored with each verdict: summary reads the cells

    def parse(self, spec: "MetricSpec", text: str):
        return parse_score_reply(spec, text)

    def combine_ok(self, spec: "MetricSpec", ok: list["Result"], results: list["Result"]) -> MetricCell:
        p = spec.prefix
        first = ok[0].outputs
        outputs = {spec.primary: math.fsum(float(r.outputs[spec.primary]) for r in ok) / len(ok)}
        for key in (f"{p}_strengths", f"{p}_weaknesses", *FACTS):
            outputs[key] = first.get(key)
        return MetricCell("ok", outputs, ok[0].reason if len(ok) == 1 else None, None, results)

    def row_keys(self, spec, cell, threshold, conversation, inputs=None) -> dict[str, Any]:
        out = super().row_keys(spec, cell, threshold, False, inputs)
        for key in (f"{spec.prefix}_strengths", f"{spec.prefix}_weaknesses"):
            out[key] = cell.outputs.get(key) if cell else None
        return out

    def summary(self, spec, cells, threshold) -> dict[str, Any]:
        out = super().summary(spec, cells, threshold)
        agg = score_aggregates(score_rows_from_cells([c for c in cells if c and c.status == "ok"], spec.primary))
        out.update({k: v for k, v in agg.items() if k not in ("records", "score")})
        return out

    def flat(self, spec, sm) -> dict[str, Any]:
        flat = super().flat(spec, sm)
        n = spec.name
        for key, v in sm.items():
            if key.startswith("WB_score") and not key.endswith("_ci95"):
                flat[f"{n}.{key}"] = v
                flat[f"{n}.{key}_ci95_low"], flat[f"{n}.{key}_ci95_high"] = sm[f"{key}_ci95"]
        flat[f"{n}.Length"] = sm.get("Length")
        return flat


WB_SCORE = register_kind(WBScoreKind())
