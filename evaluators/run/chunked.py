"""One chunk of a queued run (rows ``start`` to ``stop``), run by a worker of the job queue (run.queue).

A :class:`ChunkRunner` is the :class:`Runner` walking only its chunk's rows, through a :class:`ChunkStore`
that keeps the chunk's own state (``run_chunks``: status, heartbeat, counters) and makes the run's the sum
of its chunks'. Several workers on several machines thus share one run; each chunk's results are written
as they come, keyed by (run, row, metric, turn) as always, so a chunk taken up again after its worker died
skips what was stored and asks again at most the calls that were in flight.

Workers judging with the same judge share its limits through the store: each keeps to its part of the
``--rpm`` / ``--tpm`` budget (the budget over the workers heard from in the last seconds), a pause the judge
asked of one (429, Retry-After) pauses all, and only one of them (the first by name) lets its pace creep
up to probe the provider's limit.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import time
from typing import Any

from sqlalchemy import func, insert, select, update

from evaluators.run.planning import iter_tasks
from evaluators.run.runner import Runner
from evaluators.run.spec import RunSpec
from evaluators.store.records import KeySet
from evaluators.store.schema import ChunkRow, ResultRow, RunRow, utcnow
from evaluators.store.store import Store

CHUNK_ROWS = 10_000  # rows a chunk at most, by default
CHUNK_FLOOR = 200  # rows a chunk at least, by default: below this a job's own cost (claim, check, beats) shows
CHUNKS_PER_WORKER = 4  # by default, so that a worker that ends early takes a share of what is left
COUNTERS = ("tasks_total", "tasks_done", "tasks_errored", "judge_calls", "cache_hits", "prompt_tokens",
            "completion_tokens")
ENDED = ("completed", "failed", "cancelled", "stopped")  # stopped: at the run's budget
# A worker beats twice a second; one silent this long no longer counts among those sharing a judge.
SHARE_STALE = dt.timedelta(seconds=3)
# Judges this process has checked (judge key -> the check's latency, s): its next chunks with the same judge
# and key skip the check (one call and a round trip each) and open at once.
_CHECKED: dict[str, float] = {}


def judge_key(spec: RunSpec) -> str | None:
    """Names a judge (its URL and model) across runs: workers with the same key share its limits."""
    if spec.judge is None:
        return None
    from evaluators.judge.config import judge_url

    j = spec.judge.resolved()
    return hashlib.sha256(f"{judge_url(j)}|{j.model}".encode()).hexdigest()[:32]


def default_chunk_rows(n_rows: int, workers: int) -> int:
    """Rows a chunk by default: a few chunks for each live worker (counted as at least 4, since workers may
    join after the run is queued), no fewer than ``CHUNK_FLOOR`` rows and no more than ``CHUNK_ROWS``.
    So adding workers speeds up any run of more than a few hundred rows, and a big run is not one job a worker."""
    share = max(workers, 4) * CHUNKS_PER_WORKER
    return max(CHUNK_FLOOR, min(CHUNK_ROWS, -(-n_rows // share)))


def plan_chunks(store: Store, run_id: str, rows: int | None = None, every: bool = False,
                workers: int = 0) -> list[tuple[int, int]]:
    """Split the run into chunks of ``rows`` rows (None: :func:`default_chunk_rows` for ``workers`` live
    workers); a run queued before keeps its chunks, whatever ``rows`` says now. Chunks not completed (or, with
    ``every``, all: a retry of errored rows) are queued again, their results kept. Returns the (start, stop) of
    the chunks to queue."""
    run = store.get_run(run_id)
    n = store.dataset_info(run["dataset_id"])["n_rows"]
    with store.session() as s:
        have = {c.start: c for c in s.scalars(select(ChunkRow).where(ChunkRow.run_id == run_id))}
        if have:
            bounds = sorted((c.start, c.stop) for c in have.values())
        else:
            size = rows or default_chunk_rows(n, workers)
            bounds = [(start, min(start + size, n)) for start in range(0, max(n, 1), size)]
        todo = []
        for start, stop in bounds:
            old = have.get(start)
            if old is None:
                s.execute(insert(ChunkRow).values(run_id=run_id, start=start, stop=stop, status="queued", attempts=0,
                                                  **{c: 0 for c in COUNTERS}))
            elif old.status == "completed" and not every:
                continue
            else:
                old.status, old.error = "queued", None
            todo.append((start, stop))
        s.execute(update(RunRow).where(RunRow.id == run_id).values(
            status="queued", cancel_requested=False, error=None, finished_at=None, heartbeat_at=utcnow()))
        s.commit()
    return todo


def chunk_state(store: Store, run_id: str, start: int) -> dict[str, Any] | None:
    with store.session() as s:
        c = s.get(ChunkRow, (run_id, start))
        return None if c is None else {k.name: getattr(c, k.name) for k in ChunkRow.__table__.columns}


class ChunkStore:
    """The store as a chunk's runner sees it: the run's state is the chunk's (see the module's text);
    everything else is the store's."""

    def __init__(self, store: Store, run_id: str, start: int, stop: int, worker: str, key: str | None):
        self.store, self.run_id, self.start, self.stop, self.worker, self.key = store, run_id, start, stop, worker, key
        self.runner: Runner | None = None
        self._settled = 0  # results this chunk had settled before this worker took it (a chunk taken up again)

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def _chunk(self):
        return (ChunkRow.run_id == self.run_id) & (ChunkRow.start == self.start)

    def claim_run(self, run_id: str, force: bool = False) -> bool:
        """The queue gave this worker the chunk (one worker a job): mark it and the run running."""
        now = utcnow()
        with self.store.session() as s:
            self._settled = s.scalar(select(func.count()).select_from(ResultRow).where(
                ResultRow.run_id == run_id, ResultRow.row_idx >= self.start, ResultRow.row_idx < self.stop,
                ResultRow.status != "error")) or 0
            s.execute(update(ChunkRow).where(self._chunk()).values(
                status="running", worker=self.worker, heartbeat_at=now, attempts=ChunkRow.attempts + 1, error=None,
                judge_key=self.key))
            s.execute(update(RunRow).where(RunRow.id == run_id, RunRow.status.in_(("queued", "running"))).values(
                status="running", started_at=func.coalesce(RunRow.started_at, now), heartbeat_at=now))
            s.commit()
        return True

    def done_keyset(self, run_id: str) -> KeySet:
        return self._keys(run_id, ResultRow.status != "error")

    def result_keyset(self, run_id: str) -> KeySet:
        return self._keys(run_id, True)

    def _keys(self, run_id: str, cond) -> KeySet:
        out = KeySet()
        with self.store.session() as s:
            for r in s.execute(select(ResultRow.row_idx, ResultRow.metric, ResultRow.turn).where(
                    ResultRow.run_id == run_id, ResultRow.row_idx >= self.start, ResultRow.row_idx < self.stop, cond)):
                out.add((r[0], r[1], r[2]))
        return out

    def update_run(self, run_id: str, **values: Any) -> None:
        """The runner's progress, heartbeat and end, as the chunk's; the run's counters become the sums of its
        chunks', and the last chunk to end ends the run."""
        now = utcnow()
        status = values.get("status")
        final = status in ENDED
        chunk: dict[str, Any] = {c: values[c] for c in COUNTERS if c in values}
        for c in ("tasks_total", "tasks_done"):  # the runner counts what it does; the chunk, all of its tasks
            if c in chunk:
                chunk[c] += self._settled
        chunk["heartbeat_at"] = now
        limiter = getattr(self.runner, "_limiter", None)
        if limiter is not None:
            wait = limiter.paused_until - time.monotonic()
            chunk["paused_until"] = now + dt.timedelta(seconds=wait) if wait > 0 else None
            chunk["pace"] = limiter.rate
        if final:
            chunk.update(status=status, error=values.get("error"))
        with self.store.session() as s:
            if final:  # the chunks that end take turns: the last one sees every other chunk ended
                s.execute(select(RunRow.id).where(RunRow.id == run_id).with_for_update())
            s.execute(update(ChunkRow).where(self._chunk()).values(**chunk))
            sums = s.execute(select(*[func.coalesce(func.sum(getattr(ChunkRow, c)), 0) for c in COUNTERS])
                             .where(ChunkRow.run_id == run_id)).one()
            run: dict[str, Any] = dict(zip(COUNTERS, (int(x) for x in sums)), heartbeat_at=now)
            if "rate_limited_until" in values:
                run["rate_limited_until"] = values["rate_limited_until"]
            if final:
                run.update(self._run_end(s, run_id, now))
            s.execute(update(RunRow).where(RunRow.id == run_id).values(**run))
            if limiter is not None and not final and self.key is not None:
                self._share(s, limiter, now)
            s.commit()

    def _run_end(self, s, run_id: str, now: dt.datetime) -> dict[str, Any]:
        """The run's end once no chunk is left (completed unless one failed, was cancelled or stopped at the budget,
        in that order); else nothing."""
        chunks = s.execute(select(ChunkRow.status, ChunkRow.error, ChunkRow.start).where(ChunkRow.run_id == run_id)
                           .order_by(ChunkRow.start)).all()
        if any(st not in ENDED for st, _, _ in chunks):
            return {}
        failed = [(e, a) for st, e, a in chunks if st == "failed"]
        if failed:
            return dict(status="failed", finished_at=now, error=f"rows from {failed[0][1] + 1}: {failed[0][0]}"[:2000])
        if any(st == "cancelled" for st, _, _ in chunks):
            return dict(status="cancelled", finished_at=now)
        stopped = [e for st, e, _ in chunks if st == "stopped"]
        if stopped:  # (the runner's reason: "budget: ..."; resuming with a higher budget queues these chunks again)
            return dict(status="stopped", finished_at=now, error=stopped[0])
        return dict(status="completed", finished_at=now, error=None)

    def _share(self, s, limiter, now: dt.datetime) -> None:
        peers = s.execute(select(ChunkRow.worker, ChunkRow.paused_until).where(
            ChunkRow.judge_key == self.key, ChunkRow.status == "running",
            ChunkRow.heartbeat_at >= now - SHARE_STALE)).all()
        workers = sorted({w for w, _ in peers if w} | {self.worker})
        limiter.share(len(workers), probing=workers[0] == self.worker)
        pauses = [p for _, p in peers if p is not None and p > now]
        if pauses:
            limiter.pause_until(time.monotonic() + (max(pauses) - now).total_seconds())


class ChunkRunner(Runner):
    """The run's rows ``start`` to ``stop`` (see the module's text); keys only from this process's environment
    or the run's named judges, never through the queue or the store."""

    EAGER_WRITES = True  # a worker killed with SIGKILL: its chunk's next taker asks again at most one task a slot

    def __init__(self, store: Store, run_id: str, start: int, stop: int, worker: str, api_key: str | None = None):
        spec = RunSpec.from_dict(store.get_run(run_id)["spec"])
        view = ChunkStore(store, run_id, start, stop, worker, judge_key(spec))
        super().__init__(view, run_id, api_key=api_key)  # type: ignore[arg-type]  (a Store in all the runner uses)
        view.runner = self
        self._range = range(start, stop)

    async def _check_judge(self) -> None:
        key = self.store.key
        if key is not None and key in _CHECKED and not self.spec.jury:
            self._trusted = True
            self._limiter.start_ramp(_CHECKED[key])
            return
        start = time.perf_counter()
        await super()._check_judge()
        if key is not None:
            _CHECKED[key] = time.perf_counter() - start

    def _walk(self, done, stored, values: bool = True):
        return iter_tasks(self.dataset, self.spec, done, rows=self._range, values=values)  # type: ignore[arg-type]
