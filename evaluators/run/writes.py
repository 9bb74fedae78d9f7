"""How a run's judge results reach the store: written in one transaction with the clock (``FLUSH_SECONDS``,
or ``PENDING_MAX`` results, in run.runner), by the store's thread while the event loop goes on calling, in
order; or (``EAGER_WRITES``) each before its worker slot takes its next task. A mixin of
:class:`evaluators.run.runner.Runner`, which owns the state it reads (``self._pending``, ``self._writes``,
``self._io``...)."""
from __future__ import annotations

import asyncio

from evaluators.core.redact import redact
from evaluators.judge.config import resolve_api_key

ERROR_CHARS = 500  # a stored error's length at most
WRITES_QUEUED = 4  # result batches handed to the store's thread and not yet written, at most


class WriteSection:
    """The :class:`~evaluators.run.runner.Runner`'s methods that write results."""

    # Each result written before its worker slot takes the next task (batched with those that came during the
    # write before), not on the clock: a process killed mid-run then loses no answered call but those of its
    # slots' tasks, in flight or being written (one call a task; a repeated or jury task makes several), and
    # run.chunked's chunk, taken up by another worker, asks only those again. Off by default: the CLI's runs on SQLite with a fast judge gain from fewer, bigger transactions.
    EAGER_WRITES = False

    def _flush_results(self) -> None:
        if not self._trusted:
            return  # held until the judge passed its check
        results, cache = self._pending, self._pending_cache
        self._pending, self._pending_cache = [], []
        for r in results:  # every result on its way to the store and rows.jsonl: here, whichever path made it
            if r.error:
                r.error = self._redacted(r.error)
        if not results and not cache:
            self._settle_writes(wait=False)  # what the store's thread wrote since counts now, not with the next results
            return
        if not self._offloaded():
            self.store.write_results(self.run_id, results, cache)
            for r in results:
                self._tick(r)
            return
        # written by the store's thread, in order; counted (and shown) once written: _settle_writes
        self._writes.append((self._io.submit(self.store.write_results, self.run_id, results, cache), results))
        self._settle_writes(wait=len(self._writes) > WRITES_QUEUED)  # a lagging thread is waited for: memory stays flat

    def _redacted(self, text: str) -> str:
        """An error text without the run's keys (its judge's, a jury's) nor anything shaped like a key: a
        provider may echo the key it was sent (:func:`evaluators.core.redact.redact`)."""
        if getattr(self, "_secrets", None) is None:
            keys = [self.api_key]
            for j, cfg in enumerate(self.spec.jurors()):
                try:
                    keys.append(resolve_api_key(cfg, self.api_key) if j == 0 else resolve_api_key(cfg.resolved()))
                except Exception:  # noqa: BLE001 — a judge with no key has none to hide
                    pass
            self._secrets = tuple(keys)
        return redact(text, self._secrets)[:ERROR_CHARS]  # cut after the keys are out: no half key is left

    async def _written(self) -> None:
        """EAGER_WRITES: hand what is pending to the store and wait until it is written. A worker slot takes its
        next task only then, so no more tasks than slots are ever answered and not yet stored."""
        if not self._trusted:
            return  # held until the judge passed its check; written then, with the clock
        if self._writes and not self._writes[-1][0].done() and (self._pending or self._pending_cache):
            await asyncio.wait({asyncio.wrap_future(self._writes[-1][0])})  # the store's thread is busy: then
        if self._pending or self._pending_cache:  # what gathered meanwhile, this slot's result among it (unless
            self._flush_results()  # another slot handed it over: then it is in the newest write)
        if self._writes:  # written in order, by one thread: the newest write ends after the one holding it
            await asyncio.wait({asyncio.wrap_future(self._writes[-1][0])})
        self._settle_writes(wait=False)  # a write that failed raises here: no next call on an unwritten result

    def _store_failed(self, e: BaseException) -> None:
        """A write failed in a worker slot or the watcher: the run stops and fails with it (no slot, or no
        watcher, left to end quietly while the others wait on a queue nobody empties)."""
        if self._store_error is None:
            self._store_error = e
        if self._phase is not None and not self._phase.done():
            self._phase.cancel()

    def _offloaded(self) -> bool:
        """Whether store work goes to the store's thread: yes, unless the judge has signalled a rate limit.
        Then the provider sets the pace, not this loop, and the limiter's pacing met more 429s with a second
        thread taking turns on the interpreter (bench/rate_limits.py at 64 in flight: 8% against 4%)."""
        if self._io is None:
            return False
        if self._limiter is not None and self._limiter.signalled:
            self._settle_writes(wait=True)  # (once: what the thread holds is written before anything here)
            return False
        return True

    def _settle_writes(self, wait: bool, raise_: bool = True) -> None:
        """Count the results the store's thread has written (all of them, waiting, with ``wait``); a
        write that failed raises here, on the run's thread, as it did when writes were made here."""
        writes = self._writes
        while writes and (wait or writes[0][0].done()):
            future, results = writes.popleft()
            try:
                future.result()
            except BaseException:
                if raise_:
                    writes.clear()
                    raise
                continue
            for r in results:
                self._tick(r)
