"""Classic metrics computed in one forked worker process alongside the runner: both cores.

The runner's process walks the dataset, computes some batches itself and writes every result;
a worker forked from it (after the metrics' data, WordNet and the memos, were loaded, so the
child shares them) computes the other batches and sends back plain values. Same code on the
same data in both processes, so every value is the one an in-process run gives.

``EVALDASH_CLASSIC_WORKERS``: ``0`` keeps everything in-process; ``1`` (or more: one worker is
used) forks one whatever the run's size; unset: one when the machine has two cores or more,
the run has at least :data:`MIN_TASKS` classic tasks, and the process runs no other thread
(forking a process whose other threads may hold locks is not safe).

A worker that dies, or whose pipe breaks, costs nothing but time: the runner computes the
batches it held itself (:meth:`ClassicWorker.take_back`).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from collections import deque
from typing import Any, Callable, Mapping, Sequence

ENV = "EVALDASH_CLASSIC_WORKERS"
MIN_TASKS = 2_000  # below this, forking costs more than it saves
DEPTH = 3  # batches handed to the worker and not yet back: enough to keep it busy, memory stays flat

# (metric name, the row's values) in; (True, outputs) or (False, "Error: message") out
Item = tuple[str, Mapping[str, Any]]
Outcome = tuple[bool, Any]


def setting() -> int | None:
    """The ``EVALDASH_CLASSIC_WORKERS`` setting: None (unset: decide by the run), 0 off, else on."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a whole number (0 turns the classic worker off), not {raw!r}") from None
    return max(n, 0)


def wanted(classic_tasks: int) -> bool:
    """Whether a run with this many classic tasks computes them with a worker process."""
    n = setting()
    if n is not None:
        return n > 0
    return ((os.cpu_count() or 1) >= 2 and classic_tasks >= MIN_TASKS and threading.active_count() == 1
            and "fork" in mp.get_all_start_methods())


def compute_all(items: Sequence[Item], computes: Mapping[str, Callable[[Mapping[str, Any]], dict]]) -> list[Outcome]:
    """Each item's outputs, or its error as the runner words it (one bad row never stops the others)."""
    out: list[Outcome] = []
    for name, values in items:
        try:
            out.append((True, computes[name](values)))
        except Exception as e:  # noqa: BLE001 — the row's error, recorded on the row
            out.append((False, f"{type(e).__name__}: {e}"))
    return out


def _serve(computes, tasks, conn, parent_end) -> None:
    """The worker: batches in, outcomes out, until the None that ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
    parent_end.close()
    while True:
        batch = tasks.get()
        if batch is None:
            break
        conn.send(compute_all(batch, computes))
    conn.close()


class ClassicWorker:
    """One forked process computing batches of classic tasks, first in, first out.

    Args:
        computes: metric name -> its compute function (the child inherits them by the fork).
    """

    def __init__(self, computes: Mapping[str, Callable[[Mapping[str, Any]], dict]]):
        ctx = mp.get_context("fork")
        self._tasks = ctx.Queue()  # a feeder thread sends: the parent never blocks on a full pipe
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_serve, args=(dict(computes), self._tasks, send, self._recv),
                                 name="evaldash-classic", daemon=True)
        self._proc.start()
        send.close()  # the child holds the only writing end: its death is an end of file here
        self._sent: deque = deque()  # batches handed over, in order, not yet back
        self.broken = False
        self.batches_done = 0  # batches the worker computed (what it sent back)

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def room(self) -> bool:
        """Whether the worker takes another batch now."""
        return not self.broken and len(self._sent) < DEPTH

    @property
    def outstanding(self) -> int:
        return len(self._sent)

    def submit(self, key: Any, items: list[Item]) -> None:
        """Hand a batch over; ``key`` comes back with its outcomes."""
        self._sent.append((key, items))
        self._tasks.put(items)

    def collect(self, wait: bool = False) -> list[tuple[Any, list[Outcome]]]:
        """Batches back from the worker: what is ready, or (``wait``) at least one while any is out.

        A broken worker's batches are not lost: see :meth:`take_back`.
        """
        back = []
        while self._sent and not self.broken:
            try:
                ready = self._recv.poll(0.05 if wait and not back else 0)
                if not ready:
                    if self._proc.is_alive():
                        if wait and not back:
                            continue
                        break
                    if self._recv.poll(0):  # sent just before it ended
                        continue
                    self.broken = True
                    break
                outcomes = self._recv.recv()
            except (EOFError, OSError):  # died mid-batch or its pipe broke
                self.broken = True
                break
            key, items = self._sent.popleft()
            if len(outcomes) != len(items):
                self.broken = True
                self._sent.appendleft((key, items))
                break
            self.batches_done += 1
            back.append((key, outcomes))
        return back

    def take_back(self) -> list[tuple[Any, list[Item]]]:
        """The batches a broken worker did not return, for the caller to compute."""
        out = list(self._sent)
        self._sent.clear()
        return out

    def close(self) -> None:
        """End the worker (at once: batches still out are dropped; collect them first)."""
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(5)
        self._tasks.cancel_join_thread()  # never wait for a dead reader at exit
        self._tasks.close()
        self._recv.close()
