"""Runs an evaluation: the same code from the CLI, Python, or a dashboard worker.

The runner plans (row, metric, turn) tasks, skips those the store already holds,
computes classic metrics in-process, sends judge calls through the JudgeClient
with bounded concurrency, and writes each result as it completes. A crash loses
only calls in flight; running again continues where it stopped.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterator

from evaluators.data.dataset import Dataset
from evaluators.core.asyncrun import run_to_end
from evaluators.core.errors import EvalError
from evaluators.judge.client import EarlyProbe, JudgeClient, JudgeError, JudgeUnavailable
from evaluators.judge.config import judge_url, resolve_api_key
from evaluators.run.classic_worker import ClassicWorker
from evaluators.judge.ratelimit import RateLimiter
from evaluators.run.spec import RunSpec
from evaluators.store.records import KeySet
from evaluators.store.schema import Result, utcnow
from evaluators.store.store import Store
from evaluators.core.replies import ReplyError, SkippedReply
from evaluators.judge.templates import Template
from evaluators.run.batching import BatchSection
from evaluators.run.budget import BudgetSection
from evaluators.run.classic_section import ClassicSection
from evaluators.run.planning import Progress, _Task, iter_tasks, render_judge_tasks
from evaluators.run.repeats import jury_result, task_keys
from evaluators.run.writes import WriteSection

if TYPE_CHECKING:
    from evaluators.read.outputs import LiveRunOutputs

CHUNK = 500  # tasks planned, looked up in the cache and rendered at a time (memory stays flat in the rows)
PENDING_MAX = 1000  # finished results held before a write, whatever the clock says
FLUSH_SECONDS = 0.25  # judge results are written in one transaction this often (a crash loses at most this)


class Runner(ClassicSection, BudgetSection, BatchSection, WriteSection):
    """Executes one stored run.

    Args:
        store: where results go.
        run_id: the run (created by :func:`evaluators.api.start_run`).
        api_key: judge key for this process only (never stored).
        on_progress: called with a :class:`Progress` after each result.
        rows: restrict to these row indexes (retrying failed rows).
        take_over: run even if another worker holds the run (its heartbeat is under 30 s old);
            for a user re-running a command whose process was killed.
        probe: the judge's check, already under way (:class:`EarlyProbe`); else the runner sends its
            own when it has its first call to make. Either way no real call leaves before it passed;
            then calls open up to the concurrency within one check latency unless the check met a
            rate limit (:meth:`evaluators.judge.ratelimit.RateLimiter.start_ramp`).
        outputs: ``rows.jsonl`` and ``metrics.json`` written as the results are (the CLI's); given every
            classic batch in walk order when this run computes every task of every row itself (fresh,
            single-turn, classic metrics only), abandoned otherwise (the caller then reads the store).
    """

    def __init__(self, store: Store, run_id: str, api_key: str | None = None,
                 on_progress: Callable[[Progress], None] | None = None, rows: set[int] | None = None,
                 take_over: bool = False, probe: EarlyProbe | None = None,
                 outputs: "LiveRunOutputs | None" = None, classic_worker: ClassicWorker | None = None):
        self.store, self.run_id, self.api_key, self.take_over = store, run_id, api_key, take_over
        run = store.get_run(run_id)
        # records read from the store a chunk at a time as the run walks them: flat in the rows
        self.dataset: Dataset = store.open_dataset(run["dataset_id"])
        self.spec = RunSpec.from_dict(run["spec"])
        self.on_progress = on_progress
        self.rows = rows
        self.progress = Progress()
        self._cancelled = False
        self._pending: list[Result] = []  # finished judge results not yet written
        self._pending_cache: list[dict] = []
        self._unrendered: list = []  # (task, template, error): rows a user's template stopped at a bound on
        self._phase: asyncio.Task | None = None  # planning and judging, cancelled on a cancel request
        self._limiter: RateLimiter | None = None  # paces the judge's calls by its rate limits
        self._client: JudgeClient | None = None  # made (and the judge checked) at the first call to make
        self._jurors: dict[int, JudgeClient] = {}  # a jury's further judges' clients, made at their first call
        self._multi = self.spec.repeat > 1 or bool(self.spec.jury)  # several judgments per task
        self._templates: dict[str, dict[str, Template]] = {}  # metric -> mode -> template, resolved once
        self._early = probe
        self._probe: asyncio.Task | None = None  # the judge's check, running alongside the first calls
        self._probe_error: BaseException | None = None
        self._store_error: BaseException | None = None  # a write that failed in a slot or the watcher: the run's end
        self._trusted = True  # False from the judge's check until it passed: results are held, not written
        self._classic_worker: ClassicWorker | None = None  # a forked process computing classic batches too
        self._classic_batches = 0  # classic batches computed in this process
        self._classic_decided = False  # whether the worker question was settled (asked once, after the first rows)
        self._classic_computes: dict[str, Callable] | None = None
        self.classic_split: tuple[int, int] | None = None  # classic batches computed (here, by the worker), if forked
        self._classic_seq = 0  # classic batches made so far: the next one's number in the walk's order
        self._classic_walked = 0  # classic tasks handed to a batch so far
        self._classic_forked = False  # a worker was forked for this run (alive or not since)
        self._live = outputs
        self._early_worker = classic_worker  # forked by the caller before loading (parallel.start_early), if any
        # judge results, progress and cancel checks go to the store from a thread of their own, in order:
        # a commit (or a busy disk) never holds up the event loop and the answers waiting on it
        self._io: concurrent.futures.ThreadPoolExecutor | None = None
        self._writes: deque[tuple[concurrent.futures.Future, list[Result]]] = deque()

    def _walk(self, done: set, stored: set | None, values: bool = True) -> Iterator[_Task | Result]:
        """This run's tasks (lazily): everything not settled, or with ``rows``, those rows' and any never run.

        A retry of failed rows on a run that was interrupted also finishes what never ran, so the run
        can end "completed" honestly rather than with rows still pending.
        """
        if self.rows is None:
            return iter_tasks(self.dataset, self.spec, done, values=values)
        rows = self.rows
        return iter_tasks(self.dataset, self.spec, done, keep=lambda k: k[0] in rows or k not in stored,
                          values=values)

    def _snapshot(self) -> tuple[KeySet, KeySet | None]:
        done = self.store.done_keyset(self.run_id)  # a bit per key: flat in the rows
        return done, (self.store.result_keyset(self.run_id) if self.rows is not None else None)

    def plan(self) -> tuple[list[_Task], list[Result]]:
        """Tasks to run and skipped results to record, as lists (see :meth:`_walk`)."""
        tasks, skipped = [], []
        for x in self._walk(*self._snapshot()):
            (skipped if isinstance(x, Result) else tasks).append(x)
        return tasks, skipped

    # ---------------------------------------------------------------- execution
    def run(self) -> str:
        """Run to the end (or cancellation); returns the final status. Works inside a running event loop."""
        return run_to_end(self.arun())

    async def arun(self) -> str:
        """Plan lazily, feed a bounded queue chunk by chunk, judge with a fixed set of workers.

        Memory is flat in the rows: only one chunk of tasks (rendered) and the queue are held at a
        time; results go to the store in batches as they come.
        """
        store, rid = self.store, self.run_id
        if not store.claim_run(rid, force=self.take_over):
            raise EvalError(f"run {rid} is being executed by another worker (it reported in the last 30 s)")
        try:
            if self.spec.judge is not None:
                # a named judge's URL and model are read now, from the server's configuration
                self.spec.judge = self.spec.judge.resolved()
            done, stored = self._snapshot()
            total, skipped, any_skipped = 0, [], False
            for x in self._walk(done, stored, values=False):  # counts without rendering, records skipped turns
                if isinstance(x, Result):
                    skipped.append(x)
                    any_skipped = True
                    if len(skipped) >= CHUNK:
                        store.write_results(rid, skipped)
                        skipped = []
                else:
                    total += 1
            store.write_results(rid, skipped)
            self.progress.total = total
            if self._live is not None and not self._computes_every_task(total, any_skipped):
                self._live.abandon()
                self._live = None
            store.update_run(rid, tasks_total=total, tasks_done=0, tasks_errored=0)
            self._start_budget()  # what earlier sittings spent counts against the budget
            watcher = asyncio.create_task(self._watch())  # heartbeat from here on, the judge check included
            try:
                self._phase = asyncio.create_task(self._execute(done, stored))
                try:
                    await self._phase
                except asyncio.CancelledError:
                    if self._probe_error is not None and not asyncio.current_task().cancelling():
                        raise self._probe_error from None  # the judge failed its check: nothing was written
                    if self._store_error is not None and not asyncio.current_task().cancelling():
                        raise self._store_error from None  # the store refused a write: the run fails with it
                    if not self._cancelled or asyncio.current_task().cancelling():
                        raise
            finally:
                watcher.cancel()
                self._flush_results()
                self._settle_writes(wait=True)  # every result written before the outcome is read
            if self._cancelled:
                status, error = "cancelled", None
            elif self._budget_stopped():  # the calls it did not send stay pending: a resume asks them
                status, error = "stopped", self._budget_stopped()
            else:
                status, error = self._outcome(done, stored)
            self._flush_progress(status=status, error=error, finished_at=utcnow())
            return status
        except (KeyboardInterrupt, asyncio.CancelledError):  # results so far were flushed in the finally above
            store.update_run(rid, status="cancelled", finished_at=utcnow())
            raise
        except BaseException as e:
            msg = str(e) if isinstance(e, EvalError) else f"{type(e).__name__}: {e}"
            self._flush_progress(status="failed", error=msg[:2000], finished_at=utcnow())
            raise
        finally:
            if self._io is not None:
                self._settle_writes(wait=True, raise_=False)  # (a failure already on its way out wins)
                self._io.shutdown(wait=True)
                self._io = None
            if self._client is not None:
                await self._client.aclose()
            for c in self._jurors.values():
                await c.aclose()

    async def _execute(self, done: set, stored: set | None) -> None:
        judged = self.spec.judge is not None and any(s.is_judge for s in self.spec.specs())
        n = self.spec.judge.concurrency if judged else 0
        queue: asyncio.Queue = asyncio.Queue(maxsize=max(2 * n, 64))
        workers = [asyncio.create_task(self._worker(queue)) for _ in range(n)]
        try:
            chunk: list[_Task] = []
            # the first chunk no bigger than the queue: the first calls wait for no more rendering than they need
            size = min(CHUNK, queue.maxsize) if judged else CHUNK
            for x in self._walk(done, stored):
                if isinstance(x, Result):
                    continue  # recorded before the run started
                chunk.append(x)
                if len(chunk) >= size:
                    await self._feed(chunk, queue)
                    chunk, size = [], CHUNK
                    if self._cancelled:
                        return
            if chunk:
                await self._feed(chunk, queue)
            await self._classic_finish()
            await self._batch_finish(queue)  # (--batch: the gathered tasks judged through the Batch API)
            for _ in workers:
                await queue.put(None)
            await asyncio.gather(*workers)
            if self._probe is not None:
                await self._probe  # every call is back; the check's verdict decides whether they count
        finally:
            self._classic_close()
            if self._probe is not None:
                if not self._probe.done():
                    self._probe.cancel()
                elif not self._probe.cancelled():
                    self._probe.exception()  # its failure is the run's, raised by arun: not "never retrieved"
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _feed(self, chunk: list[_Task], queue: asyncio.Queue) -> None:
        """Compute a chunk's classic tasks, settle its judged tasks the cache answers, queue the rest."""
        classic = [t for t in chunk if not t.spec.is_judge]
        judged = [t for t in chunk if t.spec.is_judge]
        if classic or self._classic_worker is not None:  # (none left: the worker's last batches are written)
            await self._run_classic(classic)
        if not judged or self._cancelled:
            return
        if self._io is None:  # made with the first judged chunk: classic tasks come first, and a run's classic
            # batches may go to a forked process, which is forked only while this process runs no other thread
            self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="run-store")
        # rendering and the cache lookup on the store's thread, off the event loop
        prepared = await asyncio.wrap_future(self._io.submit(self._prepare, judged))
        todo = self._from_cache(judged, prepared)
        self._batch_collect(todo) if self.spec.batch else await self._enqueue(todo, queue)

    async def _enqueue(self, todo: list, queue: asyncio.Queue) -> None:
        """Queue judge tasks for direct calls (the client made, and the judge checked, at the first)."""
        if todo and self._client is None:
            judge = self.spec.judge
            self._limiter = RateLimiter(judge.concurrency, judge.rpm, judge.tpm)
            self._client = JudgeClient(judge, self.api_key, limiter=self._limiter)
            # No row is judged before the judge passed its check: a wrong URL, key or model costs one
            # call, not a round of failing ones. The CLI's check left while the dataset was stored, so
            # what is awaited here is only the rest of its round trip.
            self._trusted = False
            self._probe = asyncio.create_task(self._check_judge())
            await asyncio.wait({self._probe})
            if self._probe_error is not None or self._cancelled:
                return
        for item in todo:
            if self._cancelled:
                return
            await queue.put(item)

    async def _worker(self, queue: asyncio.Queue) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            if self._cancelled:
                continue  # left pending: the run ends "cancelled"
            estimate = self._budget_admit(item[2])
            if estimate is None:
                continue  # past the budget: left pending, the run ends "stopped"
            await self._judge_one(*item)
            self._budget_settle(item[0], estimate)
            try:
                if self.EAGER_WRITES:
                    await self._written()
                elif len(self._pending) >= PENDING_MAX:
                    self._flush_results()
            except Exception as e:  # noqa: BLE001 — the store refused a write: the whole run stops, saying why
                self._store_failed(e)
                return

    def _outcome(self, done: set, stored_before: set | None) -> tuple[str, str | None]:
        """The final status: never "completed" while a planned task has no stored result, and
        "failed" (with the first error and the judge's URL) when no judged row succeeded."""
        if self._live is not None and self._live.complete():
            lost = []  # each row's results were stored before the live outputs had them, and every row came
        else:
            stored = self.store.result_keyset(self.run_id)
            lost = [(x.row, x.spec.name, x.turn) for x in self._walk(done, stored_before, values=False)
                    if isinstance(x, _Task) and (x.row, x.spec.name, x.turn) not in stored]
            del stored
        if lost:  # every path records a result; this is the last guard should one ever not
            self.store.write_results(self.run_id, [Result(r, m, t, "error", error="no result was recorded for this task")
                                                   for r, m, t in lost])
            r, m, t = lost[0]
            return "failed", f"{len(lost)} task(s) ended without a result (first: row {r + 1}, {m}, turn {t + 1})"
        judged = [s.name for s in self.spec.specs() if s.is_judge]
        if judged and self.spec.judge is not None:
            counts = self.store.status_counts(self.run_id, judged)
            if counts.get("error") and not counts.get("ok"):
                first = self.store.first_error(self.run_id, judged)
                return "failed", (f"every judged row failed ({counts['error']}); first error: {first} "
                                  f"(judge: {judge_url(self.spec.judge)}, model '{self.spec.judge.model}')")
        return "completed", None

    def _flush_progress(self, **extra: Any) -> None:
        p = self.progress
        self.store.update_run(self.run_id, tasks_done=p.done, tasks_errored=p.errored, judge_calls=p.judge_calls,
                              cache_hits=p.cache_hits, prompt_tokens=p.prompt_tokens,
                              completion_tokens=p.completion_tokens, heartbeat_at=utcnow(),
                              rate_limited_until=self._rate_limited_until(),
                              **{k: self._redacted(v) if k == "error" and v else v for k, v in extra.items()})

    def _rate_limited_until(self) -> dt.datetime | None:
        """When new judge calls may leave again, while the provider has asked us to wait."""
        wait = self._limiter.waiting_for() if self._limiter is not None else 0.0
        return utcnow() + dt.timedelta(seconds=wait) if wait > 0.05 else None

    async def _check_judge(self) -> None:
        """Await the judge's check (the early one, or one sent now); on failure stop the run."""
        start = time.perf_counter()
        try:  # (the count read after the await: workers add theirs meanwhile)
            calls = await (self._early.result() if self._early is not None else self._client.probe())
            self.progress.judge_calls += calls
        except JudgeUnavailable as e:
            self.progress.judge_calls += e.attempts
            self._fail_check(e)
            raise
        except Exception as e:  # noqa: BLE001 — whatever stopped the check stops the run, said as it was
            self._fail_check(e)
            raise
        self._trusted = True
        latency = time.perf_counter() - start  # (the check through this run's client: its limiter saw it)
        if self._early is not None:
            latency = self._early.latency if self._early.latency is not None else latency
            if self._early.limiter is not None:
                self._limiter.adopt(self._early.limiter)
        self._limiter.start_ramp(latency)  # no limit signalled: open up to the concurrency within moments

    def _fail_check(self, e: BaseException) -> None:
        self._probe_error = e
        self._pending, self._pending_cache = [], []  # calls made alongside a failed check do not count
        if self._phase is not None and not self._phase.done():
            self._phase.cancel()

    async def _watch(self) -> None:
        """Writes finished results, heartbeat and progress; picks up cancel requests. A write the store
        refused stops the run with its error (before, the watcher ended unseen and the run went on)."""
        try:
            await self._beat()
        except Exception as e:  # noqa: BLE001 — said as the run's error
            self._store_failed(e)

    async def _beat(self) -> None:
        beat = 0
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            self._flush_results()
            beat += 1
            if beat % 2:
                continue
            if not self._offloaded():
                self._flush_progress(status="running")
                requested = self.store.cancel_requested(self.run_id)
            else:  # both on the store's thread, after the results before them
                p = self.progress
                update = self._io.submit(self.store.update_run, self.run_id, tasks_done=p.done, tasks_errored=p.errored,
                                judge_calls=p.judge_calls, cache_hits=p.cache_hits, prompt_tokens=p.prompt_tokens,
                                completion_tokens=p.completion_tokens, heartbeat_at=utcnow(),
                                rate_limited_until=self._rate_limited_until(),
                                status="running")  # also after a dashboard marked the held run "queued"
                self._writes.append((update, []))  # awaited before the run's final status is written
                requested = await asyncio.wrap_future(self._io.submit(self.store.cancel_requested, self.run_id))
            if requested:
                self._cancelled = True
                if self._phase is not None:
                    self._phase.cancel()

    def _tick(self, result: Result) -> None:
        if result.status == "error":
            self.progress.errored += 1
        else:
            self.progress.done += 1
        if self.on_progress:
            self.on_progress(self.progress)

    def _prepare(self, tasks: list[_Task]) -> tuple[list[tuple[_Task, Template, list[dict], str]], dict]:
        """(task, template, messages, cache key) for each task, and the cache's replies by key (every
        repeat's key when the run judges each task more than once)."""
        failed: list = []  # rows a user's template stopped at a bound on: each an error of its own, not the run's
        prepared = render_judge_tasks(tasks, self.spec, self._templates, failed)
        self._unrendered = self._unrendered + failed  # (taken on the event loop by _from_cache)
        if not self._multi:
            return prepared, self.store.cache_get_many([p[3] for p in prepared])
        keys = [x for t, template, messages, key in prepared for _, x in self._keys(template, messages, key)]
        return prepared, self.store.cache_get_many(keys)

    def _keys(self, template: Template, messages: list[dict], key: str) -> list[tuple[int, str]]:
        return task_keys(key, template, messages, self.spec.jurors(), self.spec.repeat)

    def _from_cache(self, tasks: list[_Task], prepared: tuple[list, dict] | None = None
                    ) -> list[tuple[_Task, Template, list[dict], str]]:
        """Record the tasks the cache answers; return the rest (task, template, messages, cache key)."""
        prepared, hits = self._prepare(tasks) if prepared is None else prepared
        unrendered, self._unrendered = self._unrendered, []
        self._pending.extend(self._failed(t, template, e) for t, template, e in unrendered)
        todo = []
        for t, template, messages, key in prepared:
            if self._multi:
                keys = self._keys(template, messages, key)
                got = [hits.get(x) for _, x in keys]
                if all(got):
                    self.progress.cache_hits += len(got)
                    self._pending.append(self._settle(t, template, lambda: self._combined(
                        t, template, keys, [self._from_hit(t, template, h) for h in got])))
                else:
                    todo.append((t, template, messages, key, got))
                continue
            hit = hits.get(key)
            if hit is None:
                todo.append((t, template, messages, key))
                continue
            self.progress.cache_hits += 1
            self._pending.append(self._settle(t, template, lambda: self._from_hit(t, template, hit)))
        return todo

    def _settle(self, t: _Task, template: Template, make: Callable[[], Result], raw: str | None = None) -> Result:
        """``make()``'s result, or, whatever it raised, an error on this row with the reason."""
        try:
            return make()
        except Exception as e:  # noqa: BLE001 — a poisoned reply must end as an explained error, never vanish
            return self._failed(t, template, e, raw)

    def _failed(self, t: _Task, template: Template, exc: BaseException, raw: str | None = None) -> Result:
        try:
            meta = self._meta(t, template)
        except Exception:  # noqa: BLE001
            meta = None
        return Result(t.row, t.spec.name, t.turn, "error", error=f"{type(exc).__name__}: {exc}"[:2000], raw=raw,
                      meta=meta)

    def _combined(self, t: _Task, template: Template, keys: list[tuple[int, str]], results: list[Result]) -> Result:
        """A task's judgments (repeats, jurors) as one result, or the first judgment's error."""
        bad = next((r for r in results if r.status != "ok"), None)
        if bad is not None:
            return bad
        names = [j.judge_name or j.model for j in self.spec.jurors()]
        return jury_result(t.spec, results, [j for j, _ in keys], names)

    def _juror_client(self, j: int) -> JudgeClient:
        """The client of the run's judge (j = 0) or of a jury's further judge, made at its first call."""
        if j == 0:
            return self._client
        if j not in self._jurors:
            cfg = self.spec.jury[j - 1].resolved()
            self._jurors[j] = JudgeClient(cfg, resolve_api_key(cfg), limiter=RateLimiter(cfg.concurrency, cfg.rpm,
                                                                                         cfg.tpm))
        return self._jurors[j]

    async def _judge_repeats(self, t: _Task, template: Template, messages: list[dict], key: str,
                             got: list) -> None:
        """The judgments of a repeated or jury task the cache lacks, asked at once (each judge's limiter paces
        them); each usable reply cached under its own key, so a retry asks only what failed."""
        keys = self._keys(template, messages, key)

        async def one(r: int) -> Result:
            if got[r] is not None:
                self.progress.cache_hits += 1
                return self._from_hit(t, template, got[r])
            j = keys[r][0]
            try:
                reply = await self._juror_client(j).complete(messages, extra=template.request_params())
            except JudgeError as e:
                self.progress.judge_calls += e.attempts
                return Result(t.row, t.spec.name, t.turn, "error", error=str(e), meta=self._meta(t, template))
            res = self._answered(t, template, reply)
            if res.status == "ok":
                self._pending_cache.append(self._cache_entry(keys[r][1], self.spec.jurors()[j].model, reply))
            return res

        try:
            results = await asyncio.gather(*[one(r) for r in range(len(keys))])
            self._pending.append(self._settle(t, template, lambda: self._combined(t, template, keys, list(results))))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 — anything else ends as an error on the row, with its reason
            self._pending.append(self._failed(t, template, e))

    async def _judge_one(self, t: _Task, template: Template, messages: list[dict], key: str,
                         got: list | None = None) -> None:
        if got is not None:
            await self._judge_repeats(t, template, messages, key, got)
            return
        judge, client = self.spec.judge, self._client
        reply = None
        try:
            try:
                reply = await client.complete(messages, extra=template.request_params())
            except JudgeError as e:
                self.progress.judge_calls += e.attempts
                self._pending.append(Result(t.row, t.spec.name, t.turn, "error", error=str(e),
                                            meta=self._meta(t, template)))
                return
            r = self._answered(t, template, reply)
            if reply.finish_reason is not None and r.meta is not None:
                r.meta["finish_reason"] = reply.finish_reason  # the SDK's <K>_properties.finish_reason
        except asyncio.CancelledError:
            raise  # a cancel request: this call's row stays pending and the run says cancelled
        except Exception as e:  # noqa: BLE001 — anything else ends as an error on the row, with its reason
            self._pending.append(self._failed(t, template, e, reply.text if reply else None))
            return
        self._pending.append(r)
        if r.status in ("ok", "skipped"):  # only replies we could use are cached, so a retry asks again
            self._pending_cache.append(self._cache_entry(key, judge.model, reply))

    def _answered(self, t: _Task, template: Template, reply) -> Result:
        """A judge's reply counted in the run's progress (calls, tokens) and parsed into a result."""
        p = self.progress
        p.judge_calls += reply.attempts
        p.prompt_tokens += reply.prompt_tokens or 0
        p.completion_tokens += reply.completion_tokens or 0
        self._bill(t, reply)
        r = self._verdict(t, template, reply.text, reply.prompt_tokens, reply.completion_tokens, reply.latency_ms)
        if reply.cached_tokens is not None and r.meta is not None:
            r.meta["cached_tokens"] = reply.cached_tokens  # billed at the cached price (run.budget)
        return r

    @staticmethod
    def _cache_entry(key: str, model: str, reply) -> dict[str, Any]:
        """A usable reply as the judge cache keeps it (asked again only when it was unusable)."""
        return dict(key=key, model=model, reply=reply.text, prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens, latency_ms=reply.latency_ms)

    def _from_hit(self, t: _Task, template: Template, hit) -> Result:
        return self._verdict(t, template, hit.reply, hit.prompt_tokens, hit.completion_tokens, hit.latency_ms,
                             cached=True)

    def _meta(self, t: _Task, template: Template) -> dict[str, Any]:
        judge = self.spec.judge
        return {"signature": t.spec.signature(), "prompt_sha": template.sha, "template": template.source,
                "model": judge.model, "provider": judge.provider, "temperature": judge.temperature}

    def _verdict(self, t: _Task, template: Template, text: str, pt: int | None, ct: int | None,
                 latency: float | None, cached: bool = False) -> Result:
        """Parse a reply into a result; an unusable reply is an error on the row, raw reply kept."""
        meta = self._meta(t, template)
        try:
            verdict = t.spec.parse_reply(text)
        except SkippedReply as e:  # a reply we can use: the judge says the metric does not apply to this row
            return Result(t.row, t.spec.name, t.turn, "skipped", error=str(e), raw=text, prompt_tokens=pt,
                          completion_tokens=ct, latency_ms=latency, cached=cached, meta=meta)
        except ReplyError as e:
            return Result(t.row, t.spec.name, t.turn, "error", error=f"unusable judge reply: {e}", raw=text,
                          prompt_tokens=pt, completion_tokens=ct, latency_ms=latency, cached=cached, meta=meta)
        value = verdict.outputs.get(t.spec.primary)
        return Result(t.row, t.spec.name, t.turn, "ok", value=None if value is None else float(value),
                      outputs={**verdict.outputs, **(t.facts or {})}, reason=verdict.reason, raw=text, prompt_tokens=pt,
                      completion_tokens=ct, latency_ms=latency, cached=cached, meta=meta)
