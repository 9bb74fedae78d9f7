"""Results as users read them, built from stored per-turn results at read time.

Thresholds are applied here, so changing one never needs a re-run. Row keys
follow the Azure AI Evaluation SDK's ``evaluate()`` output: ``inputs.<column>``
and ``outputs.<metric>.<key>``.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any, Mapping

from evaluators.data.dataset import Dataset
from evaluators.core.kinds import MetricCell
from evaluators.core.registry import MetricSpec
from evaluators.core.stats import mean_ci, t95, wilson  # noqa: F401  re-exported: tests and callers use results.wilson
from evaluators.read.judge_inputs import JudgeInputs
from evaluators.run.spec import RunSpec
from evaluators.store.schema import Result
from evaluators.store.store import Store


def status_text(run: Mapping[str, Any]) -> str:
    """A run's state as every view says it (Runs, Results, the CLI, ``metrics.json``): a completed run with
    errored cells is "completed with errors", never the same "completed" as a clean run."""
    if run["status"] == "completed" and (run.get("tasks_errored") or 0) > 0:
        return "completed with errors"
    return run["status"]


def combine(spec: MetricSpec, results: list[Result]) -> MetricCell:
    """Aggregate a row's results for one metric, as its kind does (mean, worst turn, any label...)."""
    return spec.kind_impl.combine(spec, results)


def cell_verdicts(spec: MetricSpec, cells: list[MetricCell | None], threshold: float):
    """Per row 1 (pass), 0 (fail) or -1 (no verdict) of cells, as the metric's kind decides."""
    import numpy as np

    kind = spec.kind_impl
    return np.array([-1 if (p := kind.passed(spec, c, threshold)) is None else int(p) for c in cells], dtype=np.int8)


class RunResults:
    """A run's results with thresholds applied.

    Args:
        dataset: the run's dataset.
        results: stored results.
        specs: the run's metrics.
        thresholds: metric -> threshold (missing ones use the metric's default).
        judge_inputs: a :class:`evaluators.judge.templates.JudgeInputs` for the run, so that judge rows carry
            ``K_properties.sample_input``; without it that key is None.
    """

    def __init__(self, dataset: Dataset, results: list[Result], specs: list[MetricSpec],
                 thresholds: dict[str, float] | None = None, judge_inputs: Any = None):
        self.dataset, self.specs = dataset, specs
        self.judge_inputs = judge_inputs  # templates.JudgeInputs: re-creates K_properties.sample_input
        self.thresholds = {s.name: float((thresholds or {}).get(s.name, s.default_threshold)) for s in specs}
        grouped: dict[tuple[int, str], list[Result]] = defaultdict(list)
        for r in results:
            grouped[(r.row_idx, r.metric)].append(r)
        self.cells: dict[str, list[MetricCell | None]] = {}
        for s in specs:
            self.cells[s.name] = [combine(s, grouped[(i, s.name)]) if (i, s.name) in grouped else None
                                  for i in range(len(dataset))]

    def with_thresholds(self, overrides: dict[str, float]) -> "RunResults":
        """The same results with some thresholds changed: no re-load, no re-aggregation of turns."""
        out = copy.copy(self)
        out.thresholds = {name: float(overrides.get(name, value)) for name, value in self.thresholds.items()}
        return out

    def passed(self, spec: MetricSpec, cell: MetricCell | None) -> bool | None:
        return spec.kind_impl.passed(spec, cell, self.thresholds[spec.name])

    # ------------------------------------------------------------------ rows
    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` with the SDK's keys."""
        rec = self.dataset.records[i]
        out: dict[str, Any] = {f"inputs.{c}": rec.get(c) for c in self.dataset.columns}
        conversation = self.dataset.shape == "conversation"
        for s in self.specs:
            keys = s.kind_impl.row_keys(s, self.cell(s.name, i), self.thresholds[s.name], conversation,
                                        inputs=self.judge_inputs)
            out.update({f"outputs.{s.name}.{k}": v for k, v in keys.items()})
        return out

    def rows(self) -> list[dict[str, Any]]:
        return [self.row(i) for i in range(len(self.dataset))]

    def prefetch(self, rows: list[int]) -> None:
        """Read what these rows need in one go before they are asked for one by one (nothing to do:
        every cell and record is in memory here; the columnar view reads them from the store)."""

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows())

    # ------------------------------------------------------------------ aggregates
    def summary(self, spec: MetricSpec) -> dict[str, Any]:
        """One metric's aggregates as its kind computes them (counts, means or rates, intervals)."""
        return spec.kind_impl.summary(spec, self.cells_of(spec.name), self.thresholds[spec.name])

    def metrics(self) -> dict[str, Any]:
        """``metrics.json``: ``<metric>.<key>`` -> aggregate (errored rows are not in the denominators)."""
        flat: dict[str, Any] = {}
        for s in self.specs:
            flat.update(s.kind_impl.flat(s, self.summary(s)))
        return flat

    # ------------------------------------------------------------------ what the dashboard reads
    # The dashboard reads a run only through these methods (and ``row``, ``summary``, ``metrics``),
    # so that they can be served from columns or the database on big runs without the pages changing.
    def __len__(self) -> int:
        return len(self.dataset)

    def cell(self, name: str, i: int) -> MetricCell | None:
        """Row ``i``'s outcome for metric ``name`` (turns combined), None while pending."""
        return self.cells[name][i]

    def cells_of(self, name: str) -> list[MetricCell | None]:
        """Every row's cell of one metric (what a kind's own aggregates take)."""
        return self.cells[name]

    def values(self, name: str):
        """The primary value of metric ``name`` per row as a float array, NaN where there is none."""
        import numpy as np

        return np.array([c.value if c is not None and c.status == "ok" and c.value is not None else np.nan
                         for c in self.cells[name]], dtype=float)

    def verdicts(self, name: str):
        """Per row 1 (pass), 0 (fail) or -1 (no verdict: pending, errored, skipped) at the threshold in force."""
        spec = next(s for s in self.specs if s.name == name)
        return cell_verdicts(spec, self.cells_of(name), self.thresholds[name])

    def errored_rows(self) -> int:
        """Rows where at least one metric errored."""
        return sum(1 for i in range(len(self.dataset))
                   if any(self.cells[s.name][i] is not None and self.cells[s.name][i].status == "error"
                          for s in self.specs))

    def errors(self, limit: int | None = None) -> list[tuple[int, str, str]]:
        """(row index, metric, error) of errored cells, in row order within each metric."""
        out = [(i, s.name, c.error) for s in self.specs for i, c in enumerate(self.cells[s.name])
               if c is not None and c.status == "error"]
        return out if limit is None else out[:limit]

    def first_note(self, name: str) -> str | None:
        """The first warning a metric left on a row (see ``MetricCell.note``), None when none did."""
        return next((c.note for c in self.cells[name] if c and c.note), None)

    def threshold_curve(self, name: str, thresholds=None):
        """Pass rate of metric ``name`` over scored rows at each threshold ("what if").

        Args:
            thresholds: the thresholds to try; default every whole value of an integer scale,
                else 51 even steps across the scale, plus the threshold in force.
        Returns:
            DataFrame with columns ``threshold``, ``passed``, ``scored`` and ``pass_rate``.
        """
        import numpy as np
        import pandas as pd

        spec = next(s for s in self.specs if s.name == name)
        low, high = map(float, spec.score_range)
        if thresholds is None:
            grid = np.arange(low, high + 1) if spec.integer else np.linspace(low, high, 51)
            thresholds = sorted(set(float(t) for t in grid) | {self.thresholds[name]})
        ok = [c for c in self.cells_of(name) if c is not None and c.status == "ok"]
        recs = []
        for t in thresholds:
            passed = sum(1 for c in ok if spec.kind_impl.passed(spec, c, float(t)))
            recs.append({"threshold": float(t), "passed": passed, "scored": len(ok),
                         "pass_rate": passed / len(ok) if ok else None})
        return pd.DataFrame(recs, columns=["threshold", "passed", "scored", "pass_rate"])

    def query(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
              high: float | None = None, search: str = "", sort: str = "row", descending: bool = False,
              offset: int = 0, limit: int | None = None):
        """One page of :meth:`table`: ``(rows matching in all, DataFrame of rows offset..offset+limit)``."""
        df = self.table(metric, verdict, low, high, search, sort, descending)
        return len(df), (df.iloc[offset:] if limit is None else df.iloc[offset:offset + limit])

    # ------------------------------------------------------------------ the per-row table
    def table(self, metric: str | None = None, verdict: str = "all", low: float | None = None,
              high: float | None = None, search: str = "", sort: str = "row", descending: bool = False):
        """Rows as a DataFrame for reading: text columns, each metric's value and verdict.

        Args:
            metric: the metric ``verdict``, ``low`` and ``high`` filter on (default: the first).
            verdict: "all", "pass", "fail" or "error" (error includes skipped and pending).
            low, high: keep rows whose value of ``metric`` lies within.
            search: case-insensitive text that the query or response must contain.
            sort: "row" or a metric name.
        Returns:
            DataFrame indexed by row index, with columns ``#``, ``query``, ``response`` and per metric
            ``<metric>`` and ``<metric> verdict``.
        """
        import pandas as pd

        ds = self.dataset
        recs = []
        for i in range(len(ds)):
            q, r = ds.shown_text(i)
            rec = {"#": ds.row_no(i), "query": q, "response": r}
            for s in self.specs:
                cell = self.cells[s.name][i]
                p = self.passed(s, cell)
                rec[s.name] = cell.value if cell else None
                rec[f"{s.name} verdict"] = ("pass" if p else "fail") if p is not None else (cell.status if cell else "pending")
            recs.append(rec)
        df = pd.DataFrame(recs)
        if df.empty:
            return df
        name = metric if metric in self.cells else self.specs[0].name
        if verdict in ("pass", "fail"):
            df = df[df[f"{name} verdict"] == verdict]
        elif verdict == "error":
            df = df[~df[f"{name} verdict"].isin(["pass", "fail"])]
        if low is not None:
            df = df[df[name] >= low]
        if high is not None:
            df = df[df[name] <= high]
        if search:
            needle = search.lower()
            df = df[df["query"].str.lower().str.contains(needle, regex=False)
                    | df["response"].str.lower().str.contains(needle, regex=False)]
        if sort in self.cells:
            df = df.sort_values(sort, ascending=not descending, na_position="last", kind="stable")
        elif descending:
            df = df.iloc[::-1]
        return df


def open_results(store: Store, run_id: str, thresholds: Mapping[str, float] | None = None) -> RunResults:
    """A stored run's results; ``thresholds`` override the run's own at read time."""
    run = store.get_run(run_id)
    spec = RunSpec.from_dict(run["spec"])
    merged = {**spec.thresholds, **(thresholds or {})}
    ds = store.get_dataset(run["dataset_id"])
    return RunResults(ds, store.load_results(run_id), spec.specs(), merged, judge_inputs=JudgeInputs(ds, spec))
