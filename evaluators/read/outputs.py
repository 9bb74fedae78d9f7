"""A run's ``rows.jsonl`` and ``metrics.json`` written by streaming the store, whatever the run's size.

:class:`evaluators.read.results.RunResults` holds every result of a run in memory, which is what the
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

from evaluators.read.exports import _clean, write_atomic
from evaluators.core.kinds import MetricCell
from evaluators.core.registry import MetricSpec
from evaluators.run.spec import RunSpec
from evaluators.store.schema import Result
from evaluators.store.store import Store
from evaluators.read.judge_inputs import JudgeInputs


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


class _RowsFile:
    """``rows.jsonl`` being written a row at a time (to a temporary file beside it, renamed into place
    whole by :meth:`finish`), with the slim cells ``metrics.json`` is computed from.

    One code path for a row whatever its results came from: the store (:func:`write_run_outputs`) or
    the run itself (:class:`LiveRunOutputs`), so both write the same bytes.
    """

    def __init__(self, store: Store, run_id: str, out_dir: str | Path, thresholds: Mapping[str, float] | None = None):
        run = store.get_run(run_id)
        spec = RunSpec.from_dict(run["spec"])
        self.specs = specs = spec.specs()
        merged = {**spec.thresholds, **(thresholds or {})}
        self.th = th = {s.name: float(merged.get(s.name, s.default_threshold)) for s in specs}
        self.dataset_id = run["dataset_id"]
        self.ds = ds = store.open_dataset(self.dataset_id)
        self.columns = list(ds.columns)
        self.conversation = ds.shape == "conversation"
        # what each judge call was given (K_properties.sample_input), re-created from the run's templates and the rows
        self.extra: dict[str, Any] = {"inputs": JudgeInputs(ds, spec)}
        self.names = {s.name for s in specs}
        self.cells: dict[str, list] = {s.name: [] for s in specs}
        self._slim = _Slim()
        self._kinds = [(s, s.kind_impl, th[s.name], self.cells[s.name]) for s in specs]  # looked up once
        self._named: dict[str, dict[str, str]] = {s.name: {} for s in specs}
        self.rows = 0  # rows written
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(dir=self.out, prefix=".rows.jsonl.")
        self._f = os.fdopen(fd, "w", encoding="utf-8")

    def row(self, rec: Mapping[str, Any], mine: Mapping[str, list[Result]]) -> None:
        """Write one row: its record and its results by metric (a metric without any is pending)."""
        row: dict[str, Any] = {f"inputs.{c}": rec.get(c) for c in self.columns}
        conversation, extra, slim = self.conversation, self.extra, self._slim
        for s, kind, threshold, cells in self._kinds:
            got = mine.get(s.name)
            cell = kind.combine(s, got) if got else None
            keys = kind.row_keys(s, cell, threshold, conversation, **extra)
            named = self._named[s.name]  # "outputs.<metric>.<key>", made once per key, not once per row
            for k, v in keys.items():
                name = named.get(k)
                if name is None:
                    name = named[k] = f"outputs.{s.name}.{k}"
                row[name] = v
            cells.append(slim(cell))
        self._f.write(_row_line(row))
        self.rows += 1

    def finish(self) -> RunSummary:
        """``rows.jsonl`` renamed into place, ``metrics.json`` written; the run's summary."""
        self._f.close()
        os.replace(self._tmp, self.out / "rows.jsonl")
        summary = RunSummary(self.specs, self.th, self.cells)
        write_atomic(self.out / "metrics.json", json.dumps(summary.metrics(), indent=2, ensure_ascii=False) + "\n")
        return summary

    def abort(self) -> None:
        """Nothing written: the temporary file removed."""
        self._f.close()
        Path(self._tmp).unlink(missing_ok=True)


def write_run_outputs(store: Store, run_id: str, out_dir: str | Path,
                      thresholds: Mapping[str, float] | None = None) -> RunSummary:
    """Write ``out_dir/rows.jsonl`` (input order, the SDK's keys) and ``out_dir/metrics.json`` from the
    store, a chunk of rows at a time; both files appear whole or not at all.

    Args:
        thresholds: override the run's own thresholds.
    Returns:
        The run's :class:`RunSummary`.
    """
    f = _RowsFile(store, run_id, out_dir, thresholds)
    try:
        names = f.names
        results = _rows_results(store.iter_results(run_id))
        nxt = next(results, None)
        for i, rec in enumerate(store.iter_records(f.dataset_id, 0, len(f.ds))):
            mine: dict[str, list[Result]] = {}
            while nxt is not None and nxt[0] < i:  # results of rows past the dataset cannot be; skip
                nxt = next(results, None)
            if nxt is not None and nxt[0] == i:
                for r in nxt[1]:
                    if r.metric in names:
                        mine.setdefault(r.metric, []).append(r)
                nxt = next(results, None)
            f.row(rec, mine)
        return f.finish()
    except BaseException:
        f.abort()
        raise


class LiveRunOutputs:
    """``rows.jsonl`` and ``metrics.json`` of a run written from its results as the runner stores them,
    not read back from the store after the run (which took ~2.5 s on one core at 10,000 rows x 5 classic
    metrics): for a run that computes every task of every row itself, the results it stores are the
    store's results, so the files are those :func:`write_run_outputs` writes (a test holds them equal).

    The runner hands over its classic batches, numbered in the order of its walk (row by row, every
    metric of a row in turn); a batch back early (computed in-process while the worker held earlier
    ones) waits for those before it, so rows are written in order and at most a few batches are held.
    Whenever the run is not such a run (resumed, some rows only, judged or skipped tasks) the runner
    calls :meth:`abandon`; anything unexpected abandons too; :meth:`finish` then returns None and the
    caller writes the files from the store as before.

    Args:
        store, run_id, out_dir: as :func:`write_run_outputs` (the run's own thresholds).
    """

    def __init__(self, store: Store, run_id: str, out_dir: str | Path):
        self._file: _RowsFile | None = _RowsFile(store, run_id, out_dir)
        self._n = len(self._file.ds)
        self._metrics = len(self._file.specs)
        self._held: dict[int, tuple[list, list[Result]]] = {}
        self._next = 0  # the batch to write next
        self._row: int | None = None  # the row being gathered, its record and its results by metric
        self._rec: Mapping[str, Any] | None = None
        self._mine: dict[str, list[Result]] = {}

    def add(self, seq: int, records: list[Mapping[str, Any]], results: list[Result]) -> None:
        """Batch ``seq`` of the run's walk: each result with its row's record."""
        if self._file is None:
            return
        try:
            self._held[seq] = (records, results)
            while self._next in self._held:
                records, results = self._held.pop(self._next)
                self._next += 1
                for rec, r in zip(records, results, strict=True):
                    if r.row_idx != self._row:
                        self._flush()
                        self._row, self._rec = r.row_idx, rec
                    self._mine.setdefault(r.metric, []).append(r)
        except Exception:  # noqa: BLE001 — never the run's problem: the files come from the store instead
            self.abandon()

    def _flush(self) -> None:
        if self._row is None:
            return
        mine = self._mine
        if (self._row != self._file.rows or len(mine) != self._metrics
                or any(len(v) != 1 for v in mine.values())):
            raise ValueError(f"row {self._row}: not the next row, or not one result per metric")
        self._file.row(self._rec, mine)
        self._row, self._rec, self._mine = None, None, {}

    def complete(self) -> bool:
        """Whether every row came, with one result per metric (the last row is written now)."""
        if self._file is None:
            return False
        try:
            self._flush()
            if self._held or self._file.rows != self._n:
                raise ValueError("rows missing")
        except Exception:  # noqa: BLE001
            self.abandon()
            return False
        return True

    def finish(self) -> RunSummary | None:
        """Both files in place and the run's summary, when every row came with one result per metric;
        else None (nothing written)."""
        if not self.complete():
            return None
        f, self._file = self._file, None
        try:
            return f.finish()
        except BaseException:
            f.abort()
            raise

    def abandon(self) -> None:
        """Stop; the temporary file removed (a no-op once finished or abandoned)."""
        f, self._file = self._file, None
        self._held.clear()
        if f is not None:
            f.abort()
