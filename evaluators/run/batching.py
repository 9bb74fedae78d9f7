"""A run's judge calls through the provider's Batch API (``--batch``): the runner's side (a mixin of
:class:`evaluators.run.runner.Runner`).

The tasks the judge cache does not answer are gathered as the run walks its rows; then each request not
already in one of the run's stored batches is written (custom id ``row.metric.turn.repeat``), split at the
provider's limits, uploaded and submitted, each batch recorded in the store before and after the provider
makes it. With a jury, each judgment goes in a batch of its own juror's Batch API (the juror of a stored batch is
read from its custom ids' judgment number). The run then polls its open batches (a resumed run polls those an earlier sitting submitted, and
never submits their requests again), maps each answer back to its task, and parses it as a direct call's.
What a batch left unanswered (failed, expired, an error-file line, an unreadable output line) is asked again
in a new batch, or as direct calls when the run allows it, up to ``MAX_ROUNDS``; after that the task is an
error with the last reason. A budget admits each request at its estimate before it is put in a batch.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any

from evaluators.judge.batch import (DONE, BatchClient, Outcome, custom_id, parse_custom_id, read_results,
                                    split_requests)
from evaluators.judge.client import JudgeError, JudgeUnavailable
from evaluators.judge.config import resolve_api_key
from evaluators.store.schema import Result

MAX_ROUNDS = 3  # batches a request may go through before it is an error with its last reason
POLL_ENV = "EVAL_BATCH_POLL"  # seconds between polls of a run's open batches (default 30)


@dataclass
class _Pending:
    """A task whose judgments come (partly) from batches: its item, and the judgments settled so far."""

    item: tuple
    keys: list[tuple[int, str]]
    got: list[Any]  # per repeat: a cache hit, a Result, or None while asked
    estimates: dict[int, float] = field(default_factory=dict)


class _JurorError(Exception):
    """A Batch API call of the jury's judge ``juror`` refused (``error``, the client's JudgeError)."""

    def __init__(self, juror: int, error: JudgeError):
        super().__init__(str(error))
        self.juror, self.error = juror, error


def _when(ts: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(float(ts), dt.timezone.utc).replace(tzinfo=None) if ts else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


class BatchSection:
    """Gathers the run's uncached judge tasks (``_batch_collect``) and judges them through batches
    (``_batch_finish``)."""

    def _batch_collect(self, todo: list[tuple]) -> None:
        if not hasattr(self, "_batch_tasks"):
            self._batch_tasks: dict[str, tuple[_Pending, int]] = {}  # custom id -> (its task, repeat)
        for item in todo:
            t, template, messages, key = item[:4]
            got = list(item[4]) if len(item) > 4 else [None]
            keys = self._keys(template, messages, key) if len(item) > 4 else [(0, key)]
            p = _Pending(item, keys, got)
            for r, g in enumerate(got):
                if g is None:
                    self._batch_tasks[custom_id(t.row, t.spec.name, t.turn, r)] = (p, r)

    async def _batch_finish(self, queue: asyncio.Queue) -> None:
        """Submit, poll and collect until every gathered request is answered or has failed for good."""
        tasks = getattr(self, "_batch_tasks", {})
        if not tasks or self._cancelled:
            return
        self._batch_clients: dict[int, BatchClient] = {}
        poll = float(os.environ.get(POLL_ENV) or 30)
        try:
            await self._batch_rounds(tasks, queue, poll)
        except _JurorError as e:  # the Batch API refused (a key, a URL, a model): one line, the run fails with it
            client = self._batch_clients[e.juror]
            raise JudgeUnavailable(f"the judge's Batch API at {client.base} (model '{client.config.model}'): "
                                   f"{e.error}", e.error.attempts) from None
        finally:
            for client in self._batch_clients.values():
                await asyncio.to_thread(client.close)

    def _batch_juror(self, cid: str) -> int:
        """Which judge of the jury a request is for (0: the run's judge): its judgment number // repeats."""
        return parse_custom_id(cid)[3] // max(1, self.spec.repeat)

    def _batch_client(self, juror: int) -> BatchClient:
        if juror not in self._batch_clients:
            if juror == 0:
                self._batch_clients[0] = BatchClient(self.spec.judge, self.api_key)
            else:
                cfg = self.spec.jury[juror - 1].resolved()
                self._batch_clients[juror] = BatchClient(cfg, resolve_api_key(cfg))
        return self._batch_clients[juror]

    async def _batch_call(self, juror: int, fn, *args):
        """A Batch API call of one juror's client, in a thread; its refusal says which juror."""
        try:
            return await asyncio.to_thread(fn, *args)
        except JudgeError as e:
            raise _JurorError(juror, e) from None

    async def _batch_rounds(self, tasks: dict, queue: asyncio.Queue, poll: float) -> None:
        """Rounds of submitting what no open batch holds, polling, collecting; a request past its rounds fails."""
        reasons: dict[str, str] = {}
        while tasks and not self._cancelled:
            stored = await asyncio.to_thread(self.store.run_batches, self.run_id)
            collected = [set(b["custom_ids"]) for b in stored if b["status"] == "collected"]
            rounds = {c: sum(c in ids for ids in collected) for c in tasks}
            open_ = [b for b in stored if b["status"] != "collected"]
            waiting = {c for b in open_ for c in b["custom_ids"]}
            spent = [c for c in tasks if c not in waiting and rounds[c] >= MAX_ROUNDS]
            for c in spent:
                if c in tasks:  # (a repeated task's other judgments go with the first that fails for good)
                    self._batch_give_up(c, reasons.get(c) or f"no answer after {MAX_ROUNDS} batches")
            new = [c for c in tasks if c not in waiting and rounds[c] < MAX_ROUNDS]
            if new and open_ == [] and any(rounds[c] for c in new) and self.spec.batch_retry == "direct":
                await self._batch_direct(new, queue)
                return
            if new:
                open_ += await self._batch_submit(new, 1 + max(rounds[c] for c in new))
            if not open_ and not new:
                break
            await self._batch_poll(open_, reasons, poll)

    async def _batch_submit(self, cids: list[str], round_: int) -> list[dict]:
        """The requests in batches at the provider's limits (a juror's in its own), each recorded before and after
        it is made."""
        admitted: dict[int, list[str]] = {}
        lines: dict[int, list[bytes]] = {}
        for c in cids:
            p, r = self._batch_tasks[c]
            est = self._budget_admit(p.item[2])
            if est is None:
                del self._batch_tasks[c]  # past the budget: left pending, the run ends "stopped"
                continue
            p.estimates[r] = est
            j = self._batch_juror(c)
            admitted.setdefault(j, []).append(c)
            lines.setdefault(j, []).append(self._batch_client(j).request_line(c, p.item[2]))
        made = []
        for j, ids_j in admitted.items():
            client, start = self._batch_client(j), 0
            for part in split_requests(lines[j]):
                ids = ids_j[start:start + len(part)]
                start += len(part)
                name = f"evaldash-{self.run_id}-{round_}{f'-j{j}' if j else ''}.jsonl"
                file_id = await self._batch_call(j, client.upload, part, name)
                bid = await asyncio.to_thread(self.store.add_batch, self.run_id, ids, round_, file_id)
                batch = await self._batch_call(j, client.create, file_id, self.run_id)
                await asyncio.to_thread(self.store.update_batch, bid, batch_id=batch["id"],
                                        status=batch.get("status"), expires_at=_when(batch.get("expires_at")))
                made.append({"id": bid, "batch_id": batch["id"], "input_file_id": file_id, "custom_ids": ids})
        return made

    async def _batch_poll(self, open_: list[dict], reasons: dict[str, str], poll: float) -> None:
        """Poll the open batches until one is done; collect every done one."""
        while not self._cancelled:
            done = []
            for b in open_:
                j = self._batch_juror(b["custom_ids"][0]) if b["custom_ids"] else 0
                client = self._batch_client(j)
                if b["batch_id"] is None:  # killed between uploading and recording the batch: made, or not?
                    found = await self._batch_call(j, client.find, b["input_file_id"])
                    if found is None:
                        await asyncio.to_thread(self.store.update_batch, b["id"], status="collected")
                        done.append(None)
                        continue
                    b["batch_id"] = found["id"]
                info = await self._batch_call(j, client.get, b["batch_id"])
                counts = info.get("request_counts") or {}
                await asyncio.to_thread(self.store.update_batch, b["id"], batch_id=b["batch_id"],
                                        status=info.get("status"), completed=counts.get("completed") or 0,
                                        failed=counts.get("failed") or 0, expires_at=_when(info.get("expires_at")))
                if info.get("status") in DONE:
                    await self._batch_collect_done(j, b, info, reasons)
                    done.append(b)
            if done:
                return
            await asyncio.sleep(poll)

    async def _batch_collect_done(self, j: int, b: dict, info: dict, reasons: dict[str, str]) -> None:
        client = self._batch_client(j)
        output = await self._batch_call(j, client.content, info.get("output_file_id"))
        errors = await self._batch_call(j, client.content, info.get("error_file_id"))
        found, bad = read_results(output, errors)
        why = f"batch {b['batch_id']} ended {info.get('status')}"
        failure = ((info.get("errors") or {}).get("data") or [{}])[0].get("message")
        for c in b["custom_ids"]:
            outcome = found.get(c) or Outcome(reason=f"{why}{f' ({failure})' if failure else ''} without answering it"
                                              + (f"; {bad[0]}" if bad else ""))
            if c in self._batch_tasks:
                self._batch_settle(c, outcome, reasons)
        self._flush_results()
        await asyncio.to_thread(self.store.update_batch, b["id"], status="collected")

    def _batch_settle(self, c: str, outcome: Outcome, reasons: dict[str, str]) -> None:
        """One request's answer: a judgment of its task (the task's result once every judgment is in)."""
        p, r = self._batch_tasks[c]
        t, template = p.item[0], p.item[1]
        if outcome.reply is None:
            reasons[c] = outcome.reason
            self._budget_settle(t, p.estimates.pop(r, 0.0))
            return  # asked again in the next round
        del self._batch_tasks[c]
        res = self._answered(t, template, outcome.reply)
        self._budget_settle(t, p.estimates.pop(r, 0.0))
        if res.meta is not None:
            res.meta["batch"] = True
        if res.status == "ok":
            self._pending_cache.append(self._cache_entry(p.keys[r][1], self.spec.jurors()[p.keys[r][0]].model,
                                                         outcome.reply))
        p.got[r] = res
        self._batch_task_done(p)

    def _batch_task_done(self, p: _Pending) -> None:
        if any(g is None for g in p.got):
            return
        t, template = p.item[0], p.item[1]
        if len(p.item) == 4:
            self._pending.append(p.got[0])
            return
        results = [g if isinstance(g, Result) else self._from_hit(t, template, g) for g in p.got]
        self.progress.cache_hits += sum(not isinstance(g, Result) for g in p.got)
        self._pending.append(self._settle(t, template, lambda: self._combined(t, template, p.keys, results)))

    def _batch_give_up(self, c: str, reason: str) -> None:
        """A request no batch answered in ``MAX_ROUNDS``: its task is an error with the last reason."""
        p, _ = self._batch_tasks.pop(c)
        for other in [k for k, (q, _) in self._batch_tasks.items() if q is p]:
            del self._batch_tasks[other]  # (a repeated task's other judgments: the task fails whole)
        t, template = p.item[0], p.item[1]
        self._pending.append(Result(t.row, t.spec.name, t.turn, "error", error=f"batch: {reason}"[:2000],
                                    meta=self._meta(t, template)))

    async def _batch_direct(self, cids: list[str], queue: asyncio.Queue) -> None:
        """What batches left unanswered, asked as direct calls (the run allowed it: ``--batch-direct-retry``)."""
        items = {id(self._batch_tasks[c][0]): self._batch_tasks[c][0].item for c in cids}
        self._batch_tasks.clear()
        await self._enqueue(list(items.values()), queue)
