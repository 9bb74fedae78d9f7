"""People checking the judge on live traffic (issue 32): per window of event time, how far the judge agrees with
the people who reviewed some of the window's judged traces (Cohen's kappa on pass/fail with its 95% bootstrap
interval, ``core.agreement.agreement_numbers``) and the window's rate corrected by their reviews (prediction-powered
inference, ``core.inference.ppi_mean``: the product's one implementation of each, as the Review page's).

A production trace the rule judged keeps its scores' run and row (monitor_decisions ``run_id``/``row_idx``), so
its reviews are the ``reviews`` rows of that run and row: nothing else records them. All reviews count towards
kappa; only those given in a sampled queue (``review.queues.SAMPLED``: random, stratified) correct the rate, as
on the Review page (rows chosen on purpose would bias it). Each window is its own stratum: its judged traces are
the rows the judge's rate is over, its sampled reviews the rows that correct it.

The rate is the series' (``read.monitor_series.rate_series``): the defect rate for a risk and safety metric, else
the pass rate, at the metric's default threshold, over the rule's latest version's judged traces (turn 0).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy import literal, select

from evaluators.core.agreement import agreement_numbers
from evaluators.core.inference import ppi_mean
from evaluators.core.registry import get_metric
from evaluators.core.scales import consensus, human_pass, reports_defects
from evaluators.store.monitor_rules import MonitorDecisionRow
from evaluators.store.schema import QueueRow, ResultRow, ReviewRow
from evaluators.store.traces import MonitorTraceRow

SAMPLED = ("random", "stratified")  # review.queues.SAMPLED (read sits below review: the names, not the import)


def judged_in_windows(store, project: str, rule: str, version: int, metric: str, since_ns: int, until_ns: int, width: int):
    """(window, run_id, row_idx, judge value) of the range's judged traces, and their reviews (run_id, row_idx,
    reviewer, value, sampled)."""
    t, d, r, rv, q = MonitorTraceRow, MonitorDecisionRow, ResultRow, ReviewRow, QueueRow
    window = ((t.start_ns - literal(since_ns)) // literal(width)).label("w")
    where = (d.project == project, d.rule == rule, d.rule_version == version, d.decision == "judged",
             t.start_ns >= since_ns, t.start_ns < until_ns)
    base = (select().select_from(d).join(t, (t.project == d.project) & (t.trace_id == d.trace_id))
            .join(r, (r.run_id == d.run_id) & (r.row_idx == d.row_idx) & (r.metric == metric) & (r.turn == 0)
                  & (r.status == "ok") & r.value.is_not(None)))
    judged = base.add_columns(window, d.run_id, d.row_idx, r.value).where(*where)
    reviews = (base.add_columns(rv.run_id, rv.row_idx, rv.reviewer, rv.value, q.strategy)
               .join(rv, (rv.run_id == d.run_id) & (rv.row_idx == d.row_idx) & (rv.metric == metric))
               .outerjoin(q, q.id == rv.queue_id)
               .where(*where, rv.value.is_not(None)))
    with store.session() as s:
        return s.execute(judged).all(), s.execute(reviews).all()


def reviewed_series(store, project: str, rule: str, metric: str, since_ns: int, until_ns: int,
                    window_s: int, version: int | None = None, seed: int = 0) -> dict[int, dict[str, Any]]:
    """Per window of [since_ns, until_ns) that holds a reviewed judged trace, keyed by its start (ns):
    ``corrected``, ``low``, ``high`` (the corrected rate and its 95% interval; None while the window has no
    review from a sampled queue), ``kappa``, ``kappa_low``, ``kappa_high`` (None where undefined, e.g. one
    verdict only) and ``reviews`` (the window's reviewed traces). The rule's latest version unless ``version``."""
    if window_s <= 0 or until_ns <= since_ns:
        raise ValueError("a series needs a window over 0 s and a range that ends after it starts")
    if version is None:
        latest = store.monitor_rule(project, rule)
        if latest is None:
            return {}
        version = latest["version"]
    spec = get_metric(metric)
    thr = spec.default_threshold
    width = window_s * 1_000_000_000
    judged, reviews = judged_in_windows(store, project, rule, version, metric, since_ns, until_ns, width)
    by_row: dict[tuple, list[tuple[str, float, bool]]] = defaultdict(list)
    for run_id, row_idx, reviewer, value, strategy in reviews:
        by_row[(run_id, row_idx)].append((reviewer, float(value), strategy in SAMPLED))
    windows: dict[int, list[tuple]] = defaultdict(list)
    for w, run_id, row_idx, value in judged:
        windows[int(w)].append(((run_id, row_idx), float(value)))
    sign = (lambda x: 1 - x) if reports_defects(spec) else (lambda x: x)
    out: dict[int, dict[str, Any]] = {}
    for w in sorted(windows):
        rows = windows[w]
        verdicts = np.array([float(spec.passes(v, thr)) for _, v in rows])
        seen = [i for i, (key, _) in enumerate(rows) if key in by_row]
        if not seen:
            continue
        human = [[v for _, v, _ in by_row[rows[i][0]]] for i in seen]
        jp = verdicts[seen].astype(int)
        hp = np.array([int(human_pass(spec, consensus(spec, vs), thr)) for vs in human])
        values = np.array([v for _, v in rows])[seen]
        k, k_low, k_high = agreement_numbers(values, values, jp, hp, None, seed=seed)["kappa"]
        if len(set(jp.tolist())) < 2 or len(set(hp.tolist())) < 2:
            # one side gave every reviewed trace one verdict: κ is 0 (or undefined) by construction, and every
            # resample the same, so a bootstrap "[0.00, 0.00]" would read as certainty: no interval, said why
            k_low = k_high = None
        # the correction: each sampled row's human pass share (reviewers may split) against the judge's verdict
        use = [j for j, i in enumerate(seen) if any(s for _, _, s in by_row[rows[i][0]])]
        hfrac = np.array([np.mean([human_pass(spec, v, thr) for _, v, _ in by_row[rows[seen[j]][0]]])
                          for j in use])
        c = ppi_mean(sign(verdicts), sign(jp[use].astype(float)), sign(hfrac)) if use else None
        out[since_ns + w * width] = {"corrected": c.corrected if c else None, "low": c.low if c else None,
                                     "high": c.high if c else None, "kappa": k, "kappa_low": k_low,
                                     "kappa_high": k_high, "reviews": len(seen),
                                     "one_verdict": len(set(jp.tolist())) < 2 or len(set(hp.tolist())) < 2}
    return out
