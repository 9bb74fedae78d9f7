"""How far a judge agrees with itself: for a run judged K times per task (``--repeat K``), the share of rows
whose pass/fail verdict flips between judgments, Fleiss' kappa across the judgments on the metric's scale,
and which rows flip (a review queue of them is where a person helps most)."""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.core.agreement import fleiss_kappa
from evaluators.core.scales import scale, snap
from evaluators.core.stats import wilson
from evaluators.core.votes import VOTES
from evaluators.read.results import RunResults


def repeat_agreement(res: RunResults, name: str) -> dict[str, Any] | None:
    """Self-agreement of one metric's repeated judgments; None when its rows were judged once.

    Returns:
        ``repeat`` (judgments per task), ``rows`` (rows with repeated judgments), ``flip_rows`` (row indices
        whose verdict differs between judgments, on any turn), ``flip_share`` with ``flip_share_ci95``
        (Wilson), and ``fleiss_kappa`` over every judged unit (a row, or a conversation's turn).
    """
    spec = next(s for s in res.specs if s.name == name)
    threshold = res.thresholds[name]
    units: list[list[float]] = []
    rows, flips = 0, []
    for i, cell in enumerate(res.cells_of(name)):
        if cell is None or cell.status != "ok":
            continue
        votes_of_row = [list(t.outputs[VOTES]) for t in cell.turns if t.outputs and len(t.outputs.get(VOTES) or []) > 1]
        if not votes_of_row:
            continue
        rows += 1
        units += votes_of_row
        if any(len({spec.kind_impl.turn_passed(spec, float(v), threshold) for v in votes}) > 1 for votes in votes_of_row):
            flips.append(i)
    if not units:
        return None
    k = min(len(u) for u in units)
    values = [c.value for c in scale(spec)]
    counts = np.zeros((len(units), len(values)), dtype=int)
    for row, votes in enumerate(units):
        for v in votes[:k]:
            counts[row, values.index(snap(spec, float(v)))] += 1
    share, lo, hi = wilson(len(flips), rows)
    try:
        kappa = fleiss_kappa(counts)
    except ValueError:
        kappa = None
    return {"repeat": k, "rows": rows, "flip_rows": flips, "flip_share": share, "flip_share_ci95": [lo, hi],
            "fleiss_kappa": kappa}


def repeat_keys(res: RunResults) -> dict[str, Any]:
    """``metrics.json`` keys of the metrics judged several times: ``<metric>.repeat``,
    ``<metric>.repeat_flip_share`` (with ``_ci95_low`` / ``_ci95_high``) and ``<metric>.repeat_fleiss_kappa``."""
    out: dict[str, Any] = {}
    for spec in res.specs:
        if not spec.is_judge:
            continue
        got = repeat_agreement(res, spec.name)
        if got is None:
            continue
        n = spec.name
        out[f"{n}.repeat"] = got["repeat"]
        out[f"{n}.repeat_flip_share"] = got["flip_share"]
        out[f"{n}.repeat_flip_share_ci95_low"], out[f"{n}.repeat_flip_share_ci95_high"] = got["flip_share_ci95"]
        out[f"{n}.repeat_fleiss_kappa"] = got["fleiss_kappa"]
    return out
