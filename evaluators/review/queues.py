"""Review queues: which rows of a run people review, in which order, and who reviews which.

Strategies (chosen when a queue is made):
- ``random``: a seeded random sample of N scored rows.
- ``stratified``: a seeded random sample drawn apart from the rows the judge passed and failed, half from
  each while both have rows (so that rare failures are not missed); the corrected rates weight each part
  back by its share of the run.
- ``threshold``: the rows whose judge value lies nearest the threshold first.
- ``errored``: rows where the judge errored.
- ``flips``: rows whose verdict flips between a judge's repeated judgments (``--repeat``).
- ``rows``: rows given by the caller (a Results-page filter).

Only ``random`` and ``stratified`` queues are samples: their reviews correct the run's rates. The others
choose rows on purpose, so their reviews count towards agreement but would bias a correction.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evaluators.store.store import Store

STRATEGIES = {
    "stratified": "random sample, half from the rows the judge passed and half from those it failed",
    "random": "random sample of scored rows",
    "threshold": "rows nearest the threshold first",
    "errored": "rows where the judge errored",
    "flips": "rows whose repeated judgments disagree (a run judged with --repeat)",
    "rows": "the rows of the Results page's filter",
}
SAMPLED = ("random", "stratified")


def choose_rows(strategy: str, verdicts: np.ndarray, values: np.ndarray, threshold: float, size: int | None,
                seed: int = 0, errored: Sequence[int] = (), rows: Sequence[int] = ()) -> tuple[list[int], dict | None]:
    """The rows a queue holds, in review order, and for a stratified sample each row's stratum.

    Args:
        verdicts: the judge's per-row verdicts on the metric chosen rows by (1 pass, 0 fail, -1 none).
        values: the judge's per-row values on that metric (NaN where none).
        size: at most this many rows (None: every row the strategy picks).
        errored: rows where the judge errored; rows: the caller's rows (``rows`` strategy).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown review strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if size is not None and size < 1:
        raise ValueError("a review queue needs at least one row")
    rng = np.random.default_rng(seed)
    scored = np.flatnonzero(verdicts >= 0)
    if strategy == "random":
        take = min(len(scored), size or len(scored))
        return [int(i) for i in rng.choice(scored, take, replace=False)], None
    if strategy == "stratified":
        parts = {"fail": np.flatnonzero(verdicts == 0), "pass": np.flatnonzero(verdicts == 1)}
        want = min(len(scored), size or len(scored))
        take = {"fail": min(len(parts["fail"]), want // 2)}
        take["pass"] = min(len(parts["pass"]), want - take["fail"])
        take["fail"] = min(len(parts["fail"]), want - take["pass"])
        picked = {h: rng.choice(parts[h], take[h], replace=False) for h in parts}
        order = np.concatenate([picked["fail"], picked["pass"]])
        rng.shuffle(order)  # the reviewer cannot tell a row's stratum from its place in the queue
        strata = {str(int(i)): h for h in parts for i in picked[h]}
        return [int(i) for i in order], strata
    if strategy == "threshold":
        dist = np.abs(values[scored] - threshold)
        ranked = scored[np.argsort(dist, kind="stable")]
        return [int(i) for i in ranked[:size]], None
    chosen = list(errored) if strategy == "errored" else list(rows)  # flips: the caller's flipping rows
    seen: set[int] = set()
    out = [int(i) for i in chosen if not (int(i) in seen or seen.add(int(i)))]
    return out[:size] if size else out, None


def assign(rows: list[int], reviewers: Sequence[str], overlap: bool) -> dict[str, list[int]]:
    """Who reviews which rows: everyone all of them (``overlap``, for agreement between reviewers), or
    the rows dealt out in turn; with no reviewer named, anyone may take any row (key ``""``)."""
    names = [r.strip() for r in reviewers if r and r.strip()]
    if not names:
        return {"": list(rows)}
    if len(set(names)) != len(names):
        raise ValueError("a reviewer is named twice")
    if overlap:
        return {n: list(rows) for n in names}
    return {n: rows[k::len(names)] for k, n in enumerate(names)}


def rows_for(queue: dict[str, Any], reviewer: str) -> list[int]:
    """The rows of ``queue`` that ``reviewer`` reviews: their share, else the open share, else none."""
    a = queue["assignments"]
    return list(a.get(reviewer, a.get("", [])))


def progress(store: Store, queue: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per reviewer (``""``: anyone), rows of their share with a verdict on every metric of the queue, of all
    their rows ("34 of 100")."""
    rows = queue["rows"]
    done: dict[str, dict[int, set]] = {}
    for r in store.reviews(queue["run_id"], rows=rows):
        if r["value"] is not None and r["metric"] in queue["metrics"]:
            done.setdefault(r["reviewer"], {}).setdefault(r["row_idx"], set()).add(r["metric"])
    need = set(queue["metrics"])
    out = {}
    for who, share in queue["assignments"].items():
        if who:
            mine = done.get(who, {})
            out[who] = (sum(1 for i in share if mine.get(i, set()) >= need), len(share))
        else:
            per_row: dict[int, set] = {}
            for m in done.values():
                for i, ms in m.items():
                    per_row.setdefault(i, set()).update(ms)
            out[who] = (sum(1 for i in share if per_row.get(i, set()) >= need), len(share))
    return out
