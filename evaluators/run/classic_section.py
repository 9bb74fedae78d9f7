"""The classic-metric part of a run: batches computed in this process or in a forked worker
(:mod:`evaluators.run.classic_worker`), each batch's results written as it comes back. A mixin of
:class:`evaluators.run.runner.Runner`, which owns the state it reads (``self.store``, ``self.spec``,
``self.progress``...)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from evaluators.run.classic_worker import ClassicWorker, compute_all
from evaluators.run.classic_worker import wanted as classic_worker_wanted
from evaluators.store.schema import Result
from evaluators.run.planning import _Task


CLASSIC_BATCH = 500  # rows computed between two writes (and two cancel checks)
# the last CLASSIC_TAIL batches' worth of a run's classic tasks go in batches CLASSIC_TAIL times smaller: the
# runner, done with the walk, then waits for a worker holding DEPTH small batches, not DEPTH big ones
CLASSIC_TAIL = 5
# rows computed in-process before the worker is forked (shared with it): a whole first batch (100 rows of 5
# metrics) kept the other core idle ~0.5 s; one row left the commonest words' memos to be built twice
CLASSIC_WARM_ROWS = 20


class ClassicSection:
    """The :class:`~evaluators.run.runner.Runner`'s methods for classic (in-process) tasks."""

    async def _run_classic(self, tasks: list[_Task]) -> None:
        """Compute classic tasks and write their results, a batch at a time.

        On a run large enough (see :mod:`evaluators.run.classic_worker`) batches go to a forked worker process
        while it has room and are computed here otherwise; this process writes every result, the
        worker's included, as they come back. An empty ``tasks`` (the classic tasks are over) waits
        for the worker's last batches and ends it.

        The first :data:`CLASSIC_WARM_ROWS` rows are computed here before anything else: what the metrics
        load on first use (Punkt's tables, the tokenizers, the stemmer) and the memos of the commonest
        words are then in this process's memory when the worker is forked, which computes from the
        first batch on (not done with a worker started early, which has its own memos by then and computes
        from the first row). Near the end of the walk batches are smaller
        (:data:`CLASSIC_TAIL`): the runner, which has nothing left to compute, waits for less.
        """
        start = 0
        if not self._classic_decided and tasks and self._early_worker is None:
            first = next((k for k, t in enumerate(tasks) if t.row >= tasks[0].row + CLASSIC_WARM_ROWS), len(tasks))
            self._write_classic(self._classic_seq, tasks[:first],
                                compute_all([(t.spec.name, t.values) for t in tasks[:first]], self._computes()))
            self._classic_seq += 1
            self._classic_walked += first
            start = first
        worker = self._classic_worker_now()
        while start < len(tasks):
            if self._cancelled:
                return
            size = CLASSIC_BATCH
            if self._classic_forked and self.progress.total - self._classic_walked <= CLASSIC_TAIL * CLASSIC_BATCH:
                size = CLASSIC_BATCH // CLASSIC_TAIL
            part = tasks[start:start + size]
            start += len(part)
            self._classic_walked += len(part)
            seq = self._classic_seq
            self._classic_seq += 1
            if worker is not None and not worker.room and worker.ahead:
                self._classic_collect(wait=True)  # it answers from rows computed ahead: waiting costs less
            if worker is not None and worker.room:
                worker.submit((seq, part), [(t.spec.name, t.values) for t in part], [t.row for t in part])
            else:
                self._write_classic(seq, part, compute_all([(t.spec.name, t.values) for t in part], self._computes()))
                self._classic_batches += 1
            if worker is not None:
                self._classic_collect(wait=False)
            await asyncio.sleep(0)  # let the watcher see a cancel request
        if not tasks:
            await self._classic_finish()

    def _computes_every_task(self, total: int, any_skipped: bool) -> bool:
        """Whether this run computes one classic result for every row and metric, row by row (what
        :class:`evaluators.read.outputs.LiveRunOutputs` writes rows from)."""
        specs = self.spec.specs()
        return (self.rows is None and not any_skipped and self.dataset.shape == "single"
                and all(not s.is_judge and s.row_tasks is None for s in specs)
                and total == len(self.dataset) * len(specs))

    def _computes(self) -> dict[str, Callable]:
        """Metric name -> compute function, of this run's classic metrics."""
        if self._classic_computes is None:
            self._classic_computes = {s.name: s.compute for s in self.spec.specs() if not s.is_judge}
        return self._classic_computes

    def _classic_worker_now(self) -> ClassicWorker | None:
        """The worker process for this run's classic batches, forked once this process computed the
        first rows itself (so WordNet, Punkt's parameters and the tokenizers are loaded and shared); None
        while in-process, or for good when the run is too small or the setting says so."""
        if self._classic_worker is not None:
            return None if self._classic_worker.broken else self._classic_worker
        if self._classic_decided:
            return None
        self._classic_decided = True
        specs = self.spec.specs()
        classic = sum(not s.is_judge for s in specs)
        early, self._early_worker = self._early_worker, None
        if not classic or not classic_worker_wanted(self.progress.total * classic // len(specs)):
            if early is not None:
                early.close()  # not this run's way (a resumed run's few rows...): the other core is freed now
            return None
        if early is not None and early.signatures == {s.name: s.signature() for s in specs if not s.is_judge}:
            self._classic_worker = early  # already computing this run's rows ahead
        else:
            if early is not None:
                early.close()
            self._classic_worker = ClassicWorker(self._computes())
        self._classic_forked = True
        return self._classic_worker

    def _write_classic(self, seq: int, part: list[_Task], outcomes: list[tuple[bool, Any]]) -> None:
        """Store batch ``seq``'s results (and hand them to the live outputs, if any)."""
        batch = []
        metas: dict[str, dict] = {}  # one meta dict per metric and batch: the store encodes it once
        for t, (ok, out) in zip(part, outcomes):
            if ok:
                try:
                    meta = metas.get(t.spec.name)
                    if meta is None:
                        meta = metas[t.spec.name] = {"signature": t.spec.signature()}
                    r = Result(t.row, t.spec.name, t.turn, "ok", value=out[t.spec.primary], outputs=out, meta=meta)
                except Exception as e:  # one bad row never aborts a run
                    r = Result(t.row, t.spec.name, t.turn, "error", error=f"{type(e).__name__}: {e}")
            else:
                r = Result(t.row, t.spec.name, t.turn, "error", error=out)
            batch.append(r)
        self.store.write_results(self.run_id, batch)
        if self._live is not None:
            self._live.add(seq, [t.record for t in part], batch)
        for r in batch:
            self._tick(r)

    def _classic_collect(self, wait: bool) -> None:
        """Write the batches the worker sent back; compute here those a dead worker held."""
        worker = self._classic_worker
        for (seq, part), outcomes in worker.collect(wait=wait):
            self._write_classic(seq, part, outcomes)
        if worker.broken:
            for (seq, part), items in worker.take_back():
                self._write_classic(seq, part, compute_all(items, self._computes()))
                self._classic_batches += 1

    async def _classic_finish(self) -> None:
        """Every batch back from the worker and written; the worker ended."""
        worker = self._classic_worker
        if worker is None:
            return
        while worker.outstanding and not self._cancelled:
            self._classic_collect(wait=True)
            await asyncio.sleep(0)  # heartbeats and cancel requests meanwhile
        self._classic_close()

    def _classic_close(self) -> None:
        if self._classic_worker is not None:
            self.classic_split = (self._classic_batches, self._classic_worker.batches_done)
            self._classic_worker.close()
            self._classic_worker = None
