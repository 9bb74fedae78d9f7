"""People reviewing a run: their verdicts, the queues that hand out rows, judge-human agreement and the
rates corrected by reviews. ``agreement(store, run_id)`` is the Python entry point; the CLI's
``review import|export`` and ``agreement`` and the dashboard's Review page go through this package.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.core.errors import UsageError
from evaluators.read.repeats import repeat_agreement
from evaluators.read.view import open_view
from evaluators.review.queues import SAMPLED, assign, choose_rows
from evaluators.core.scales import parse_value, reviewable
from evaluators.review.stats import MetricAgreement, flat, metric_agreement
from evaluators.store.store import Store

HUMAN_PREFIX = "human_"  # a dataset column human_<metric> holds verdicts given before the run
DATASET_REVIEWER = "dataset"


def dataset_reviews(store: Store, run_id: str, results: Any, metric: str) -> list[dict[str, Any]]:
    """Verdicts a dataset brought in a ``human_<metric>`` column, as reviews by ``dataset``; a blank cell
    is no verdict. Raises UsageError naming the row and column of a value off the metric's scale."""
    column = HUMAN_PREFIX + metric
    ds = results.dataset
    if column not in ds.columns:
        return []
    spec = next(s for s in results.specs if s.name == metric)
    out = []
    for i, raw in store.dataset_texts(store.get_run(run_id)["dataset_id"], [column]):
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue
        try:
            value = parse_value(spec, raw)
        except ValueError as e:
            raise UsageError(f"{ds.source or ds.name}: row {ds.row_no(i)}, column {column!r}: {e}") from None
        out.append(dict(row_idx=i, metric=metric, reviewer=DATASET_REVIEWER, value=value, agreed=False,
                        note=None, judge_value=None, judged_at=None, queue_id=None, created_at=None))
    return out


def make_queue(store: Store, run_id: str, results: Any, name: str, strategy: str, metrics: list[str],
               size: int | None, *, seed: int = 0, reviewers: list[str] = (), overlap: bool = False,
               blind: bool | None = None, rows: list[int] = (), on: str | None = None,
               created_by: str | None = None) -> str:
    """Choose a queue's rows (see :mod:`evaluators.review.queues`), deal them out and store it; its id.

    Args:
        results: the run's results (``values``, ``verdicts``, ``thresholds``, ``errors``).
        on: the metric whose judge verdicts order or stratify the rows (default: the first of ``metrics``).
        blind: hide the judge's verdict until the reviewer has answered (default: on for sampled queues).
    """
    if not metrics:
        raise ValueError("a review queue needs at least one metric")
    on = on or metrics[0]
    threshold = results.thresholds[on]
    errored = sorted({i for i, m, _ in results.errors() if m in metrics}) if strategy == "errored" else ()
    if strategy == "flips":
        found = [repeat_agreement(results, m) for m in metrics]
        rows = sorted({i for f in found if f for i in f["flip_rows"]})
    chosen, strata = choose_rows(strategy, results.verdicts(on), results.values(on), threshold, size, seed,
                                 errored, rows)
    if not chosen:
        raise ValueError(f"no row fits '{strategy}' in this run")
    params = {"seed": seed, "size": size, "on": on, "threshold": threshold, "overlap": overlap}
    return store.create_queue(run_id, name, strategy, list(metrics), chosen, assign(chosen, reviewers, overlap),
                              params=params, strata=strata and {"drawn": strata}, created_by=created_by,
                              blind=strategy in SAMPLED if blind is None else blind)


def _strata_of(queue: dict[str, Any], results: Any) -> dict[int, str] | None:
    """Every scored row's stratum in a stratified queue: the verdict the judge gave the row on the metric
    the sample was drawn by, at the threshold in force when it was drawn."""
    if queue["strategy"] != "stratified":
        return None
    on, threshold = queue["params"]["on"], float(queue["params"]["threshold"])
    spec = next((s for s in results.specs if s.name == on), None)
    if spec is None:
        return None
    values = results.values(on)
    kind = spec.kind_impl
    return {i: ("pass" if kind.turn_passed(spec, float(values[i]), threshold) else "fail")
            for i in np.flatnonzero(~np.isnan(values)).tolist()}


def _sample(store: Store, run_id: str, results: Any,
            reviews: list[dict[str, Any]]) -> tuple[set[int] | None, dict | None, str]:
    """The reviewed rows that may correct the rate: those of the newest sampled queue with reviews; else,
    when no review came through a queue at all (imported, or a dataset's column), every reviewed row,
    assumed to be a random sample."""
    queues = {q["id"]: q for q in store.queues(run_id)}
    for q in queues.values():  # newest first
        if q["strategy"] in SAMPLED:
            rows = {r["row_idx"] for r in reviews if r["queue_id"] == q["id"] and r["value"] is not None}
            if rows:
                return rows, _strata_of(q, results), f"queue {q['name']}"
    if reviews and not any(r["queue_id"] in queues for r in reviews):
        return {r["row_idx"] for r in reviews if r["value"] is not None}, None, "assumed random"
    return None, None, "none"


def agreement(store: Store, run_id: str, thresholds: dict[str, float] | None = None, results: Any = None,
              seed: int = 0) -> dict[str, MetricAgreement]:
    """Per reviewed judge metric of a run: judge-human agreement and the corrected rate.

    Args:
        thresholds: override the run's own (the corrected rates follow them, as the judge's do).
        results: the run's results as the dashboard holds them (anything with ``specs``, ``thresholds``,
            ``dataset``, ``values(name)`` and ``verdicts(name)``); default: opened from the store.
    """
    results = results if results is not None else open_view(store, run_id, thresholds)
    out: dict[str, MetricAgreement] = {}
    for spec in results.specs:
        if not reviewable(spec):
            continue
        reviews = store.reviews(run_id, metric=spec.name) + dataset_reviews(store, run_id, results, spec.name)
        values, verdicts = results.values(spec.name), results.verdicts(spec.name)
        rows, strata, sample = _sample(store, run_id, results, reviews)
        out[spec.name] = metric_agreement(spec, results.thresholds[spec.name], values, verdicts, reviews, rows,
                                          strata, sample, stale_rows(store, run_id, spec.name, reviews), seed)
    return out


def stale_rows(store: Store, run_id: str, metric: str, reviews: list[dict[str, Any]]) -> set[int]:
    """Rows whose verdict was given against an earlier judgment (the row was judged again since)."""
    made = {r["row_idx"]: r["judged_at"] for r in reviews if r["judged_at"] is not None}
    now = store.judged_times(run_id, metric, made)
    return {i for i, at in made.items() if i in now and now[i] > at}


def agreement_keys(store: Store, run_id: str, thresholds: dict[str, float] | None = None,
                   results: Any = None) -> dict[str, Any]:
    """The ``metrics.json`` keys of every metric with at least one review (none when nothing was reviewed)."""
    results = results if results is not None else open_view(store, run_id, thresholds)
    specs = {s.name: s for s in results.specs}
    return {k: v for name, a in agreement(store, run_id, thresholds, results).items() if a.verdicts
            for k, v in flat(specs[name], a).items()}


__all__ = ["agreement", "agreement_keys", "assign", "choose_rows", "dataset_reviews", "make_queue",
           "MetricAgreement", "metric_agreement", "stale_rows"]
