"""Kinds of metric value: how a judge reply is parsed, turns are combined, row keys are
written and rows are aggregated.

A metric declares its kind in the registry (``MetricSpec.kind``); everything that depends
on the kind lives in one class here, so results, exports and the dashboard never branch
on a metric's name. ``score`` (1-5, 0-1, 1-10: mean, pass rate) is :class:`Kind` itself;
``severity`` (0-7 with levels, defect rate), ``label`` (true/false with categories) and
``pairwise`` (two responses, one verdict) subclass it in their own modules.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..stats import mean_ci, wilson

if TYPE_CHECKING:
    from ..registry import MetricSpec
    from ..store import Result


@dataclass
class Verdict:
    """What a metric's parser makes of one judge reply.

    Attributes:
        outputs: output key -> value; ``outputs[spec.primary]`` is the row's primary value
            (a number, or a bool for labels). Other keys may hold numbers, bools or text.
        reason: the judge's explanation, shown as the row's reasoning.
    """

    outputs: dict[str, Any]
    reason: str | None = None


@dataclass
class MetricCell:
    """One row's outcome for one metric, turns combined."""

    status: str  # ok | error | skipped
    outputs: dict[str, Any]
    reason: str | None
    error: str | None
    turns: list["Result"]
    # The turn that decided the row (the worst one for severities), None when turns are averaged.
    decisive_turn: int | None = None

    @property
    def value(self) -> float | None:
        v = next(iter(self.outputs.values()), None) if self.outputs else None
        return None if v is None else float(v)


def _reason_of(results: list["Result"]) -> str | None:
    if len(results) == 1:
        return results[0].reason
    return " | ".join(f"Turn {r.turn + 1}: {r.reason}" for r in results if r.reason) or None


class Kind:
    """The ``score`` kind: a number on a scale; mean over turns; pass when at or past the threshold."""

    name = "score"

    # ------------------------------------------------------------ one reply
    def parse(self, spec: "MetricSpec", text: str) -> Verdict:
        """Judge reply -> verdict. Raises ``templates.ReplyError`` for an unusable reply (never a guess)."""
        from ..templates import parse_score_reply

        lo, hi = spec.score_range
        p = parse_score_reply(text, lo, hi, integer=spec.integer)
        return Verdict({spec.primary: p.score}, p.reason)

    # ------------------------------------------------------------ one row
    def combine(self, spec: "MetricSpec", results: list["Result"]) -> MetricCell:
        """A row's results for one metric -> one cell (any errored turn errs the row)."""
        results = sorted(results, key=lambda r: r.turn)
        errors = [r for r in results if r.status == "error"]
        if errors:
            msg = errors[0].error if len(results) == 1 else "; ".join(f"turn {r.turn + 1}: {r.error}" for r in errors)
            return MetricCell("error", {k: None for k in spec.outputs}, None, msg, results)
        ok = [r for r in results if r.status == "ok"]
        if not ok:
            why = "; ".join(r.error or "" for r in results) or "not computed"
            return MetricCell("skipped", {k: None for k in spec.outputs}, None, why, results)
        return self.combine_ok(spec, ok, results)

    def combine_ok(self, spec: "MetricSpec", ok: list["Result"], results: list["Result"]) -> MetricCell:
        """Scores: the mean of the scored turns (a conversation's score), reasons joined by turn."""
        outputs = {k: math.fsum(float(r.outputs[k]) for r in ok) / len(ok) for k in spec.outputs}
        return MetricCell("ok", outputs, _reason_of(ok), None, results)

    def passed(self, spec: "MetricSpec", cell: MetricCell | None, threshold: float) -> bool | None:
        if cell is None or cell.status != "ok" or cell.value is None:
            return None
        return spec.passes(cell.value, threshold)

    def turn_passed(self, spec: "MetricSpec", value: float | None, threshold: float) -> bool | None:
        return None if value is None else spec.passes(float(value), threshold)

    # ------------------------------------------------------------ row keys
    def row_keys(self, spec: "MetricSpec", cell: MetricCell | None, threshold: float,
                 conversation: bool) -> dict[str, Any]:
        """Keys under ``outputs.<metric>.`` for one row (Azure AI Evaluation SDK names)."""
        out: dict[str, Any] = {k: (cell.outputs.get(k) if cell else None) for k in spec.outputs}
        if spec.is_judge:
            out[spec.reason_key] = cell.reason if cell else None
        p = self.passed(spec, cell, threshold)
        out[spec.result_key] = None if p is None else ("pass" if p else "fail")
        out[spec.threshold_key] = threshold
        if cell is None:
            out[spec.error_key] = "not computed (run incomplete)"
        elif cell.status != "ok":
            out[spec.error_key] = cell.error
        if cell and conversation and cell.turns:
            out["evaluation_per_turn"] = self.per_turn(spec, cell, threshold)
        return out

    def per_turn(self, spec: "MetricSpec", cell: MetricCell, threshold: float) -> dict[str, list]:
        per = {k: [t.outputs.get(k) if t.outputs else None for t in cell.turns] for k in spec.outputs}
        if spec.is_judge:
            per[spec.reason_key] = [t.reason for t in cell.turns]
        verdicts = [self.turn_passed(spec, t.value, threshold) for t in cell.turns]
        per[spec.result_key] = [None if v is None else ("pass" if v else "fail") for v in verdicts]
        return per

    # ------------------------------------------------------------ aggregates
    def summary(self, spec: "MetricSpec", cells: list[MetricCell | None], threshold: float) -> dict[str, Any]:
        """Counts, means with 95% intervals and the pass rate (with its interval) of one metric.

        Errored, skipped and pending rows are counted apart and left out of every denominator.
        """
        ok = [c for c in cells if c and c.status == "ok"]
        out: dict[str, Any] = {
            "scored_rows": len(ok),
            "errored_rows": sum(1 for c in cells if c and c.status == "error"),
            "skipped_rows": sum(1 for c in cells if c and c.status == "skipped"),
            "pending_rows": sum(1 for c in cells if c is None),
            "threshold": threshold,
        }
        low, high = spec.score_range
        for k in spec.outputs:
            m, lo, hi = mean_ci([float(c.outputs[k]) for c in ok])
            out[k] = m
            # A t-interval can reach past the scale on few rows; the scale bounds what is possible.
            out[f"{k}_ci95"] = [None if lo is None else max(low, lo), None if hi is None else min(high, hi)]
        passes = sum(1 for c in ok if self.passed(spec, c, threshold))
        rate, lo, hi = wilson(passes, len(ok))
        out["pass_rate"], out["pass_rate_ci95"] = rate, [lo, hi]
        return out

    def flat(self, spec: "MetricSpec", sm: dict[str, Any]) -> dict[str, Any]:
        """``metrics.json`` entries (``<metric>.<key>``) from :meth:`summary`."""
        n, p = spec.name, spec.prefix
        flat: dict[str, Any] = {}
        for k in spec.outputs:
            flat[f"{n}.{k}"] = sm[k]
            flat[f"{n}.{k}_ci95_low"], flat[f"{n}.{k}_ci95_high"] = sm[f"{k}_ci95"]
        flat[f"{n}.{p}_pass_rate"] = sm["pass_rate"]
        flat[f"{n}.{p}_pass_rate_ci95_low"], flat[f"{n}.{p}_pass_rate_ci95_high"] = sm["pass_rate_ci95"]
        flat[f"{n}.{p}_threshold"] = sm["threshold"]
        for k in ("scored_rows", "errored_rows", "skipped_rows", "pending_rows"):
            flat[f"{n}.{k}"] = sm[k]
        return flat


_KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    if kind.name in _KINDS:
        raise ValueError(f"kind {kind.name} registered twice")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    if name not in _KINDS:
        _load()
    return _KINDS[name]


def kind_names() -> tuple[str, ...]:
    _load()
    return tuple(_KINDS)


def _load() -> None:
    # Each kind module registers itself on import; new kinds add one import here.
    from . import pairwise, score, wb_score  # noqa: F401

