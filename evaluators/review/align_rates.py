"""After alignment: a run's corrected rate with a candidate judge's values beside the current judge's, on the same
reviews, each with its interval (:mod:`evaluators.review.stats`, prediction-powered inference). A judge that agrees
with the reviewers more lets their reviews correct its rate with less spread, so its interval is narrower.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.review import _sample, agreement, dataset_reviews
from evaluators.review.stats import MetricAgreement, metric_agreement
from evaluators.store.store import Store


def _rate(a: MetricAgreement) -> dict[str, Any]:
    c = a.corrected
    return {"judged": a.judged, "corrected": None if c is None else c.corrected,
            "ci95_low": None if c is None else c.low, "ci95_high": None if c is None else c.high,
            "reviewed_rows": None if c is None else c.reviewed_rows, "sample": a.sample}


def corrected_rates(store: Store, run_id: str, results: Any, spec: Any, threshold: float,
                    new_values: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """The run's rate corrected by its reviews, as judged now and as the candidate judges every row.

    Args:
        results: the run's results (its view), as :func:`evaluators.review.agreement` reads them.
        new_values: per row of the run, the candidate judge's value (NaN: not judged).
    Returns:
        ``rate`` ("pass_rate" or "defect_rate"), ``current`` and ``candidate`` (each ``judged``, ``corrected``,
        ``ci95_low``, ``ci95_high``, ``reviewed_rows``, ``sample``: where the correcting reviews come from).
    """
    current = agreement(store, run_id, results=results, seed=seed)[spec.name]
    reviews = store.reviews(run_id, metric=spec.name) + dataset_reviews(store, run_id, results, spec.name)
    rows, strata, sample = _sample(store, run_id, results, reviews)  # the same reviews, drawn as they were
    kind = spec.kind_impl
    verdicts = np.array([-1 if np.isnan(v) else int(bool(kind.turn_passed(spec, float(v), threshold)))
                         for v in new_values], dtype=np.int64)
    new = metric_agreement(spec, threshold, new_values, verdicts, reviews, rows, strata, sample, set(), seed)
    return {"rate": current.rate_name, "current": _rate(current), "candidate": _rate(new)}
