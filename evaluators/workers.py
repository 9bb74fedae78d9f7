"""Running a stored run in its own process, so it outlives the caller (a dashboard tab, a shell).

The worker reports only through the store. A judge key typed in the dashboard
reaches the worker through that process's environment alone: never a file, the
database, a command line or a log.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .store import Store

KEY_ENV = "EVAL_JUDGE_API_KEY"  # read by `python -m evaluators worker`
ROOT = Path(__file__).resolve().parent.parent


def spawn_worker(store: Store, run_id: str, api_key: str | None = None, rows: list[int] | None = None) -> int:
    """Start ``python -m evaluators worker RUN_ID`` detached; returns its pid.

    Args:
        store: the store the worker uses (its URL goes through the worker's environment).
        run_id: the run to execute or resume.
        api_key: judge key for this worker only.
        rows: restrict to these rows (retrying failed rows).
    """
    env = dict(os.environ)
    env.pop(KEY_ENV, None)
    if api_key:
        env[KEY_ENV] = api_key
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["EVAL_DATABASE_URL"] = store.url  # not on the command line: a database password would show in ps
    cmd = [sys.executable, "-m", "evaluators", "worker", run_id]
    if rows:
        cmd += ["--rows", ",".join(map(str, rows))]
    store.update_run(run_id, status="queued", error=None)  # before the worker can claim it
    log_dir = Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"run-{run_id}.log", "ab") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=ROOT)
    return proc.pid


def retry_failed(store: Store, run_id: str, api_key: str | None = None) -> int:
    """Forget the run's errored results and judge only those again; returns how many were cleared."""
    n = store.clear_errors(run_id)
    if n:
        spawn_worker(store, run_id, api_key)
    return n
