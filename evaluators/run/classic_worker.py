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

Started early (:func:`start_early`, the CLI's classic runs): the worker is forked as soon as the
command line is read, reads the data file itself and computes rows ahead while the runner's
process loads, checks and stores the same file (both cores instead of one during that serial
start). Its rows are only kept in its memory, keyed by row number and metric; a batch the runner
later hands it takes a kept outcome only when the row's values are equal, key by key and type by
type, to the ones it was computed from (the metrics are pure functions of them), and computes
anything else. Nothing is stored by the worker; a run refused at the check ends it unused.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import threading
from collections import deque
from typing import Any, Callable, Iterable, Mapping, Sequence

ENV = "EVALDASH_CLASSIC_WORKERS"
MIN_TASKS = 2_000  # below this, forking costs more than it saves
DEPTH = 3  # batches handed to the worker and not yet back: enough to keep it busy, memory stays flat
PARENT_CHECK = 1.0  # seconds between two looks at whether the runner's process is still there
AHEAD_ROWS = 3_000  # rows an early worker computes before the runner asks: bounded, memory stays flat

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


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two rows' values are equal key by key with the same types (1 == 1.0 == True is not enough)."""
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if type(v) is not type(w) or (v != w if isinstance(v, (str, type(None))) else repr(v) != repr(w)):
            return False
    return True


def _compute_ahead(computes, tasks, ahead, parent: int) -> dict:
    """An early worker's rows computed before the first batch arrives: (row, metric) -> (values, outcome)."""
    import gc

    stock: dict = {}
    try:
        rows = ahead()
        gc.freeze()  # as the CLI does after loading: the file's index and the metrics' tables stay out of
        gc.enable()  # the collector's walks (an early fork inherits the start-up's held collector)
        gc.set_threshold(20_000, 50, 50)
        for row, values in rows:
            if not tasks.empty() or len(stock) >= AHEAD_ROWS * len(computes) or os.getppid() != parent:
                break
            for name, outcome in zip(computes, compute_all([(name, values) for name in computes], computes)):
                stock[(row, name)] = (values, outcome)
    except Exception:  # noqa: BLE001 — a file the worker cannot read is the runner's to report: serve as usual
        pass
    return stock


def _next(tasks, parent: int):
    """The next batch, or None at the end: the runner's None, or the runner gone (killed: nothing can
    end us then; the queue's writing end is ours too, so no end of file ever comes)."""
    while True:
        try:
            return tasks.get(timeout=PARENT_CHECK)
        except queue.Empty:
            if os.getppid() != parent:
                return None


def _serve(computes, tasks, conn, parent_end, ahead=None, parent=None) -> None:
    """The worker: batches in, outcomes out, until the None that ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
    parent_end.close()
    parent = parent or os.getppid()
    stock = _compute_ahead(computes, tasks, ahead, parent) if ahead is not None else {}
    while True:
        msg = _next(tasks, parent)
        if msg is None:
            break
        rows, batch = msg
        if not stock:
            conn.send((compute_all(batch, computes), 0))
            continue
        out: list = []
        kept = 0
        for row, (name, values) in zip(rows, batch):
            hit = stock.pop((row, name), None)
            if hit is not None and _same(hit[0], values):
                out.append(hit[1])
                kept += 1
            else:
                out.extend(compute_all([(name, values)], computes))
        conn.send((out, kept))
    conn.close()


class ClassicWorker:
    """One forked process computing batches of classic tasks, first in, first out.

    Args:
        computes: metric name -> its compute function (the child inherits them by the fork).
    """

    def __init__(self, computes: Mapping[str, Callable[[Mapping[str, Any]], dict]],
                 ahead: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]] | None = None,
                 signatures: Mapping[str, str] | None = None):
        """``ahead`` (an early worker): called in the child, the rows (number, values) to compute before
        the first batch arrives. ``signatures``: the metrics' signatures those rows are computed with."""
        ctx = mp.get_context("fork")
        self._tasks = ctx.Queue()  # a feeder thread sends: the parent never blocks on a full pipe
        self._recv, send = ctx.Pipe(duplex=False)
        args = (dict(computes), self._tasks, send, self._recv, ahead, os.getpid())
        self._proc = ctx.Process(target=_serve, args=args,
                                 name="evaldash-classic", daemon=True)
        self._proc.start()
        send.close()  # the child holds the only writing end: its death is an end of file here
        self._sent: deque = deque()  # batches handed over, in order, not yet back
        self.broken = False
        self.batches_done = 0  # batches the worker computed (what it sent back)
        self.signatures = dict(signatures or {})
        self.ahead = ahead is not None  # its last batch came back whole from the rows it computed ahead
        self.kept = 0  # outcomes it answered from the rows it computed ahead

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

    def submit(self, key: Any, items: list[Item], rows: Sequence[int] | None = None) -> None:
        """Hand a batch over; ``key`` comes back with its outcomes. ``rows``: each item's row number
        (what an early worker's rows computed ahead are found by)."""
        self._sent.append((key, items))
        self._tasks.put((list(rows) if rows is not None else [-1] * len(items), items))

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
                outcomes, kept = self._recv.recv()
            except (EOFError, OSError):  # died mid-batch or its pipe broke
                self.broken = True
                break
            key, items = self._sent.popleft()
            if len(outcomes) != len(items):
                self.broken = True
                self._sent.appendleft((key, items))
                break
            self.batches_done += 1
            self.kept += kept
            self.ahead = kept == len(items)
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


def start_early(data: Any, mapping: Mapping[str, str] | None, specs: Sequence[Any]) -> ClassicWorker | None:
    """A worker forked now, before the file is loaded and checked, computing its rows ahead (see above);
    None when the run would not use one (the setting, the machine, a file too small or not JSON lines).

    Args:
        data: the data file's path as given on the command line.
        mapping: the run's column mapping (the worker reads the file as the run does).
        specs: the run's metric specs, all classic (with their options).
    """
    from pathlib import Path

    if not isinstance(data, (str, Path)) or Path(data).suffix.lower() != ".jsonl" or not specs:
        return None
    try:
        path = Path(data)
        if not path.is_file():
            return None
        with open(path, "rb") as f:  # rows ~ lines: a few ms for a file of 10,000 rows
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None
    if not wanted(lines * len(specs)):
        return None
    mapping = dict(mapping or {})

    def ahead():
        from evaluators.data.loading import load_dataset_streaming

        ds = load_dataset_streaming(path, mapping)
        if ds.shape != "single":
            return iter(())
        return ((i, ds.canonical(i)) for i in range(len(ds)))

    return ClassicWorker({s.name: s.compute for s in specs}, ahead=ahead,
                         signatures={s.name: s.signature() for s in specs})
