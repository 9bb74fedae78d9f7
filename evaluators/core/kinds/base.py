"""The kinds' shared parts: :class:`Verdict`, :class:`MetricCell`, the score kind :class:`Kind` and the
registry of kinds (the package imports every kind's module, which registers itself).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluators.core.replies import parse_score_reply

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.store.schema import Result
    from evaluators.core.kinds.columns import MetricColumns
    from evaluators.read.judge_inputs import JudgeInputs


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
    # A warning a metric attached to its value (e.g. the SDK tokenizer dropped every word: use
    # the metric's unicode variant); the value itself stands.
    note: str | None = None

    @property
    def value(self) -> float | None:
        v = next(iter(self.outputs.values()), None) if self.outputs else None
        return None if v is None else float(v)


def _reason_of(results: list["Result"]) -> str | None:
    if len(results) == 1:
        return results[0].reason
    return " | ".join(f"Turn {r.turn + 1}: {r.reason}" for r in results if r.reason) or None


def _note_of(results: list["Result"]) -> str | None:
    notes = dict.fromkeys(r.outputs.get(NOTE) for r in results if r.outputs and r.outputs.get(NOTE))
    return "; ".join(notes) or None


NOTE = "_note"  # the output key under which a metric's compute function leaves a warning


class Kind:
    """The ``score`` kind: a number on a scale; mean over turns; pass when at or past the threshold."""

    name = "score"

    # ------------------------------------------------------------ one reply
    def parse(self, spec: "MetricSpec", text: str) -> Verdict:
        """Judge reply -> verdict. Raises ``templates.ReplyError`` for an unusable reply (never a guess)."""
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
        if len(ok) == 1:  # a single-turn row (most rows): its own values, reason and note, as below with n=1
            r = ok[0]
            return MetricCell("ok", {k: float(r.outputs[k]) for k in spec.outputs}, r.reason, None, results,
                              note=r.outputs.get(NOTE) or None)
        outputs = {k: math.fsum(float(r.outputs[k]) for r in ok) / len(ok) for k in spec.outputs}
        return MetricCell("ok", outputs, _reason_of(ok), None, results, note=_note_of(ok))

    def passed(self, spec: "MetricSpec", cell: MetricCell | None, threshold: float) -> bool | None:
        if cell is None or cell.status != "ok" or cell.value is None:
            return None
        return spec.passes(cell.value, threshold)

    def turn_passed(self, spec: "MetricSpec", value: float | None, threshold: float) -> bool | None:
        return None if value is None else spec.passes(float(value), threshold)

    # ------------------------------------------------------------ row keys
    # Keys follow azure-ai-evaluation 1.18's ``evaluate()``: with K = ``spec.prefix`` (the SDK's
    # result key, e.g. ``coherence``, ``f1_score``, ``rouge``) every row has K, K_score, K_passed,
    # K_result, K_reason, K_status, K_threshold and K_properties, and a conversation adds each of
    # them per turn as a list under ``evaluation_per_turn.<key>``. Our own keys (every output of the
    # metric, ``<metric>_error``) are kept beside them.

    # K_status of a row: the SDK writes "completed" or "skipped"; an error or a pending row
    # has no SDK output at all, so those two say what happened instead.
    STATUS = {"ok": "completed", "skipped": "skipped", "error": "error"}

    def result_label(self, spec: "MetricSpec", passed: bool | None, status: str | None) -> str | None:
        """K_result: "pass"/"fail"; "not_applicable" for a skipped row or turn (as the SDK writes it)."""
        if status == "skipped":
            return "not_applicable"
        return None if passed is None else ("pass" if passed else "fail")

    def properties(self, spec: "MetricSpec", outputs: dict[str, Any] | None, results: list["Result"],
                   threshold: float, inputs: "JudgeInputs | None" = None) -> dict[str, Any] | None:
        """K_properties: judge usage and the call (as SDK 1.18 writes it), or each output of a many-output
        metric with its own verdict (ROUGE: precision, recall, F1); None for a single-number classic metric.

        A judge metric's: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (summed over the
        results given: a conversation's turns), ``finish_reason``, ``model``, ``sample_input`` (what the
        call was given, re-created from the run's template and the row by ``inputs``; None without it)
        and ``sample_output`` (the reply as a chat message, JSON text). The last four are the last
        result's, as the SDK's row of a conversation carries its last turn's.

        Outputs other than the primary one are held to the metric's default threshold, as the SDK
        holds ROUGE's precision and recall to their own defaults when only the F1 threshold is set.
        """
        if spec.is_judge:
            if not results:
                return None
            pt = [r.prompt_tokens for r in results if r.prompt_tokens is not None]
            ct = [r.completion_tokens for r in results if r.completion_tokens is not None]
            model = next((r.meta.get("model") for r in results if r.meta and r.meta.get("model")), None)
            last = results[-1]
            called = last.status != "skipped"  # a skipped turn made no call: nothing to show
            if spec.properties and not called:  # a metric writing its own properties writes none for no call
                return None
            # a metric's own properties first (an agent metric's: the judge's reply's), then the call's
            own = spec.properties(spec, last.outputs or {}, threshold) if spec.properties else {}
            return {**own, "prompt_tokens": sum(pt) if pt else None, "completion_tokens": sum(ct) if ct else None,
                    "total_tokens": sum(pt) + sum(ct) if pt or ct else None,
                    # "" when the reply did not say (the SDK's own value then); None when no call was made
                    "finish_reason": (last.meta or {}).get("finish_reason") or "" if called else None,
                    "model": model,
                    "sample_input": inputs.sample_input(spec, last) if inputs is not None and called else None,
                    # the judge's reply as the SDK records it: the chat message, as JSON text
                    "sample_output": (json.dumps([{"role": "assistant", "content": last.raw}])
                                      if last.raw is not None else None)}
        if spec.properties is not None:
            return None if outputs is None else spec.properties(spec, outputs, threshold)
        if len(spec.outputs) < 2 or outputs is None:
            return None
        props: dict[str, Any] = {}
        for k in spec.outputs:
            props[k] = outputs.get(k)
        for k in spec.outputs:
            t = threshold if k == spec.primary else spec.default_threshold
            v = outputs.get(k)
            ok = None if v is None else spec.passes(float(v), t)
            props[f"{k}_result"] = None if ok is None else ("pass" if ok else "fail")
            props[f"{k}_passed"] = ok
            props[f"{k}_threshold"] = t
        return props

    def sdk_keys(self, spec: "MetricSpec", value: float | None, passed: bool | None, status: str | None,
                 reason: str | None, threshold: float, properties: dict | None) -> dict[str, Any]:
        """The eight SDK keys of one row or one turn."""
        k = spec.prefix
        return {k: value, f"{k}_score": value, f"{k}_passed": passed,
                f"{k}_result": self.result_label(spec, passed, status), f"{k}_reason": reason,
                f"{k}_status": self.STATUS.get(status, "pending") if status else "pending",
                f"{k}_threshold": threshold if spec.stated_threshold is None else spec.stated_threshold,
                f"{k}_properties": properties}

    def row_keys(self, spec: "MetricSpec", cell: MetricCell | None, threshold: float,
                 conversation: bool, inputs: "JudgeInputs | None" = None) -> dict[str, Any]:
        """Keys under ``outputs.<metric>.`` for one row (Azure AI Evaluation SDK 1.18 names).

        ``inputs`` re-creates what each judge call was given (``K_properties.sample_input``).
        """
        out: dict[str, Any] = {k: (cell.outputs.get(k) if cell else None) for k in spec.outputs}
        p = self.passed(spec, cell, threshold)
        props = self.properties(spec, cell.outputs if cell and cell.status == "ok" else None,
                                cell.turns if cell else [], threshold, inputs)
        out.update(self.sdk_keys(spec, cell.outputs.get(spec.primary) if cell and cell.status == "ok" else None, p,
                                 cell.status if cell else None, cell.reason if cell else None, threshold, props))
        out.update(self.error_keys(spec, cell))
        if cell is not None and cell.note:
            out[f"{spec.prefix}_note"] = cell.note
        if cell is not None and cell.status != "ok":
            if cell.status == "skipped":
                out[f"{spec.prefix}_reason"] = f"Not applicable: {cell.error}"
        if cell and conversation and cell.turns:
            out.update({f"evaluation_per_turn.{k}": v for k, v in self.per_turn(spec, cell, threshold, inputs).items()})
        return out

    def per_turn(self, spec: "MetricSpec", cell: MetricCell, threshold: float,
                 inputs: "JudgeInputs | None" = None) -> dict[str, list]:
        """Every row key as a list over the row's turns (the SDK's flattened ``evaluation_per_turn``)."""
        per: dict[str, list] = {}
        for t in cell.turns:
            ok = t.status == "ok"
            value = t.outputs.get(spec.primary) if ok and t.outputs else None
            keys = {k: (t.outputs.get(k) if ok and t.outputs else None) for k in spec.outputs}
            keys.update(self.sdk_keys(
                spec, value, self.turn_passed(spec, value, threshold) if ok else None, t.status,
                t.reason if ok else (f"Not applicable: {t.error}" if t.status == "skipped" else None),
                threshold, self.properties(spec, t.outputs if ok else None, [t], threshold, inputs)))
            for k, v in keys.items():
                per.setdefault(k, []).append(v)
        return per

    @staticmethod
    def error_keys(spec: "MetricSpec", cell: MetricCell | None) -> dict[str, Any]:
        """``<metric>_error`` for a row that is pending, errored or skipped (nothing for a scored one)."""
        if cell is None:
            return {spec.error_key: "not computed (run incomplete)"}
        return {spec.error_key: cell.error} if cell.status != "ok" else {}

    # ------------------------------------------------------------ aggregates
    # One implementation, over columns (kinds/columns.py): the dashboard's view calls the column_* methods on
    # columns read from the store; ``summary`` turns a list of cells into the same columns first.
    columnar = True  # aggregates need only each row's status, numeric outputs and note

    def column_verdicts(self, spec: "MetricSpec", cols: "MetricColumns", threshold: float):
        """Per row 1 (pass), 0 (fail) or -1 (no verdict) at ``threshold``, as an int8 array."""
        from evaluators.core.kinds.columns import threshold_verdicts

        return threshold_verdicts(spec, cols, threshold)

    def column_means(self, spec: "MetricSpec", cols: "MetricColumns") -> dict[str, Any]:
        """The threshold-free part of :meth:`column_summary` (a view caches it across thresholds)."""
        from evaluators.core.kinds.columns import means

        return means(spec, cols)

    def column_summary(self, spec: "MetricSpec", cols: "MetricColumns", threshold: float,
                       mean_part: dict[str, Any] | None = None) -> dict[str, Any]:
        """Counts, means with 95% intervals and the pass rate (with its interval) of one metric."""
        from evaluators.core.kinds.columns import score_summary

        return score_summary(spec, cols, threshold, self.column_verdicts(spec, cols, threshold), mean_part)

    def summary(self, spec: "MetricSpec", cells: list[MetricCell | None], threshold: float) -> dict[str, Any]:
        """:meth:`column_summary` of ``cells`` (None for a pending row), turned into columns.

        Errored, skipped and pending rows are counted apart and left out of every denominator,
        except ``binary_aggregate``, which (as in the SDK) counts passes over all rows.
        """
        from evaluators.core.kinds.columns import columns_of

        return self.column_summary(spec, columns_of(spec, cells), threshold)

    def flat(self, spec: "MetricSpec", sm: dict[str, Any]) -> dict[str, Any]:
        """``metrics.json`` entries (``<metric>.<key>``) from :meth:`summary`.

        The SDK 1.18 entries: ``<metric>.K`` and ``<metric>.K_score`` (mean of the primary value over
        scored rows), ``<metric>.K_passed`` (share of scored rows that pass) and
        ``<metric>.binary_aggregate`` (passing rows over all rows, rounded to 2 places).
        """
        n, p = spec.name, spec.prefix
        flat: dict[str, Any] = {}
        for k in spec.outputs:
            flat[f"{n}.{k}"] = sm[k]
            flat[f"{n}.{k}_ci95_low"], flat[f"{n}.{k}_ci95_high"] = sm[f"{k}_ci95"]
        # .get: a kind whose summary has other aggregates (rates, not means) still gets the rest
        flat[f"{n}.{p}"] = flat[f"{n}.{p}_score"] = sm.get(spec.primary)
        flat[f"{n}.{p}_passed"] = sm["pass_rate"]
        flat[f"{n}.binary_aggregate"] = sm.get("binary_aggregate")
        flat[f"{n}.{p}_pass_rate"] = sm["pass_rate"]
        flat[f"{n}.{p}_pass_rate_ci95_low"], flat[f"{n}.{p}_pass_rate_ci95_high"] = sm["pass_rate_ci95"]
        flat[f"{n}.{p}_threshold"] = sm["threshold"]
        for k in ("scored_rows", "errored_rows", "skipped_rows", "pending_rows"):
            flat[f"{n}.{k}"] = sm[k]
        if sm.get("noted_rows"):  # rows whose value came with a warning (see MetricCell.note)
            flat[f"{n}.noted_rows"] = sm["noted_rows"]
        return flat


_KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    if kind.name in _KINDS:
        raise ValueError(f"kind {kind.name} registered twice")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    return _KINDS[name]


def kind_names() -> tuple[str, ...]:
    return tuple(_KINDS)
