"""A review sample of production (issue 32, "People checking the judge on live traffic"): ``per_window`` judged
traces drawn at random in each window of a range (seeded; all of a window's when it holds fewer), put in review
queues people review on the Review page as any other (keyboard, blind by default, verdicts kept with reviewer and
time).

A judged trace keeps its scores' run and row (monitor_decisions), and a queue is a run's rows: the sample makes one
``random`` queue per run its traces were judged in (a rule's round makes a run), no new table. Each window's draw is
a simple random sample of its judged traces, so its reviews correct that window's rate
(``read.monitor_reviewed.reviewed_series``).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from evaluators.core.errors import UsageError
from evaluators.core.registry import get_metric
from evaluators.read.monitor_reviewed import judged_in_windows
from evaluators.read.monitor_series import MAX_WINDOWS


def sample_production(store, project: str, rule: str, metric: str, since_ns: int, until_ns: int, window_s: int,
                      per_window: int, seed: int = 0, created_by: str | None = None,
                      blind: bool = True) -> list[dict[str, Any]]:
    """Draw the sample and make its queues. Returns one dict a queue: ``queue_id``, ``run_id``, ``rows`` (in
    review order); the windows' draws are seeded by (seed, window), so the same call draws the same traces."""
    if per_window < 1:
        raise UsageError(f"--per-window is a number of traces, 1 or more, not {per_window}")
    if window_s <= 0 or until_ns <= since_ns:
        raise UsageError("a sample needs a window over 0 s and a range that ends after it starts")
    width = window_s * 1_000_000_000
    if (until_ns - since_ns) // width > MAX_WINDOWS:
        raise UsageError(f"the range holds more than {MAX_WINDOWS:,} windows of {window_s} s: choose a wider window")
    latest = store.monitor_rule(project, rule)
    if latest is None:
        raise UsageError(f"no rule {rule!r} in project {project!r} (monitor rule add makes one)")
    if metric not in latest["metrics"]:
        raise UsageError(f"rule {rule!r} does not judge {metric!r} (it judges {', '.join(latest['metrics'])})")
    get_metric(metric)
    judged, _ = judged_in_windows(store, project, rule, latest["version"], metric, since_ns, until_ns, width)
    windows: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for w, run_id, row_idx, _ in judged:
        windows[int(w)].append((run_id, int(row_idx)))
    picked: dict[str, list[int]] = defaultdict(list)
    for w in sorted(windows):
        rows = sorted(windows[w])
        rng = np.random.default_rng([seed, w])
        for j in rng.permutation(len(rows))[:per_window]:
            picked[rows[j][0]].append(rows[j][1])
    if not picked:
        raise UsageError(f"rule {rule!r} judged no trace of project {project!r} on {metric!r} in that range")
    params = {"production": {"project": project, "rule": rule, "rule_version": latest["version"],
                             "since_ns": since_ns, "until_ns": until_ns, "window_s": window_s},
              "seed": seed, "per_window": per_window}
    out = []
    for run_id in sorted(picked):
        rows = picked[run_id]
        qid = store.create_queue(run_id, f"production sample: {project} / {rule} / {metric}", "random", [metric],
                                 rows, {"": rows}, params=params, blind=blind, created_by=created_by)
        out.append({"queue_id": qid, "run_id": run_id, "rows": rows})
    return out
