"""Building a stored run's columns (what :mod:`evaluators.read.view` serves): per metric numpy columns of
status, each numeric output and a note flag, read with one query per metric (outputs extracted by SQLite's
``json_extract``: no reasons, no raw replies, no ORM objects), kept in a file beside the store once the run
has ended; the dataset's records read lazily; and the search index over each row's query and response."""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from evaluators.data.dataset import Dataset, conversation_turns
from evaluators.core.kinds import NOTE, Kind, MetricCell
from evaluators.core.kinds.columns import ERROR, OK, PENDING, SKIPPED, MetricColumns, columns_of, number
from evaluators.core.kinds.label import LabelKind
from evaluators.core.registry import MetricSpec
from evaluators.read.results import combine
from evaluators.data.sdk_compat import conversation_messages
from evaluators.store.schema import Result
from evaluators.store.store import Store


def _simple(spec: MetricSpec) -> bool:
    """Whether the metric's kind aggregates from columns alone (else its cells are kept for its summary)."""
    return spec.kind_impl.columnar


class LazyRecords(Sequence):
    """A stored dataset's records, read from the store by index when asked for (a bounded cache)."""

    def __init__(self, store: Store, dataset_id: str, n: int, keep: int = 2048):
        self.store, self.dataset_id, self.n, self.keep = store, dataset_id, n, keep
        self._cache: OrderedDict[int, dict] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        i = int(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        with self._lock:
            if i in self._cache:
                self._cache.move_to_end(i)
                return self._cache[i]
        return self.prefetch([i])[i]

    def prefetch(self, idx: Iterable[int]) -> dict[int, dict]:
        """Read these records in one go (kept for the next reads); returns them."""
        idx = list(idx)
        with self._lock:
            have = {i: self._cache[i] for i in idx if i in self._cache}
        missing = [i for i in idx if i not in have]
        got = self.store.dataset_records(self.dataset_id, missing) if missing else {}
        with self._lock:
            for i, rec in got.items():
                self._cache[i] = rec
            while len(self._cache) > self.keep:
                self._cache.popitem(last=False)
        return {**have, **got}

    def __iter__(self):
        for start in range(0, self.n, 1000):
            chunk = self.store.dataset_records(self.dataset_id, range(start, min(self.n, start + 1000)))
            for i in range(start, min(self.n, start + 1000)):
                yield chunk[i]


def lazy_dataset(store: Store, dataset_id: str) -> Dataset:
    """A stored dataset whose records are read only when a row is asked for."""
    info = store.dataset_info(dataset_id)
    return Dataset(name=info["name"], records=LazyRecords(store, dataset_id, info["n_rows"]),  # type: ignore[arg-type]
                   columns=info["columns"], mapping=info["mapping"], shape=info["shape"], source=info["source"],
                   detected=info["detected"], row_numbers=info["row_numbers"])


def _group(results: list[Result]) -> dict[int, list[Result]]:
    out: dict[int, list[Result]] = defaultdict(list)
    for r in results:
        out[r.row_idx].append(r)
    return out


def _floats(col: list) -> np.ndarray:
    try:
        return np.array(col, dtype=float)
    except (TypeError, ValueError):
        return np.array([number(v) for v in col], dtype=float)


def _complex_metric(store: Store, run_id: str, spec: MetricSpec, n: int) -> MetricColumns:
    cells: list[MetricCell | None] = [None] * n
    for i, rs in _group(store.results_of_metric(run_id, spec.name)).items():
        if 0 <= i < n:
            cells[i] = combine(spec, rs)
    return columns_of(spec, cells, keep=True)


def build_metrics(store: Store, run_id: str, specs: list[MetricSpec], n: int) -> dict[str, MetricColumns]:
    """Every metric's columns, in one pass over the run's results (see the module docstring)."""
    out = {s.name: _complex_metric(store, run_id, s, n) for s in specs if not _simple(s)}
    simple = [s for s in specs if _simple(s)]
    if not simple:
        return out
    # the primary output is the stored value; other outputs (and a note) are read from the JSON
    keys = list(dict.fromkeys(k for s in simple for k in s.outputs[1:]))
    code_of = {s.name: j for j, s in enumerate(simple)}
    parts: list[tuple] = []
    for rows in store.run_outcomes(run_id, [s.name for s in simple], keys + [NOTE]):
        m = len(rows)
        parts.append((np.fromiter((r[0] for r in rows), np.int64, m),
                      np.fromiter((code_of[r[1]] for r in rows), np.int16, m),
                      np.fromiter((OK if r[3] == "ok" else ERROR if r[3] == "error" else SKIPPED for r in rows), np.int8, m),
                      [_floats([r[4 + j] for r in rows]) for j in range(len(keys) + 1)],
                      np.fromiter((bool(r[5 + len(keys)]) for r in rows), bool, m)))
    if parts:
        idx_all = np.concatenate([p[0] for p in parts])
        code_all = np.concatenate([p[1] for p in parts])
        st_all = np.concatenate([p[2] for p in parts])
        vals_all = [np.concatenate([p[3][j] for p in parts]) for j in range(len(keys) + 1)]
        note_all = np.concatenate([p[4] for p in parts])
    for j, spec in enumerate(simple):
        status = np.full(n, PENDING, dtype=np.int8)
        note = np.zeros(n, dtype=bool)
        outputs = {k: np.full(n, np.nan) for k in spec.outputs}
        out[spec.name] = MetricColumns(status, outputs, note)
        if not parts:
            continue
        sel = code_all == j
        idx = idx_all[sel]
        inside = (idx >= 0) & (idx < n)
        counts = np.bincount(idx[inside], minlength=n)
        one = inside & (counts[np.clip(idx, 0, max(n - 1, 0))] == 1)  # the row's only result for this metric
        code = st_all[sel]
        status[idx[one]] = code[one]
        ok_one = one & (code == OK)
        at_ok = idx[ok_one]
        label = type(spec.kind_impl) is LabelKind
        for k in spec.outputs:
            vals = vals_all[0 if k == spec.primary else 1 + keys.index(k)][sel]
            if label:  # a label is true when its output is (any(bool(...)) over one turn)
                vals = np.where(np.isnan(vals), 0.0, (vals != 0).astype(float))
            outputs[k][at_ok] = vals[ok_one]
        if type(spec.kind_impl) is Kind:  # only the score kind keeps a metric's note (see Kind.combine_ok)
            note[at_ok] = note_all[sel][ok_one]
        multi = np.nonzero(counts > 1)[0]
        if len(multi):  # conversations: the kind combines each row's turns itself
            for i, rs in _group(store.results_of_rows(run_id, multi.tolist(), spec.name)).items():
                c = combine(spec, rs)
                status[i] = OK if c.status == "ok" else ERROR if c.status == "error" else SKIPPED
                if c.status == "ok":
                    for k in spec.outputs:
                        v = c.outputs.get(k)
                        outputs[k][i] = (1.0 if v else 0.0) if label else number(v)
                    note[i] = bool(c.note)
    return out


class SearchText:
    """Each row's query and response, lower-cased (``str.lower``), as one UTF-8 buffer with row offsets.

    Built once per dataset (datasets are stored by content, so it never goes stale) and kept in a file
    beside the SQLite store (``views/ds-<id>.search``, memory-mapped), else in memory. A search is
    ``bytes.find`` over the buffer, jumping to the next row after each hit.
    """

    SEP = b"\x00"  # between query and response and between rows: a needle never spans two fields

    def __init__(self, store: Store, dataset_id: str, dataset: Dataset, folder: Path | None):
        self.store, self.dataset_id, self.dataset, self.folder = store, dataset_id, dataset, folder
        self._buf = None
        self._offsets: np.ndarray | None = None
        self._lock = threading.Lock()

    def _texts(self):
        ds = self.dataset

        def text(v: Any) -> str:
            return v.lower() if isinstance(v, str) else ""

        if ds.shape == "conversation":
            for _, m in self.store.dataset_texts(self.dataset_id, [ds.mapping.get("messages")]):
                if isinstance(m, str):
                    m = json.loads(m)
                turns = conversation_turns(conversation_messages(m))
                q, r = (turns[-1].query, turns[-1].response) if turns else ("", "")
                yield f"[{len(turns)} turns] {text(q)}", text(r)
        else:
            for _, q, r in self.store.dataset_texts(self.dataset_id, [ds.mapping.get("query"), ds.mapping.get("response")]):
                yield text(q), text(r)

    def _write(self, out) -> np.ndarray:
        offsets, pos = [0], 0
        for q, r in self._texts():
            piece = q.encode() + self.SEP + r.encode() + self.SEP
            out.write(piece)
            pos += len(piece)
            offsets.append(pos)
        return np.array(offsets, dtype=np.int64)

    def ensure(self) -> None:
        """Build (or open) the buffer, once."""
        import io

        with self._lock:
            if self._offsets is not None:
                return
            if self.folder is None:
                out = io.BytesIO()
                self._offsets = self._write(out)
                self._buf = out.getvalue()
                return
            path = self.folder / f"ds-{self.dataset_id}.search"
            opath = self.folder / f"ds-{self.dataset_id}.offsets.npy"
            if not (path.exists() and opath.exists()):
                self.folder.mkdir(parents=True, exist_ok=True)
                mine = f".tmp{os.getpid()}.{threading.get_ident()}"  # two builders never share a file
                tmp, otmp = path.with_suffix(mine), opath.with_name(f"{opath.stem}{mine}.npy")
                with open(tmp, "wb") as f:
                    offsets = self._write(f)
                np.save(otmp, offsets)
                os.replace(otmp, opath)
                os.replace(tmp, path)  # whole or absent: a reader never sees half a file
            offsets = np.load(opath)
            with open(path, "rb") as f:
                self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if offsets[-1] else b""
            self._offsets = offsets

    def contains(self, needle: str) -> np.ndarray:
        """Rows whose query or response contains ``needle`` (case-insensitive, as ``str.lower``)."""
        self.ensure()
        offsets, buf = self._offsets, self._buf
        n = len(offsets) - 1
        hit = np.zeros(n, dtype=bool)
        pat = needle.lower().encode()
        if not pat:
            hit[:] = True
            return hit
        pos = buf.find(pat, 0)
        while pos != -1:
            row = int(np.searchsorted(offsets, pos, side="right")) - 1
            hit[row] = True
            pos = buf.find(pat, int(offsets[row + 1]))
        if isinstance(buf, mmap.mmap):
            # A search reads the whole file: without this its pages stay mapped into the server (2.3 GB of a
            # 1,000,000-row dataset's text counted in its RSS). The kernel keeps them in its page cache, so the
            # next search finds them there.
            buf.madvise(mmap.MADV_DONTNEED)
        return hit


@dataclass
class RunColumns:
    """A run's state as columns, shared by every threshold setting of it."""

    n: int
    metrics: dict[str, MetricColumns]
    search: SearchText
    rows: OrderedDict = field(default_factory=OrderedDict)  # row -> {metric: cell}, bounded
    summaries: dict = field(default_factory=dict)
    all_cells: dict | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def views_dir(store: Store) -> Path | None:
    """Where the dashboard keeps the columns of a store's runs: ``views/`` beside a SQLite file; for a server
    database (PostgreSQL) a folder of this machine's ``$EVAL_HOME/views/`` named after the database (host, port,
    name: no user or password). Either way a cache only: each file is named by its run's state, so any
    dashboard server rebuilds what it lacks from the store."""
    url = store.engine.url
    db = url.database
    if store.engine.dialect.name != "sqlite":
        if not db:
            return None
        home = Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash")
        where = f"{url.get_backend_name()}://{url.host or ''}:{url.port or ''}/{db}"
        return home / "views" / hashlib.sha256(where.encode()).hexdigest()[:16]
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db).expanduser().resolve().parent / "views"


def forget_views(store: Store, run_id: str) -> int:
    """Remove a deleted run's files from ``views/`` (its columns, its kept cost and rates); returns how many."""
    folder = views_dir(store)
    if folder is None or not folder.is_dir():
        return 0
    gone = 0
    for path in [*folder.glob(f"{run_id}-*.npz"), *folder.glob(f"cost-{run_id}-*.json"),
                 *folder.glob(f"rates-{run_id}-*.json")]:
        path.unlink(missing_ok=True)
        gone += 1
    return gone


def state_key(store: Store, run: dict, specs: list[MetricSpec]) -> str:
    """Names a state of a run: its counters, end, stored results (count) and metrics with their parameters."""
    parts = [run["id"], run["status"], run["tasks_done"], run["tasks_errored"], str(run["finished_at"]),
             store.result_count(run["id"]), [(s.name, s.kind, list(s.outputs), repr(s.params)) for s in specs]]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:20]


def _save(path: Path, metrics: dict[str, MetricColumns], specs: list[MetricSpec]) -> None:
    arrays = {}
    for j, s in enumerate(specs):
        m = metrics[s.name]
        arrays[f"m{j}.status"], arrays[f"m{j}.note"] = m.status, m.note
        for k, key in enumerate(s.outputs):
            arrays[f"m{j}.o{k}"] = m.outputs[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.{threading.get_ident()}.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)  # whole or absent
    for old in path.parent.glob(f"{path.name.split('-')[0]}-*.npz"):
        if old != path and ".tmp" not in old.name:  # another builder's file being written is not a state
            old.unlink(missing_ok=True)  # an earlier state of the same run


def _load(path: Path, specs: list[MetricSpec]) -> dict[str, MetricColumns] | None:
    try:
        with np.load(path) as z:
            return {s.name: MetricColumns(z[f"m{j}.status"], {key: z[f"m{j}.o{k}"] for k, key in enumerate(s.outputs)},
                                          z[f"m{j}.note"]) for j, s in enumerate(specs)}
    except (OSError, KeyError, ValueError):
        return None  # unreadable: rebuilt


def build_columns(store: Store, run: dict, specs: list[MetricSpec], dataset: Dataset, dataset_id: str) -> RunColumns:
    """A run's columns: read from ``views/`` when this state of the run was built before, else built
    (one pass over its results) and, once the run has ended, written there for the next open."""
    n = len(dataset)
    folder = views_dir(store)
    metrics = None
    ended = run["status"] not in ("queued", "running")
    path = None
    if folder is not None and ended and all(_simple(s) for s in specs):
        path = folder / f"{run['id']}-{state_key(store, run, specs)}.npz"
        if path.exists():
            metrics = _load(path, specs)
    if metrics is None:
        metrics = build_metrics(store, run["id"], specs, n)
        if path is not None:
            try:
                _save(path, metrics, specs)
            except OSError:
                pass  # a read-only folder: the columns are rebuilt next time
    return RunColumns(n, metrics, SearchText(store, dataset_id, dataset, folder))


def kept_json(store, run_id: str, kind: str, compute):
    """``compute()`` (a run's figures, JSON-able) kept for an ended run in ``views/`` beside the store: one small
    file per ``kind``, state of the run and of its settings, written whole or not at all, earlier states removed;
    computed afresh for a run going on or a store with no such folder. One rule for every figure a freshly
    started dashboard would otherwise work out again (``read.cost.kept_run_cost``, ``read.view.kept_rates``)."""
    from evaluators.run.spec import RunSpec

    run, folder = store.get_run(run_id), views_dir(store)
    if folder is None or run["status"] in ("queued", "running"):
        return compute()
    settings = hashlib.sha256(json.dumps(run["spec"], sort_keys=True, default=str).encode()).hexdigest()[:12]
    path = folder / f"{kind}-{run_id}-{state_key(store, run, RunSpec.from_dict(run['spec']).specs())}-{settings}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    got = compute()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(got), encoding="utf-8")
    os.replace(tmp, path)  # whole or absent
    for old in folder.glob(f"{kind}-{run_id}-*.json"):
        if old != path:
            old.unlink(missing_ok=True)  # an earlier state of the run
    return got
