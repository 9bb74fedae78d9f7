"""A run's ``rows.jsonl`` and ``metrics.json`` written by streaming the store, whatever the run's size.

:class:`evaluators.results.RunResults` holds every result of a run in memory, which is what the
dashboard and ``evaluate()`` want on runs of ordinary size. The CLI writes its files here instead:
the dataset's records and the run's results are read in row order a chunk at a time, each row is
written to ``rows.jsonl`` as soon as its results are combined, and the aggregates of
``metrics.json`` are computed from one small cell per row holding only the numbers a summary reads
(identical cells shared, so a row costs a pointer). Same keys and values as ``RunResults``; a test
holds the two equal.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from .exports import _clean, write_atomic
from .kinds import MetricCell
from .registry import MetricSpec
from .runner import RunSpec
from .store import Result, Store
from .templates import JudgeInputs


# what exports.jsonl_text writes for a row, with one encoder made once rather than one per row
_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
# the same, refusing NaN and infinities: a row without any is written as it is, with no _clean
# call per value (~45 per row); a row with one raises and takes _clean's path
_encode_finite = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False).encode


def _row_line(row: dict[str, Any]) -> str:
    """``exports.jsonl_text([row])``: top-level NaN and infinities as null."""
    try:
        return _encode_finite(row) + "\n"
    except ValueError:
        return _encode({k: _clean(v) for k, v in row.items()}) + "\n"


class RunSummary:
    """A run's aggregates (what ``metrics.json`` and the CLI's summary print), without its rows.

    Attributes:
        specs: the run's metrics.
        thresholds: metric -> threshold in force.
        cells: metric -> per row, a cell with only status, outputs, note and decisive turn (or None
            while pending); equal cells are one shared object.
    """

    def __init__(self, specs: list[MetricSpec], thresholds: dict[str, float], cells: dict[str, list]):
        self.specs, self.thresholds, self.cells = specs, thresholds, cells
        self._summaries: dict[str, dict[str, Any]] = {}

    def summary(self, spec: MetricSpec) -> dict[str, Any]:
        if spec.name not in self._summaries:  # a pairwise summary bootstraps: once is enough
            self._summaries[spec.name] = spec.kind_impl.summary(spec, self.cells[spec.name], self.thresholds[spec.name])
        return self._summaries[spec.name]

    def metrics(self) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for s in self.specs:
            flat.update(s.kind_impl.flat(s, self.summary(s)))
        return flat


def _rows_results(results: Iterator[Result]) -> Iterator[tuple[int, list[Result]]]:
    """(row index, that row's results) from results in row order."""
    row, batch = None, []
    for r in results:
        if r.row_idx != row:
            if batch:
                yield row, batch
            row, batch = r.row_idx, []
        batch.append(r)
    if batch:
        yield row, batch


class _Slim:
    """Shares equal slim cells: a run's cells mostly repeat a few outcomes (a score 1-5, an error)."""

    def __init__(self):
        self._seen: dict[Any, MetricCell] = {}

    def __call__(self, cell: MetricCell | None) -> MetricCell | None:
        if cell is None:
            return None
        slim = MetricCell(cell.status, dict(cell.outputs) if cell.outputs else cell.outputs, None, None, [],
                          cell.decisive_turn, cell.note)
        try:
            key = (cell.status, tuple(cell.outputs.items()) if cell.outputs else None, cell.decisive_turn, cell.note)
            hash(key)
        except TypeError:  # an output holding a list (WildBench groups): kept as its own cell
            return slim
        if len(self._seen) > 100_000:  # many distinct values (a continuous score): stop sharing, not growing
            return self._seen.get(key, slim)
        return self._seen.setdefault(key, slim)


def write_run_outputs(store: Store, run_id: str, out_dir: str | Path,
                      thresholds: Mapping[str, float] | None = None) -> RunSummary:
    """Write ``out_dir/rows.jsonl`` (input order, the SDK's keys) and ``out_dir/metrics.json`` from the
    store, a chunk of rows at a time; both files appear whole or not at all.

    Args:
        thresholds: override the run's own thresholds.
    Returns:
        The run's :class:`RunSummary`.
    """
    run = store.get_run(run_id)
    spec = RunSpec.from_dict(run["spec"])
    specs = spec.specs()
    merged = {**spec.thresholds, **(thresholds or {})}
    th = {s.name: float(merged.get(s.name, s.default_threshold)) for s in specs}
    ds = store.open_dataset(run["dataset_id"])
    conversation = ds.shape == "conversation"
    # what each judge call was given (K_properties.sample_input), re-created from the run's templates and the rows
    extra: dict[str, Any] = {"inputs": JudgeInputs(ds, spec)}
    names = {s.name for s in specs}
    cells: dict[str, list] = {s.name: [] for s in specs}
    slim = _Slim()
    kinds = [(s, s.kind_impl, th[s.name]) for s in specs]  # looked up once, not per row and metric
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".rows.jsonl.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            results = _rows_results(store.iter_results(run_id))
            nxt = next(results, None)
            for i, rec in enumerate(store.iter_records(run["dataset_id"], 0, len(ds))):
                mine: dict[str, list[Result]] = {}
                while nxt is not None and nxt[0] < i:  # results of rows past the dataset cannot be; skip
                    nxt = next(results, None)
                if nxt is not None and nxt[0] == i:
                    for r in nxt[1]:
                        if r.metric in names:
                            mine.setdefault(r.metric, []).append(r)
                    nxt = next(results, None)
                row: dict[str, Any] = {f"inputs.{c}": rec.get(c) for c in ds.columns}
                for s, kind, threshold in kinds:
                    got = mine.get(s.name)
                    cell = kind.combine(s, got) if got else None
                    keys = kind.row_keys(s, cell, threshold, conversation, **extra)
                    row.update({f"outputs.{s.name}.{k}": v for k, v in keys.items()})
                    cells[s.name].append(slim(cell))
                f.write(_row_line(row))
        os.replace(tmp, out / "rows.jsonl")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    summary = RunSummary(specs, th, cells)
    write_atomic(out / "metrics.json", json.dumps(summary.metrics(), indent=2, ensure_ascii=False) + "\n")
    return summary
