"""The ``pairwise`` kind: two responses, one verdict (``A++``, ``A+``, ``A=B``, ``B+``, ``B++``).

A row's results are its judged orders: turn 0 shows the row's responses as A and B, turn 1 shows
them swapped (the position-bias check). Each turn's outputs hold the judge's label as shown and,
from the planner, both response lengths, whether either is empty or truncated, task groups and the
two model names. Combined, a row's value is the reward for model A: +100 / +50 / 0 / -50 / -100 after
the order-consistency rule (a flip counts as a tie) and the length rule (metric param
``length_penalty``, K characters; -1 disables it). Aggregates follow WildBench's leaderboard (see
:mod:`evaluators.core.wb_rules`).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from evaluators.core.kinds.base import Kind, MetricCell, Verdict, register_kind
from evaluators.core.replies import ReplyError, answer_body, as_text, tolerant_fields
from evaluators.core.wb_rules import (DEFAULT_LENGTH_PENALTY, LABEL_REWARD, PAIR_FIELDS, bootstrap_mean,
                                      consistent, length_rule, mixture, pair_reason, pair_rows_from_cells,
                                      pairwise_aggregates)

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.store.schema import Result

MIRROR = {"A++": "B++", "A+": "B+", "A=B": "A=B", "B+": "A+", "B++": "A++"}
# Per-turn details the parser keeps; shown in the inspector, not as row keys.
DETAILS = ("analysis_A", "analysis_B", "reason_tie", "reason_A", "reason_B")


def _param(spec: "MetricSpec", name: str, default: Any) -> Any:
    return dict(spec.params).get(name, default)



def normalise_choice(raw: Any) -> str:
    """``" [A+] "`` -> ``"A+"``; raises ReplyError unless it is one of A++, A+, A=B, B+, B++."""
    label = re.sub(r"[\s\[\]`'\"]", "", str(raw)).upper() if raw is not None else ""
    if label not in LABEL_REWARD:
        raise ReplyError(f"choice {raw!r} is not one of A++, A+, A=B, B+, B++")
    return label


def parse_pairwise_reply(spec: "MetricSpec", text: str) -> Verdict:
    """The pairwise JSON -> verdict: the label as shown, its reward for the reply shown as A, and
    each analysis and reason.

    Raises:
        ReplyError: no choice, or a choice that is not one of the five labels.
    """
    body = answer_body(text)
    got = tolerant_fields(body, "choice", (*PAIR_FIELDS, "choice"))
    if got["choice"] is None:
        raise ReplyError("no 'choice' in the reply")
    label = normalise_choice(got["choice"])
    details = {short: as_text(got[long]) for long, short in PAIR_FIELDS.items()}
    return Verdict({spec.primary: float(LABEL_REWARD[label]), "choice": label, **details}, pair_reason(details))


class PairwiseKind(Kind):
    name = "pairwise"
    columnar = False  # aggregates need the facts stored with each verdict: summary reads the cells

    def parse(self, spec: "MetricSpec", text: str):
        return parse_pairwise_reply(spec, text)

    def combine_ok(self, spec: "MetricSpec", ok: list["Result"], results: list["Result"]) -> MetricCell:
        p = spec.prefix
        by_turn = {r.turn: r for r in ok}
        straight, swapped = by_turn.get(0), by_turn.get(1)
        facts = dict((straight or swapped).outputs)
        rewards = []  # for model A
        if straight:
            rewards.append(LABEL_REWARD[straight.outputs["choice"]])
        if swapped:
            rewards.append(-LABEL_REWARD[swapped.outputs["choice"]])
        flipped = None
        if len(rewards) == 2:
            before, flipped = consistent(*rewards)
        else:
            before = rewards[0]
        k = int(_param(spec, "length_penalty", DEFAULT_LENGTH_PENALTY))
        after = length_rule(before, int(facts.get("len_A") or 0), int(facts.get("len_B") or 0), k)
        choice = straight.outputs["choice"] if straight else MIRROR[swapped.outputs["choice"]]
        outputs = {
            spec.primary: float(after),
            f"{p}_choice": choice,
            f"{p}_choice_swapped": swapped.outputs["choice"] if swapped else None,
            f"{p}_flipped": flipped,
            f"{p}_length_adjusted": after != before,
            "reward_before_length_rule": float(before),
            **{k2: facts.get(k2) for k2 in ("model_A", "model_B", "len_A", "len_B", "excluded", "groups")},
        }
        reasons = []
        for r, label in ((straight, "A/B order"), (swapped, "swapped order")):
            if r is not None and r.reason:
                reasons.append(r.reason if len(by_turn) == 1 else f"[{label}] {r.reason}")
        return MetricCell("ok", outputs, "\n\n".join(reasons) or None, None, results)

    def row_keys(self, spec, cell, threshold, conversation, inputs=None) -> dict[str, Any]:
        out = super().row_keys(spec, cell, threshold, False, inputs)
        p = spec.prefix
        for key in (f"{p}_choice", f"{p}_choice_swapped", f"{p}_flipped", f"{p}_length_adjusted"):
            out[key] = cell.outputs.get(key) if cell else None
        return out

    def summary(self, spec, cells, threshold) -> dict[str, Any]:
        out = super().summary(spec, cells, threshold)
        k = int(_param(spec, "length_penalty", DEFAULT_LENGTH_PENALTY))
        ok = [c for c in cells if c and c.status == "ok"]
        by_ref = pair_rows_from_cells(ok)
        rows = [r for rs in by_ref.values() for r in rs]
        agg = pairwise_aggregates(rows, k)
        out.update({key: v for key, v in agg.items() if key != "records"})
        out["length_penalty"] = k
        out["length_adjusted_rows"] = sum(1 for c in ok if c.outputs.get(f"{spec.prefix}_length_adjusted"))
        both = [c for c in ok if c.outputs.get(f"{spec.prefix}_flipped") is not None]
        out["both_orders_rows"] = len(both)
        flips = [1.0 if c.outputs[f"{spec.prefix}_flipped"] else 0.0 for c in both]
        out["flip_rate"] = sum(flips) / len(flips) if flips else None
        out["flip_rate_ci95"] = bootstrap_mean(flips)
        if len(by_ref) > 1:
            mix = mixture(by_ref, k)
            out["mixture_of_rewards"] = mix["mixture_of_rewards"]
            out["mixture_of_rewards_ci95"] = mix["mixture_of_rewards_ci95"]
            out["references"] = {ref: a["WB_reward"] for ref, a in mix["references"].items()}
        return out

    def flat(self, spec, sm) -> dict[str, Any]:
        flat = super().flat(spec, sm)
        n = spec.name
        for key in ("WB_reward", "WB_reward.task_macro", "mixture_of_rewards", "flip_rate"):
            if key in sm:
                flat[f"{n}.{key}"] = sm[key]
                flat[f"{n}.{key}_ci95_low"], flat[f"{n}.{key}_ci95_high"] = sm[f"{key}_ci95"]
        for key in ("win_much", "win", "tie", "lose", "lose_much", "length_penalty", "length_adjusted_rows",
                    "both_orders_rows"):
            flat[f"{n}.{key}"] = sm[key]
        for ref, v in (sm.get("references") or {}).items():
            flat[f"{n}.WB_reward.ref={ref}"] = v
        return flat


PAIRWISE = register_kind(PairwiseKind())
