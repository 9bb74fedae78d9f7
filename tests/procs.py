"""What the kernel says about worker processes (Linux /proc): found by command line, read directly."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

PROC = Path("/proc")
needs_proc = pytest.mark.skipif(not (PROC / "self" / "environ").exists(), reason="needs Linux /proc")


def cmdline(pid: int) -> list[bytes]:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def environ(pid: int) -> dict[str, str]:
    raw = (PROC / str(pid) / "environ").read_bytes()
    return dict(x.decode().split("=", 1) for x in raw.split(b"\0") if b"=" in x)


def worker_pids(run_id: str) -> list[int]:
    """Live ``python -m evaluators worker RUN_ID`` processes (zombies have no command line)."""
    out = []
    for d in PROC.iterdir():
        if d.name.isdigit():
            cmd = cmdline(int(d.name))
            if b"evaluators" in cmd and b"worker" in cmd and run_id.encode() in cmd:
                out.append(int(d.name))
    return out


def wait_for_worker(run_id: str, timeout: float = 30) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = worker_pids(run_id)
        if pids:
            return pids[0]
        time.sleep(0.05)
    raise AssertionError(f"no worker process for run {run_id}")


def wait_until(predicate, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stored_results(db, where: str = "") -> int:
    """Results a run has written to the SQLite store at ``db`` (a path, or any store's SQLAlchemy URL) so far
    (0 before it exists); ``where``: an SQL condition on the results table (e.g. ``metric != 'f1_score'``)."""
    import sqlite3

    if isinstance(db, str) and db.startswith("sqlite:///"):
        db = Path(db[len("sqlite:///"):])  # a SQLite URL is its file: 0 until the file exists
    if isinstance(db, str):
        return _stored_results_at(db, where)
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        try:
            return c.execute("select count(*) from results" + (f" where {where}" if where else "")).fetchone()[0]
        except sqlite3.OperationalError:  # the tables are not made yet
            return 0


_ENGINES: dict = {}


def _stored_results_at(url: str, where: str) -> int:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import ProgrammingError

    engine = _ENGINES.get(url) or _ENGINES.setdefault(url, create_engine(url, pool_size=1))
    with engine.connect() as c:
        try:
            return c.execute(text("select count(*) from results" + (f" where {where}" if where else ""))).scalar()
        except ProgrammingError:  # the tables are not made yet
            return 0
