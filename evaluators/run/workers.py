"""Running a stored run in its own process, so it outlives the caller (a dashboard tab, a shell).

The worker reports only through the store. It gets a minimal environment, never the
caller's whole one: a dashboard's server may hold keys that a run pointed at a user's
own URL must not receive. A judge key typed in the dashboard reaches the worker through
that process's environment alone: never a file, the database, a command line or a log.

One worker per run: a worker still alive (known by the pid this host started, or by a
fresh heartbeat) is never joined by a second one, and of several resumes at the same instant one
starts a worker (Store.begin_resume, a compare-and-set); the others are told the run is being resumed.
"""
from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from evaluators.core.errors import EvalError
from evaluators.judge.config import JudgeConfig, named_judges, server_key_env
from evaluators.store.schema import HEARTBEAT_STALE, utcnow
from evaluators.store.store import Store

KEY_ENV = "EVAL_JUDGE_API_KEY"  # read by `python -m evaluators worker`
# The beat the resume that started a worker left on the run (Store.begin_resume): the worker claims the run
# with it (the run looks held to anyone else). Not a secret: it only says which resume the worker belongs to.
CLAIM_ENV = "EVAL_RESUME_CLAIM"
ROOT = Path(__file__).resolve().parents[2]  # the project folder (the worker runs from it)
# What a worker inherits from its caller: where things are and how to run, no secret.
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "EVAL_HOME", "EVAL_JUDGES", "EVAL_PRICES",
              "EVAL_BATCH_POLL",
              "SSL_CERT_FILE", "SSL_CERT_DIR")
# A live runner reports every half second; one this long silent after our worker died is nobody.
DEAD_WORKER_GRACE = dt.timedelta(seconds=5)
BEING_RESUMED = ("run {name} is already being resumed (another click, tab or person was first): its worker is "
                 "starting, and its progress shows in a moment")


class WorkerBusy(EvalError):
    """The run is held by a worker that is still alive."""


def _home() -> Path:
    return Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash")


def _pid_file(run_id: str) -> Path:
    return _home() / "workers" / f"{run_id}.pid"


def worker_alive(run_id: str) -> bool | None:
    """Whether the worker this host last started for the run is alive; None when unknown
    (no record, another host, or no /proc): then only the heartbeat tells."""
    try:
        pid, host = _pid_file(run_id).read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    if host != socket.gethostname() or not Path("/proc/self/cmdline").exists():
        return None
    try:  # the pid may have been reused: it must still be this run's worker (a zombie has no cmdline)
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"worker" in cmd and run_id.encode() in cmd


def _held(run: dict) -> bool:
    """A worker holds the run: the process this host started for it is alive, or something
    reported recently — within HEARTBEAT_STALE when we know of no process, within
    DEAD_WORKER_GRACE when ours is dead (another process, a CLI resume say, may have taken over)."""
    if run["status"] not in ("queued", "running"):
        return False
    alive = worker_alive(run["id"])
    if alive:
        return True
    beat = run.get("heartbeat_at")
    return beat is not None and utcnow() - beat <= (HEARTBEAT_STALE if alive is None else DEAD_WORKER_GRACE)


def worker_stopped(run: dict) -> bool:
    """An active-looking run whose worker is gone (killed, or silent past HEARTBEAT_STALE)."""
    return run["status"] in ("queued", "running") and not _held(run)


def worker_env(judge: JudgeConfig | None, api_key: str | None, store_url: str,
               jury: list[JudgeConfig] = ()) -> dict[str, str]:
    """The worker's whole environment: the basics, the store, and the one key its judge may use.

    A typed key goes as ``EVAL_JUDGE_API_KEY``; an operator's named judge gets exactly its ``key_env``;
    the server's own OpenAI or Azure key only to a judge given no key whose URL that key belongs to
    (:func:`evaluators.judge.config.server_key_env`): a typed base URL or another Azure endpoint gets none.
    """
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["EVAL_DATABASE_URL"] = store_url  # not on the command line: a database password would show in ps
    if judge is None:
        return env
    for juror in jury:  # a jury's further judges are configured ones: each gets exactly its own key_env
        named = named_judges().get(juror.judge_name or "")
        if named and named.key_env and os.environ.get(named.key_env):
            env[named.key_env] = os.environ[named.key_env]
    if judge.judge_name:
        named = named_judges().get(judge.judge_name)
        if named and named.key_env and os.environ.get(named.key_env):
            env[named.key_env] = os.environ[named.key_env]
    elif api_key:
        env[KEY_ENV] = api_key
    else:
        for name in server_key_env(judge):
            if os.environ.get(name):
                env[name] = os.environ[name]
    return env


def spawn_worker(store: Store, run_id: str, api_key: str | None = None, retry_errors: bool = False) -> int:
    """Start ``python -m evaluators worker RUN_ID`` detached; returns its pid.

    Args:
        store: the store the worker uses (its URL goes through the worker's environment).
        run_id: the run to execute or resume.
        api_key: judge key for this worker only.
        retry_errors: the worker forgets the run's errored results (once it holds the run) and judges them again.
    Raises:
        WorkerBusy: a worker still holds the run; nothing is started.
    """
    run = store.get_run(run_id)
    if _held(run):
        raise WorkerBusy(BEING_RESUMED.format(name=run["name"]) if run["status"] == "queued" else
                         f"run {run['name']} is still being executed by its worker; wait for it or cancel it")
    queue = store.engine.dialect.name == "postgresql"
    if queue and api_key:
        raise EvalError("this dashboard's runs are done by the team's workers, which use their own keys: a key typed "
                        "here is not sent to them. Choose a judge configured on the workers, or one whose key is in "
                        "their environment")
    if not queue:
        spec_judge = (run["spec"] or {}).get("judge")
        jury = [JudgeConfig.from_dict(j) for j in (run["spec"] or {}).get("jury") or []]
        env = worker_env(JudgeConfig.from_dict(spec_judge) if spec_judge else None, api_key, store.url, jury)
    # Compare-and-set on what we just read: of several callers racing (two tabs, two clicks), one resumes the run.
    beat = store.begin_resume(run)
    if beat is None:
        raise WorkerBusy(BEING_RESUMED.format(name=run["name"]))
    if queue:
        return _enqueue(store, run, retry_errors)
    env[CLAIM_ENV] = beat.isoformat()
    cmd = [sys.executable, "-m", "evaluators", "worker", run_id]
    if retry_errors:
        cmd.append("--retry-errors")
    log_dir = _home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_dir / f"run-{run_id}.log", "ab") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=ROOT)
    except OSError as e:
        store.update_run(run_id, status="failed", error=f"the worker could not start: {e}", finished_at=utcnow())
        raise EvalError(f"the worker could not start: {e}") from None
    # Reap it when it ends, so a finished worker does not linger as a zombie of the dashboard.
    threading.Thread(target=proc.wait, name=f"reap-{run_id}", daemon=True).start()
    pid_file = _pid_file(run_id)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{proc.pid} {socket.gethostname()}\n")
    return proc.pid


def _enqueue(store: Store, run: dict, retry_errors: bool) -> int:
    """A PostgreSQL store's runs go to the job queue's workers (run.queue), which use their own keys."""
    from evaluators.run.queue import enqueue_run

    if retry_errors:
        store.clear_errors(run["id"])
    enqueue_run(store, run["id"], every=retry_errors)
    return 0


def retry_failed(store: Store, run_id: str, api_key: str | None = None, judge: JudgeConfig | None = None) -> int:
    """Judge the run's errored results again (a failed run: run it again, also with none); returns how many there are.

    The errors are cleared by the worker once it holds the run, so a worker that cannot
    start (or a run held by another) leaves them as they were.

    Args:
        judge: other judge settings for the retry (another URL, model, sampling). They become the
            run's judge (its spec and fingerprint) and the judge it had is appended, with the time
            and the number of errored results it left, to the spec's ``judge_history``. Rows it
            scored keep their results; each result's metadata names the model and provider that
            scored it, so a run judged by two judges says which judged which row.
    Raises:
        WorkerBusy: a worker holds the run; nothing was changed.
    """
    n = _count_errors(store, run_id)
    if not n and store.get_run(run_id)["status"] != "failed":  # a failed run (judge unreachable) has none: run again
        return 0
    if judge is not None:
        run = store.get_run(run_id)
        if _held(run):
            raise WorkerBusy(f"run {run['name']} is still being executed by its worker; wait for it or cancel it")
        _switch_judge(store, run, judge, n)
    spawn_worker(store, run_id, api_key, retry_errors=True)
    return n


def _switch_judge(store: Store, run: dict, judge: JudgeConfig, errored: int) -> None:
    from evaluators.run.spec import RunSpec

    spec = dict(run["spec"])
    old = spec.get("judge")
    if old == judge.to_dict():
        return
    new = RunSpec.from_dict({**spec, "judge": judge.to_dict()})
    new.validate()  # an unknown named judge, or one pointed elsewhere, is refused before anything changes
    history = list(spec.get("judge_history") or [])
    if old:
        history.append({"judge": old, "until": utcnow().isoformat(timespec="seconds"), "errored_results_left": errored})
    store.update_run(run["id"], spec={**spec, "judge": judge.to_dict(), "judge_history": history},
                     spec_hash=new.fingerprint())


def _count_errors(store: Store, run_id: str) -> int:
    from sqlalchemy import func, select

    from evaluators.store.schema import ResultRow

    with store.session() as s:
        return s.scalar(select(func.count()).select_from(ResultRow)
                        .where(ResultRow.run_id == run_id, ResultRow.status == "error")) or 0
