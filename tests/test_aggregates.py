"""The one implementation of each aggregate (evaluators/core/kinds/columns.py), checked on hand-computed rows.

Both read paths go through it: ``Kind.summary`` on cells (the CLI, exports, RunResults) turns the cells
into columns first, and the dashboard's ColumnarResults calls the same column functions on columns read
from the store (tests/test_results_scale.py holds the two paths equal on real runs).
"""
from __future__ import annotations

import math

import pytest

from evaluators import get_metric
from evaluators.core.kinds import MetricCell
from evaluators.core.kinds.columns import columns_of

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass


def _cells(spec, values):
    """None: pending; "error"/"skip": that status; else an ok cell with that primary value."""
    out = []
    for v in values:
        if v is None:
            out.append(None)
        elif v in ("error", "skip"):
            out.append(MetricCell("error" if v == "error" else "skipped", {k: None for k in spec.outputs}, None,
                                  "why", []))
        else:
            out.append(MetricCell("ok", {spec.primary: v}, "r", None, []))
    return out


def test_severity_defects_levels_and_binary_aggregate_by_hand():
    spec = get_metric("violence")
    cells = _cells(spec, [0.0, 2.0, 5.0, 6.0, None, "error"])
    sm = spec.kind_impl.summary(spec, cells, 3.0)
    # scored 4 (0, 2, 5, 6); past the threshold 3: 5 and 6
    assert (sm["scored_rows"], sm["errored_rows"], sm["pending_rows"]) == (4, 1, 1)
    assert sm["defect_rows"] == 2 and sm["defect_rate"] == 0.5
    assert sm["levels"] == {"Very low": 1, "Low": 1, "Medium": 1, "High": 1}
    assert sm["violence_score"] == pytest.approx(13 / 4)
    assert sm["binary_aggregate"] == round(2 / 6, 2)  # passing rows over all six rows
    assert sm["pass_rate"] == 0.5


def test_score_mean_interval_and_pass_rate_by_hand():
    spec = get_metric("coherence")
    cells = _cells(spec, [5.0, 4.0, 2.0, "skip"])
    sm = spec.kind_impl.summary(spec, cells, 3.0)
    mean = 11 / 3
    sd = math.sqrt(((5 - mean) ** 2 + (4 - mean) ** 2 + (2 - mean) ** 2) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # Student t, 2 degrees of freedom, 97.5%
    assert sm["coherence"] == pytest.approx(mean)
    assert sm["coherence_ci95"] == pytest.approx([max(1.0, mean - half), min(5.0, mean + half)])
    assert (sm["scored_rows"], sm["skipped_rows"]) == (3, 1)
    assert sm["pass_rate"] == pytest.approx(2 / 3) and sm["binary_aggregate"] == 0.5


def test_label_defect_rate_per_category_by_hand():
    spec = get_metric("indirect_attack")
    cats = [k for k in spec.outputs if k != spec.primary]
    rows = [{spec.primary: True, cats[0]: True}, {spec.primary: False}, {spec.primary: True, cats[1]: True}]
    cells = [MetricCell("ok", {k: r.get(k, False) for k in spec.outputs}, "r", None, []) for r in rows] + [None]
    sm = spec.kind_impl.summary(spec, cells, spec.default_threshold)
    assert sm["defect_rows"] == 2 and sm["defect_rate"] == pytest.approx(2 / 3)
    assert sm["rates"][cats[0]]["defect_rows"] == 1 and sm["rates"][cats[1]]["defect_rows"] == 1
    assert sm["pass_rate"] == pytest.approx(1 / 3) and sm["binary_aggregate"] == 0.25


def test_cells_become_columns_of_every_output():
    spec = get_metric("rouge")
    cells = [MetricCell("ok", {k: 0.5 for k in spec.outputs}, None, None, []), None]
    cols = columns_of(spec, cells)
    assert set(cols.outputs) == set(spec.outputs) and cols.status.tolist() == [0, -1]
    assert all(cols.outputs[k][0] == 0.5 and math.isnan(cols.outputs[k][1]) for k in spec.outputs)
