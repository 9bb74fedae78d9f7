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

from evaluators.core.kinds import Kind, MetricCell, register_kind

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.store.store import Result

FACTS = ("model", "length", "excluded", "groups")


class WBScoreKind(Kind):
    name = "wb_score"

    def parse(self, spec: "MetricSpec", text: str):
        from evaluators.metrics._wildbench import parse_score_reply

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
        from evaluators.suites.wildbench import score_aggregates, score_rows_from_cells

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
