"""How a metric's work on one row is cut into units: a :class:`RowTask` per judged or computed turn.

Metrics plan their own (``MetricSpec.row_tasks``) or take :func:`default_row_tasks`; the runner, and
the read layer re-creating what a judge call was given, both plan through here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.data.dataset import Dataset


@dataclass
class RowTask:
    """One judged or computed unit of a row, as a metric plans it.

    ``turn`` keys the result (an assistant turn; for pairwise metrics, the order the two
    responses are shown in); ``mode`` picks the template; ``skip`` says why the unit is
    recorded as skipped instead of computed; ``facts`` (e.g. response lengths for WildBench's
    length rule) are stored with the verdict's outputs, so aggregates read them from the store.
    """

    turn: int
    values: dict[str, Any]
    mode: str
    skip: str | None = None
    facts: dict[str, Any] | None = None


def default_row_tasks(ds: "Dataset", i: int, mspec: "MetricSpec") -> list[RowTask]:
    """One task per single-turn row; per assistant turn for conversations (skipped when the
    turn lacks a field the metric needs there)."""
    if ds.shape == "single":
        return [RowTask(0, ds.canonical(i), "single")]
    out = []
    for t in ds.turns(i):
        values = {"query": t.query, "response": t.response, "context": t.context,
                  "ground_truth": t.ground_truth, "history": t.history}
        lacking = [f for f in mspec.conversation_fields or () if not values.get(f)]
        if lacking:
            out.append(RowTask(t.index, values, "turn", skip=f"turn {t.index + 1} has no {', '.join(lacking)}"))
            continue
        gt_rubric = t.ground_truth and mspec.templates and mspec.templates.turn_ground_truth
        out.append(RowTask(t.index, values, "turn_ground_truth" if gt_rubric else "turn"))
    return out
