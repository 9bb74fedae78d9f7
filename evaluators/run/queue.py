"""Runs on a job queue: procrastinate, on the PostgreSQL store itself (no broker to run beside it).

A queued run is split into chunks (run.chunked, 10,000 rows by default); each chunk is a job that any
``python -m evaluators worker`` on any machine takes. A worker does one chunk at a time and beats (the
queue's own worker heartbeat, every ``BEAT`` s); every worker also looks, every ``BEAT`` s, for jobs whose
worker has been silent ``STALLED`` s (killed, its machine gone) and puts them back in the queue, so another
worker takes the chunk up within about ``STALLED + 2 * BEAT`` s. What the dead worker stored stays; what it
had in flight is asked again.

The layers above add tasks of their own to the same queue and workers (:func:`add_task`, :func:`defer_jobs`): the
monitor's rule rounds.

Nothing secret goes through the queue or the store: a job is (run id, first row, end row); a worker's judge
keys come from its own environment (the variable the run names, the provider's usual one) or its own
configured judges.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from typing import Any, Callable

from sqlalchemy import inspect, text

from evaluators.core.errors import EvalError
from evaluators.run.chunked import (SHARE_STALE, ChunkRunner, ChunkStore, chunk_state, judge_key,
                                    plan_chunks)
from evaluators.run.spec import RunSpec
from evaluators.store.schema import utcnow
from evaluators.store.store import Store

QUEUE = "evaluators"
TASK = "evaluators.run_chunk"
BEAT = 1.0  # seconds between a worker's heartbeats, and between its looks for stalled jobs
STALLED = 6.0  # a job whose worker has been silent this long is given to another worker
SCHEMA_LOCK = 0x65766C71  # "evlq": one process applies the queue's schema

log = logging.getLogger("evaluators.queue")
_apps: dict[str, Any] = {}
_stores: dict[str, Store] = {}
_lock = threading.Lock()


def uses_queue(store: Store) -> bool:
    """Runs go through the job queue on PostgreSQL; on SQLite they stay the dashboard's child processes."""
    return store.engine.dialect.name == "postgresql"


def _conninfo(store: Store) -> str:
    return store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def app_for(store: Store):
    """The procrastinate app on this store's database (one per process and database), its task registered."""
    import procrastinate

    with _lock:
        app = _apps.get(store.url)
        if app is None:
            _stores[store.url] = store
            app = procrastinate.App(connector=procrastinate.PsycopgConnector(
                conninfo=_conninfo(store), kwargs={"application_name": "evaluators-queue"}))
            url = store.url

            @app.task(name=TASK, queue=QUEUE, pass_context=False)
            def run_chunk(run_id: str, start: int, stop: int) -> str:
                return _run_chunk(_stores[url], run_id, start, stop)

            for name, fn in _tasks.items():
                _register(app, url, name, fn)
            _apps[store.url] = app
        return app


# Jobs of the layers above (the CLI registers the monitor's rule rounds): task name -> fn(store, **args), taken by
# the same workers from the same queue. A job's arguments are names and ids, never a key; a job may be given
# again after its worker stopped beating (stalled), so its work must be safe to do twice.
_tasks: dict[str, Callable[..., Any]] = {}


def add_task(name: str, fn: Callable[..., Any]) -> None:
    """Let this process's workers take jobs of ``name``: ``fn(store, **the job's args)``."""
    with _lock:
        _tasks[name] = fn
        for url, app in _apps.items():
            _register(app, url, name, fn)


def _register(app, url: str, name: str, fn: Callable[..., Any]) -> None:
    if name not in app.tasks:
        app.task(name=name, queue=QUEUE, pass_context=False)(lambda **args: fn(_stores[url], **args))


def defer_jobs(store: Store, jobs: list[tuple[str, str, dict[str, Any]]]) -> int:
    """Queue jobs (task name, queueing lock, args) of tasks registered above, each unless one with its lock is
    waiting already (procrastinate's queueing lock: several processes deferring the same work queue it once).
    Returns how many were queued."""
    from procrastinate.exceptions import AlreadyEnqueued

    ensure_schema(store)
    app = app_for(store)
    n = 0
    with app.open():
        for name, lock, args in jobs:
            try:
                app.configure_task(name, queue=QUEUE, queueing_lock=lock).defer(**args)
                n += 1
            except AlreadyEnqueued:
                pass
    return n


def ensure_schema(store: Store) -> None:
    """The queue's tables (procrastinate's own schema), applied once to a database that lacks them."""
    if inspect(store.engine).has_table("procrastinate_jobs"):
        return
    from procrastinate.schema import SchemaManager

    with store.engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK})
        if not inspect(conn).has_table("procrastinate_jobs"):
            conn.exec_driver_sql(SchemaManager.get_schema().replace("%", "%%"))


def enqueue_run(store: Store, run_id: str, rows: int | None = None, every: bool = False) -> int:
    """Queue a stored run's unfinished chunks (``every``: all of them, to judge errored rows again); returns
    how many jobs were queued. ``rows`` a chunk: None sizes them by the run and the live workers
    (run.chunked.default_chunk_rows)."""
    if not uses_queue(store):
        raise EvalError("the job queue needs a PostgreSQL store (EVAL_DATABASE_URL=postgresql+psycopg://...)")
    ensure_schema(store)
    chunks = plan_chunks(store, run_id, rows, every, workers=live_workers(store))
    app = app_for(store)
    with app.open():
        app.tasks[TASK].batch_defer(*[{"run_id": run_id, "start": a, "stop": b} for a, b in chunks])
    return len(chunks)


def live_workers(store: Store) -> int:
    """Workers that have beaten within ``STALLED`` s (the queue's own heartbeats)."""
    with store.engine.connect() as c:
        return int(c.execute(text("SELECT count(*) FROM procrastinate_workers WHERE last_heartbeat > "
                                  "now() - make_interval(secs => :s)"), {"s": STALLED}).scalar())


def forget_succeeded(store: Store, task: str) -> int:
    """Delete the succeeded jobs of a task whose outcome is kept elsewhere (a monitor round's, in its decisions): one
    queued every minute would grow the queue's tables for ever. Returns how many."""
    with store.engine.begin() as conn:
        return conn.execute(text("DELETE FROM procrastinate_jobs WHERE task_name = :t AND status = 'succeeded'"),
                            {"t": task}).rowcount


# Keys this worker process was given for judges named by URL (``worker --judge-base-url URL --judge-api-key-env
# VAR``): URL -> the key read from its own environment. A run whose judge is another URL gets none of them
# (a submitted run must not be able to send a worker's key to a server of its choosing); named judges and
# OpenAI / Azure take theirs from the worker's environment as a single run does (judge.config.resolve_api_key).
URL_KEYS: dict[str, str] = {}


def key_for(spec: RunSpec) -> str | None:
    """The key this worker sends for a run's judge given by URL (None: resolve_api_key's own rules)."""
    judge = spec.judge
    if judge is None or judge.judge_name or not judge.base_url:
        return None
    return URL_KEYS.get(judge.base_url.rstrip("/"))


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _run_chunk(store: Store, run_id: str, start: int, stop: int) -> str:
    """A job: run the chunk, unless it is done already or its run was cancelled."""
    state = chunk_state(store, run_id, start)
    if state is not None and state["status"] in ("completed", "cancelled", "failed", "stopped"):
        return state["status"]  # (a job given again after its worker was thought dead, but finished)
    if (state is not None and state["status"] == "running" and state["heartbeat_at"] is not None
            and utcnow() - state["heartbeat_at"] < SHARE_STALE):
        # another worker has it and beats (the run was resumed while it worked): leave it. (A job given
        # back by the stalled-job recovery finds its chunk silent for at least STALLED - BEAT s.)
        return "running"
    run = store.get_run(run_id)
    if run["cancel_requested"] or run["status"] == "cancelled":
        view = ChunkStore(store, run_id, start, stop, worker_name(), judge_key(RunSpec.from_dict(run["spec"])))
        view.update_run(run_id, status="cancelled")
        return "cancelled"
    return ChunkRunner(store, run_id, start, stop, worker_name(), key_for(RunSpec.from_dict(run["spec"]))).run()


async def _recover_stalled(app, store: Store) -> None:
    """Every BEAT s: jobs whose worker is silent STALLED s go back to the queue (for any live worker); and
    runs with chunks waiting in the queue are marked as held (a live worker will take them: the dashboard
    says "stopped" only when no worker is left)."""
    while True:
        await asyncio.sleep(BEAT)
        try:
            await _recover_once(app, store)
        except Exception as e:  # noqa: BLE001 — a lost connection: try again at the next beat
            log.warning("looking for stalled jobs failed: %s", e)


async def _recover_once(app, store: Store) -> None:
    from procrastinate.exceptions import UniqueViolation
    from procrastinate.jobs import Status

    for job in await app.job_manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=STALLED):
        log.warning("job %s (%s): its worker stopped beating; queued again", job.id, job.task_name)
        try:
            await app.job_manager.retry_job(job)
        except UniqueViolation:  # a job of its queueing lock waits already (a monitor rule's next round): it does
            await app.job_manager.finish_job(job, status=Status.FAILED, delete_job=False)  # this one's work
    await asyncio.to_thread(_hold_waiting_runs, store)


def _hold_waiting_runs(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET heartbeat_at = :now WHERE status IN ('queued', 'running') AND id IN "
                          "(SELECT run_id FROM run_chunks WHERE status = 'queued')"), {"now": utcnow()})


def run_worker(store: Store, jobs: int = 1) -> None:
    """Take chunk jobs until stopped (SIGINT/SIGTERM: the chunk in hand ends as cancelled and is queued again
    by the stalled-job recovery of another worker... or finished on the next start)."""
    ensure_schema(store)
    app = app_for(store)

    async def main() -> None:
        async with app.open_async():
            recover = asyncio.create_task(_recover_stalled(app, store))
            try:
                await app.run_worker_async(queues=[QUEUE], concurrency=jobs, name=worker_name(),
                                           update_heartbeat_interval=BEAT, stalled_worker_timeout=STALLED,
                                           fetch_job_polling_interval=BEAT, install_signal_handlers=True)
            finally:
                recover.cancel()

    asyncio.run(main())
