"""A stored run as columns: what the dashboard reads, fast on runs of any size.

:class:`ColumnarResults` is a :class:`~evaluators.read.results.RunResults` whose read methods
(``summary``, ``values``, ``threshold_curve``, ``errored_rows``, ``errors``, ``first_note``,
``query``, ``cell``, ``row``) are served from per-metric numpy columns (status, each numeric output,
whether a note was left) built once per state of the run, instead of from one Python object per
result. What one row needs (its reasons, raw replies, the record itself) is read from the store when
that row is asked for, and the dataset's records are read lazily (:class:`LazyRecords`).

How the columns are built (:func:`evaluators.read.columns.build_columns`): one query per metric returns
``(row, turn, status, outputs...)`` tuples, the outputs extracted by SQLite's ``json_extract``
(no reasons, no raw replies, no ORM objects). A row with one result per metric (every single-turn
row) becomes its cell directly, as the kind's ``combine`` would make it; rows with several turns are
combined by the kind itself from their full results. Kinds whose aggregates need more than
status, numbers and a note (``pairwise``, ``wb_score``, any new kind) keep their combined cells for
that metric and aggregate through the kind's own ``summary``.

Every aggregate equals the in-memory :class:`RunResults`' (``tests/test_results_scale.py`` checks
the same ``summary()`` dicts on runs with errors, skips, pending rows, conversations and every kind).
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import numpy as np

from evaluators.data.dataset import Dataset
from evaluators.core.kinds import MetricCell
from evaluators.core.kinds.columns import ERROR, OK, PENDING, STATUS_NAMES
from evaluators.core.registry import MetricSpec
from evaluators.read.cost import kept_run_cost
from evaluators.read.results import RunResults, cell_verdicts, combine
from evaluators.store.schema import Result
from evaluators.store.store import Store
from evaluators.read.columns import RunColumns, _group, _simple, build_columns, lazy_dataset, views_dir



class ColumnarResults(RunResults):
    """:class:`RunResults` read from columns and from the store row by row (see the module docstring).

    ``cells`` still works (every cell of the run, built on first use) for callers outside the
    dashboard's read path (HTML report, compare, exports); the dashboard never touches it.
    """

    ROW_CACHE = 512

    def __init__(self, store: Store, run_id: str, dataset: Dataset, specs: list[MetricSpec],
                 thresholds: dict[str, float] | None, columns: RunColumns, judge_inputs: Any = None):
        self.store, self.run_id = store, run_id
        self.judge_inputs = judge_inputs  # as RunResults keeps it (K_properties.sample_input), where it exists
        self.dataset, self.specs = dataset, specs
        self.thresholds = {s.name: float((thresholds or {}).get(s.name, s.default_threshold)) for s in specs}
        self._cols = columns
        self._spec = {s.name: s for s in specs}

    # ------------------------------------------------------------ cells, row by row
    @property
    def cells(self) -> dict[str, list[MetricCell | None]]:  # type: ignore[override]
        cols = self._cols
        with cols.lock:
            if cols.all_cells is None:
                grouped: dict[tuple[int, str], list[Result]] = defaultdict(list)
                for r in self.store.load_results(self.run_id):
                    grouped[(r.row_idx, r.metric)].append(r)
                cols.all_cells = {s.name: [combine(s, grouped[(i, s.name)]) if (i, s.name) in grouped else None
                                           for i in range(cols.n)] for s in self.specs}
            return cols.all_cells

    def _row_cells(self, rows: list[int]) -> dict[int, dict[str, MetricCell | None]]:
        cols, out, missing = self._cols, {}, []
        with cols.lock:
            for i in rows:
                if i in cols.rows:
                    cols.rows.move_to_end(i)
                    out[i] = cols.rows[i]
                else:
                    missing.append(i)
        if missing:
            grouped: dict[tuple[int, str], list[Result]] = defaultdict(list)
            for r in self.store.results_of_rows(self.run_id, missing):
                grouped[(r.row_idx, r.metric)].append(r)
            with cols.lock:
                for i in missing:
                    out[i] = {s.name: combine(s, grouped[(i, s.name)]) if (i, s.name) in grouped else None
                              for s in self.specs}
                    cols.rows[i] = out[i]
                while len(cols.rows) > max(self.ROW_CACHE, len(rows)):
                    cols.rows.popitem(last=False)
        return out

    def cell(self, name: str, i: int) -> MetricCell | None:
        m = self._cols.metrics[name]
        if m.cells is not None:
            return m.cells[i]
        if not 0 <= i < self._cols.n:
            raise IndexError(i)
        if m.status[i] == PENDING:
            return None
        return self._row_cells([i])[i][name]

    def cells_of(self, name: str) -> list[MetricCell | None]:
        m = self._cols.metrics[name]
        return m.cells if m.cells is not None else self.cells[name]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for start in range(0, len(self), 500):
            chunk = list(range(start, min(len(self), start + 500)))
            self.prefetch(chunk)
            out.extend(self.row(i) for i in chunk)
        return out

    def prefetch(self, rows: list[int]) -> None:
        """These rows' cells and records read in one query each and kept (a bounded cache) for the
        ``row``/``cell`` calls that follow: a chunk of an export costs two queries, not one per row."""
        self._row_cells(rows)
        self.dataset.records.prefetch(rows)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ columns
    def __len__(self) -> int:
        return self._cols.n

    def values(self, name: str) -> np.ndarray:
        m = self._cols.metrics[name]
        spec = self._spec[name]
        return np.where(m.status == OK, m.outputs[spec.primary], np.nan)

    def verdicts(self, name: str) -> np.ndarray:
        """Per row 1 (pass), 0 (fail) or -1 (no verdict: pending, errored, skipped) at the threshold in force."""
        return self._verdicts(self._spec[name], self.thresholds[name])

    def _verdicts(self, spec: MetricSpec, threshold: float) -> np.ndarray:
        m = self._cols.metrics[spec.name]
        if m.cells is not None:
            return cell_verdicts(spec, m.cells, threshold)
        return spec.kind_impl.column_verdicts(spec, m, threshold)

    def errored_rows(self) -> int:
        if not self.specs:
            return 0
        return int(np.any([m.status == ERROR for m in self._cols.metrics.values()], axis=0).sum())

    def errors(self, limit: int | None = None) -> list[tuple[int, str, str]]:
        key = ("errors", limit)  # thresholds change no error: kept with the columns
        cache = self._cols.summaries
        if key not in cache:
            cache[key] = self._errors(limit)
        return list(cache[key])

    def _errors(self, limit: int | None) -> list[tuple[int, str, str]]:
        out: list[tuple[int, str, str]] = []
        for s in self.specs:
            left = None if limit is None else limit - len(out)
            if left is not None and left <= 0:
                break
            m = self._cols.metrics[s.name]
            rows = np.nonzero(m.status == ERROR)[0][:left].tolist()
            if not rows:
                continue
            if m.cells is not None:
                cells = {i: m.cells[i] for i in rows}
            else:
                cells = {i: combine(s, rs) for i, rs in _group(self.store.results_of_rows(self.run_id, rows, s.name)).items()}
            out.extend((i, s.name, cells[i].error) for i in rows if i in cells)
        return out

    def first_note(self, name: str) -> str | None:
        hits = np.nonzero(self._cols.metrics[name].note)[0]
        if not len(hits):
            return None
        c = self.cell(name, int(hits[0]))
        return c.note if c else None

    # ------------------------------------------------------------ aggregates
    def summary(self, spec: MetricSpec) -> dict[str, Any]:
        th = self.thresholds[spec.name]
        key = (spec.name, th)
        cache = self._cols.summaries
        if key not in cache:
            if self._cols.metrics[spec.name].cells is not None or not _simple(spec):
                cache[key] = spec.kind_impl.summary(spec, self.cells_of(spec.name), th)
            else:
                cache[key] = self._summary(spec, th)
        import copy

        return copy.deepcopy(cache[key])

    def _means(self, spec: MetricSpec) -> dict[str, Any]:
        """Threshold-free part of the kind's summary (cached: the sums over every row)."""
        key = (spec.name, "means")
        cache = self._cols.summaries
        if key not in cache:
            cache[key] = spec.kind_impl.column_means(spec, self._cols.metrics[spec.name])
        return cache[key]

    def _summary(self, spec: MetricSpec, threshold: float) -> dict[str, Any]:
        """The kind's summary over this run's columns: the same code ``summary`` of cells goes through."""
        kind = spec.kind_impl
        return kind.column_summary(spec, self._cols.metrics[spec.name], threshold, self._means(spec))

    def threshold_curve(self, name: str, thresholds=None):
        import pandas as pd

        spec = self._spec[name]
        m = self._cols.metrics[name]
        if m.cells is not None:
            return super().threshold_curve(name, thresholds)
        low, high = map(float, spec.score_range)
        if thresholds is None:
            grid = np.arange(low, high + 1) if spec.integer else np.linspace(low, high, 51)
            thresholds = sorted(set(float(t) for t in grid) | {self.thresholds[name]})
        key = ("curve", name, tuple(float(t) for t in thresholds))  # kept per state of the run, as summaries are
        with self._cols.lock:
            kept = self._cols.summaries.get(key)
        if kept is not None:
            return kept.copy()
        scored = int((m.status == OK).sum())
        recs = []
        for t in thresholds:
            passed = int((self._verdicts(spec, float(t)) == 1).sum())
            recs.append({"threshold": float(t), "passed": passed, "scored": scored,
                         "pass_rate": passed / scored if scored else None})
        out = pd.DataFrame(recs, columns=["threshold", "passed", "scored", "pass_rate"])
        with self._cols.lock:
            self._cols.summaries[key] = out
        return out.copy()

    # ------------------------------------------------------------ the per-row table, a page at a time
    def select(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
               high: float | None = None, search: str = "", sort: str = "row", descending: bool = False) -> np.ndarray:
        """Row indices matching the filters, in display order (as :meth:`RunResults.table` orders them)."""
        n = self._cols.n
        if n == 0 or not self.specs:
            return np.arange(n)
        name = metric if metric in self._spec else self.specs[0].name
        mask = np.ones(n, dtype=bool)
        if verdict in ("pass", "fail"):
            mask &= self.verdicts(name) == (1 if verdict == "pass" else 0)
        elif verdict == "error":
            mask &= self.verdicts(name) == -1
        v = self.values(name)
        with np.errstate(invalid="ignore"):
            if low is not None:
                mask &= v >= low
            if high is not None:
                mask &= v <= high
        if search:
            mask &= self._cols.search.contains(search)
        ids = np.nonzero(mask)[0]
        if sort in self._spec:
            key = self.values(sort)[ids]
            nan = np.isnan(key)
            keep, vals = ids[~nan], key[~nan]
            if descending:  # pandas' stable descending sort: ties keep their order
                order = keep[::-1][np.argsort(vals[::-1], kind="stable")][::-1]
            else:
                order = keep[np.argsort(vals, kind="stable")]
            ids = np.concatenate([order, ids[nan]])
        elif descending:
            ids = ids[::-1]
        return ids

    def query(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
              high: float | None = None, search: str = "", sort: str = "row", descending: bool = False,
              offset: int = 0, limit: int | None = None):
        ids = self.select(metric, verdict, low, high, search, sort, descending)
        page = ids[offset:] if limit is None else ids[offset:offset + limit]
        return len(ids), self.frame_of(page.tolist())

    def table(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
              high: float | None = None, search: str = "", sort: str = "row", descending: bool = False):
        return self.query(metric, verdict, low, high, search, sort, descending)[1]

    def frame_of(self, rows: list[int]):
        """The table's rows for these row indices (text read for these rows only)."""
        import pandas as pd

        ds = self.dataset
        if hasattr(ds.records, "prefetch"):
            ds.records.prefetch(rows)
        verdicts = {s.name: self.verdicts(s.name) for s in self.specs}
        values = {s.name: self.values(s.name) for s in self.specs}
        recs = []
        for i in rows:
            q, r = ds.shown_text(i)
            rec = {"#": ds.row_no(i), "query": q, "response": r}
            for s in self.specs:
                st = self._cols.metrics[s.name].status[i]
                p = verdicts[s.name][i]
                val = values[s.name][i]
                rec[s.name] = float(val)
                rec[f"{s.name} verdict"] = ("pass" if p == 1 else "fail") if p >= 0 else (
                    STATUS_NAMES[int(st)] if st != PENDING else "pending")
            recs.append(rec)
        cols = ["#", "query", "response"] + [x for s in self.specs for x in (s.name, f"{s.name} verdict")]
        return pd.DataFrame(recs, index=pd.Index(rows, dtype="int64"), columns=cols)


def open_view(store: Store, run_id: str, thresholds: dict[str, float] | None = None,
              search_in_background: bool = False) -> ColumnarResults:
    """A stored run's results as columns (the dashboard's path); ``thresholds`` override the run's own.

    Args:
        search_in_background: prepare the text search of a finished run in a thread now, so that
            the first search does not wait for it.
    """
    from evaluators.run.spec import RunSpec

    run = store.get_run(run_id)
    spec = RunSpec.from_dict(run["spec"])
    specs = spec.specs()
    dataset = lazy_dataset(store, run["dataset_id"])
    from evaluators.read.judge_inputs import JudgeInputs

    judge_inputs = JudgeInputs(dataset, spec)  # what each judge call was given, re-created at read time
    cols = build_columns(store, run, specs, dataset, run["dataset_id"])
    if search_in_background and run["status"] not in ("queued", "running"):
        threading.Thread(target=cols.search.ensure, daemon=True, name=f"search-{run_id}").start()
    return ColumnarResults(store, run_id, dataset, specs, {**spec.thresholds, **(thresholds or {})}, cols,
                           judge_inputs)


def prepare_view(store: Store, run_id: str) -> None:
    """Build an ended run's columns and its dataset's search text and write them beside the store (``views/``),
    so that the first open of its Results page, in this dashboard or another, reads them instead of building
    them. A dashboard's run worker calls it as the run ends; nothing for a run still going or a store with
    no folder (the columns are then built on the first open, as before)."""
    if store.get_run(run_id)["status"] in ("queued", "running") or views_dir(store) is None:
        return
    open_view(store, run_id)._cols.search.ensure()
    kept_run_cost(store, run_id)  # and its cost, summed once
    kept_rates(store, run_id)  # and its rates, for the Runs page


def run_rates(res: RunResults) -> list[list]:
    """Per metric of a run, ``[metric, measure, rate or None, scored rows, rows, errored rows]``: the headline rate
    as Results' cards give it (``charts_overview.rate_of`` over the kind's summary), at ``res``' thresholds."""
    from evaluators.read.charts_overview import rate_of

    out = []
    for s in res.specs:
        r = rate_of(s, res.summary(s))
        out.append([s.name, r.measure, r.rate, r.counts["scored_rows"], len(res), r.counts["errored_rows"]])
    return out


def kept_rates(store: Store, run_id: str) -> list[list]:
    """:func:`run_rates` at the run's own thresholds, kept for an ended run in ``views/`` (one small file per state
    of the run and its settings, as ``read.cost.kept_run_cost``), so that a page of runs listed by a freshly
    started dashboard opens no run's columns."""
    from evaluators.read.columns import kept_json

    return kept_json(store, run_id, "rates", lambda: run_rates(open_view(store, run_id)))
