"""Command line: ``python -m evaluators run|metrics|worker``.

Exit codes: 0 the run completed; 2 bad input or usage, or a judge that fails its check
(one line, no traceback); 3 a ``--fail-under`` gate was breached; 4 the run was cancelled (or stopped at
its ``--budget``);
5 the run failed (every judged row errored); 1 anything unexpected.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time

from evaluators.cli import cost as cli_cost, review as cli_review, safety as cli_safety, wildbench as cli_wildbench
from evaluators.cli import custom_metrics as cli_custom, db as cli_db, monitor as cli_monitor, queue as cli_queue
from evaluators.cli import manage as cli_manage, redteam as cli_redteam, target as cli_target
from evaluators.cli import align as cli_align
from evaluators.core.errors import DataValidationError, EvalError, UsageError
from evaluators.cli.text import say

from evaluators.cli.common import (EXIT_CANCELLED, EXIT_ERROR, EXIT_FAILED, EXIT_GATE, EXIT_OK,  # noqa: F401
                                   EXIT_USAGE, _api_key_from_args, _checked_dataset, _floats, _gates_breached,
                                   _judge_from_args, _jury_from_args, _pairs, check_gates,
                                   finished_line, parse_max_errors, print_summary)
GC_HELD = False  # `python -m evaluators` holds the cyclic garbage collector during start-up (__main__)


def resume_gc() -> None:
    """Collections back on, everything start-up made frozen out of them (it lives as long as the process;
    later collections need not walk it). A no-op unless start-up held them."""
    global GC_HELD
    if GC_HELD:
        import gc

        GC_HELD = False
        gc.freeze()
        gc.enable()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own exit code is 2 too, but with usage noise
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m evaluators", description="Evaluate LLM outputs: classic metrics and an LLM judge.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="evaluate a dataset file")
    r.add_argument("data", help="JSONL, JSON, CSV or Parquet file")
    r.add_argument("--metrics", required=True, help="comma-separated metric names (see `metrics`)")
    r.add_argument("--out", required=True, help="folder for rows.jsonl and metrics.json; re-run to resume")
    r.add_argument("--judge", metavar="NAME", action="append", help="a judge configured on this machine "
                   "(judges.toml); given several times, a jury: every judge asked each task, the row's value their "
                   "median (labels: majority), agreement between them reported. Its URL, "
                   "model and key come from there")
    r.add_argument("--judge-base-url", help="OpenAI-compatible server, e.g. http://localhost:11434/v1")
    r.add_argument("--judge-api-key-env", metavar="VAR", help="name of the environment variable holding the key "
                   "for this judge (a base URL gets no key otherwise; never put a key on the command line)")
    r.add_argument("--judge-model", help="judge model or Azure deployment (default gpt-4o-mini)")
    r.add_argument("--judge-provider", choices=["openai", "azure", "compatible"],
                   help="default: compatible with --judge-base-url, azure when AZURE_OPENAI_ENDPOINT is set, else openai")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--max-tokens", type=int, default=800)
    r.add_argument("--seed", type=int)
    r.add_argument("--timeout", type=float, default=60.0, help="seconds per judge call before retrying")
    r.add_argument("--retries", type=int, default=5, help="retries per judge call")
    r.add_argument("--concurrency", type=int, default=8, help="judge calls in flight (at most; fewer while the "
                   "judge answers 429 or its rate-limit headers say to slow down)")
    r.add_argument("--rpm", type=float, default=None, help="judge requests a minute never to exceed (your quota)")
    r.add_argument("--tpm", type=float, default=None, help="judge tokens a minute never to exceed (prompt estimate "
                   "plus 120 for the verdict)")
    r.add_argument("--threshold", action="append", metavar="NAME=VALUE")
    r.add_argument("--map", action="append", metavar="FIELD=COLUMN", help="e.g. --map query=question")
    r.add_argument("--template", action="append", metavar="METRIC=PATH", help="your own judge template file")
    r.add_argument("--fail-under", action="append", metavar="NAME=VALUE",
                   help="exit 3 if an aggregate is below VALUE; NAME is a metrics.json key or a metric name")
    r.add_argument("--max-errors", default="0", metavar="N|P%",
                   help="rows a --fail-under metric may leave errored or unscored: a count (3) or a share (5%%); "
                   "default 0")
    r.add_argument("--repeat", type=int, default=1, metavar="K", help="ask the judge each task K times (each its own "
                   "call and cache entry); the row's value is their mean (scores), median (severities) or majority "
                   "(labels), and agreement reports how often they disagree")
    r.add_argument("--fresh", action="store_true", help="start a new run even if --out holds an unfinished one")
    r.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    r.add_argument("--quiet", action="store_true")
    cli_cost.add_run_options(r)
    cli_custom.add_run_options(r)
    cli_target.add_run_options(r)
    m = sub.add_parser("metrics", help="list metrics (and which a dataset allows); add FILE | list (with the "
                                       "store's saved metrics) | show NAME: your own metrics saved in the store")
    m.add_argument("data", nargs="?")
    m.add_argument("--map", action="append", metavar="FIELD=COLUMN")
    cli_custom.add_metrics_options(m)
    w = sub.add_parser("worker", help="without a run id: take queued runs' chunks (PostgreSQL store) until stopped; "
                                      "with one: execute that stored run (the dashboard's SQLite runs)")
    w.add_argument("run_id", nargs="?")
    w.add_argument("--jobs", type=int, default=1, help="queued chunks this worker runs at once")
    w.add_argument("--judge-base-url", help="queue worker: runs judged at this URL get the key below (others never)")
    w.add_argument("--judge-api-key-env", metavar="VAR", help="queue worker: the variable holding that URL's key")
    w.add_argument("--rows", help="comma-separated row indexes to (re)judge")
    w.add_argument("--retry-errors", action="store_true",
                   help="forget the run's errored results, once this worker holds the run, and judge them again")
    w.add_argument("--db")
    v = sub.add_parser("views", help="build a finished run's Results-page columns and search text beside the store "
                                     "(a CLI run starts it in the background)")
    v.add_argument("run_id")
    v.add_argument("--db")
    cli_safety.add_commands(sub)
    cli_wildbench.add_commands(sub)
    cli_review.add_commands(sub)
    cli_db.add_commands(sub)
    cli_monitor.add_commands(sub)
    cli_queue.add_commands(sub, r)
    cli_manage.add_commands(sub)
    cli_align.add_commands(sub)
    cli_redteam.add_commands(sub)
    return p


def _early_classic_worker(a, metrics: list[str]):
    """For a run of classic metrics only: the worker process forked now, computing rows ahead while this
    process loads, checks and stores the file (:func:`evaluators.run.classic_worker.start_early`); None otherwise.
    It computes only (nothing is stored, no call is made): a run refused at the check ends it unused."""
    from evaluators.run import classic_worker as parallel
    from evaluators.core.registry import get_metric

    try:
        options = cli_wildbench.run_options(a)
        specs = [get_metric(m).with_params(options.get(m)) for m in dict.fromkeys(metrics)]
        if not specs or any(s.is_judge for s in specs) or a.template:
            return None
        return parallel.start_early(a.data, _pairs(a.map, "--map"), specs)
    except Exception:  # noqa: BLE001 — anything wrong with the arguments is said by the check that follows
        return None


def cmd_run(a) -> int:
    metrics = [m.strip() for m in a.metrics.split(",") if m.strip()]
    cli_custom.register_for_run(a, metrics)
    if cli_target.wanted(a):  # a file of questions: each variant's answers first (a mistyped metric refused before)
        from evaluators.cli import experiment

        return experiment.run(a, metrics, _run_data)
    return _run_data(a, metrics)


def _run_data(a, metrics: list[str]) -> int:
    early = _early_classic_worker(a, metrics)
    if early is not None:  # the aggregates at the end run on numpy (core.kinds.columns): imported while the
        importlib.import_module("numpy")  # worker computes, not after it (the worker's NLTK goes without it)
    try:
        return _cmd_run(a, metrics, early)
    finally:
        if early is not None:
            early.close()  # (a no-op when the run ended it: it was its classic worker)


def _cmd_run(a, metrics: list[str], early) -> int:
    thresholds, gates = _floats(a.threshold, "--threshold"), _floats(a.fail_under, "--fail-under")
    gate_keys = check_gates(gates, metrics)  # a typo in a gate is said now, not after an hour of judging
    max_errors = parse_max_errors(a.max_errors)
    api_key, judge = _api_key_from_args(a), _judge_from_args(a)
    ds, judged = _checked_dataset(a, metrics, judge, thresholds, api_key)
    cost = cli_cost.settings(a, judge, _jury_from_args(a, judge), judged)  # (a budget with no price: refused now)
    probe = None
    if judged and not a.batch:  # everything refusable was refused: the judge's check leaves now, from a thread, while the
        from evaluators.judge.client import EarlyProbe  # store's code is imported, the dataset stored and the run planned

        probe = EarlyProbe(judge, api_key)
        probe.wait_sending()  # a few ms: it leaves before the imports and writes compete with it
    from evaluators.api import prepare_run
    from evaluators.read.outputs import LiveRunOutputs, write_run_outputs
    from evaluators.run.runner import Runner
    from evaluators.store.store import Store

    store = Store(a.db)
    rid = prepare_run(store, ds, metrics, judge, thresholds, None, _pairs(a.template, "--template"), out_dir=a.out,
                      resume=not a.fresh, options=cli_wildbench.run_options(a), repeat=a.repeat,
                      jury=_jury_from_args(a, judge), cost=cost, name=getattr(a, "run_name", None))
    a.run_id = rid
    cli_cost.estimate_before(store, rid, a.quiet)
    last = [0.0]

    def progress(p):
        now = time.monotonic()
        if a.quiet or (now - last[0] < 0.5 and p.done + p.errored < p.total):
            return
        last[0] = now
        eta = p.eta_seconds()
        line = f"\r{p.done + p.errored}/{p.total} done, {p.errored} errored" + (f", ~{eta:.0f}s left" if eta else "")
        print(line, end="", file=sys.stderr, flush=True)

    resumed = store.get_run(rid)["tasks_done"] > 0
    if resumed and not a.quiet:
        say(f"resuming run {rid} in {a.out}", file=sys.stderr)
    resume_gc()  # (the run's own garbage is collected as usual)
    import gc

    gc.freeze()  # what start-up and loading made (WordNet's index...) stays out of the collector's walks,
    gc.set_threshold(20_000, 50, 50)  # and the run's many short-lived objects trigger fewer collections
    # a classic run's rows.jsonl is written as its results are (the runner abandons it unless the run
    # computes every row itself); otherwise, and for a judged run, it is read back from the store after the run
    live = None if judged else LiveRunOutputs(store, rid, a.out)
    if judged:  # the aggregates at the end run on numpy (evaluators.core.kinds.columns): imported while calls wait
        threading.Thread(target=importlib.import_module, args=("numpy",), daemon=True).start()
    try:
        # the user re-running a command takes the run over, even from a process killed moments ago
        status = Runner(store, rid, api_key=api_key, on_progress=progress, take_over=True, probe=probe,
                        outputs=live, classic_worker=early).run()
        res = live.finish() if live is not None else None
    finally:
        if live is not None:
            live.abandon()  # (a no-op once finished) no temporary file left behind by an interrupted run
    if not a.quiet:
        print(file=sys.stderr)
    if res is None:
        res = write_run_outputs(store, rid, a.out)  # streamed from the store: flat in the rows
    metrics_out = cli_review.add_review_keys(store, rid, a.out, res.metrics(), ds.columns,
                                              a.repeat > 1 or len(a.judge or []) > 1)
    metrics_out = finished_line(store, rid, a.out, metrics_out)
    if status == "completed":
        _views_in_background(store, rid)
    print_summary(res)
    metrics_out = cli_cost.add_cost_keys(store, rid, a.out, metrics_out)
    if status in ("cancelled", "stopped"):
        if status == "stopped":
            say(f"stopped: {store.get_run(rid)['error']}", file=sys.stderr)
        return EXIT_CANCELLED
    if status == "failed":
        say(f"error: run {rid} failed: {store.get_run(rid)['error']}", file=sys.stderr)
        return EXIT_FAILED
    breached = _gates_breached(res, metrics_out, gates, gate_keys, max_errors)
    if breached:
        say("fail-under breached: " + "; ".join(breached), file=sys.stderr)
        return EXIT_GATE
    return EXIT_OK


def cmd_metrics(a) -> int:
    from evaluators.data.loading import load_dataset
    from evaluators.core.registry import FAMILIES, all_metrics

    avail = load_dataset(a.data, _pairs(a.map, "--map")).availability() if a.data else None
    for fam, title in FAMILIES.items():
        specs = [s for s in all_metrics() if s.family == fam]
        if not specs:
            continue
        say(title)
        for s in specs:
            note = ""
            if avail is not None:
                note = "  [available]" if not avail[s.name] else f"  [needs {', '.join(avail[s.name])}]"
            lo, hi = s.score_range
            say(f"  {s.name:<13} {lo:g}-{hi:g}, pass {'>=' if s.higher_is_better else '<='} {s.default_threshold:g}  {s.description}{note}")
    return EXIT_OK


def cmd_worker(a) -> int:
    if a.run_id is None:
        return cli_queue.cmd_queue_worker(a)
    from evaluators.run.runner import Runner
    from evaluators.store.store import Store

    from evaluators.run.workers import CLAIM_ENV, KEY_ENV

    rows = {int(x) for x in a.rows.split(",")} if a.rows else None
    store = Store(a.db)
    resume = _resume_beat(os.environ.get(CLAIM_ENV))  # started by a resume, which holds the run for us
    claimed = bool(a.retry_errors or resume)
    if claimed:  # claim first: a worker that cannot hold the run must not lose its errors
        if not store.claim_run(a.run_id, resume=resume):
            raise EvalError(f"run {a.run_id} is being executed by another worker (it reported in the last 30 s)")
        if a.retry_errors:
            store.clear_errors(a.run_id)
    status = Runner(store, a.run_id, api_key=os.environ.get(KEY_ENV), rows=rows, take_over=claimed).run()
    if status == "completed":  # the Results page's columns built now, so that its first open only reads them
        _prepare_views(store, a.run_id)
    return {"cancelled": EXIT_CANCELLED, "failed": EXIT_FAILED}.get(status, EXIT_OK)


def _resume_beat(raw: str | None):
    """The beat a resume left on the run for this worker (run.workers.CLAIM_ENV), or None."""
    import datetime as dt

    if not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"EVAL_RESUME_CLAIM must be a time (as the dashboard sets it), got {raw!r}") from None


def _prepare_views(store, run_id: str) -> None:
    from evaluators.read.view import prepare_view

    try:
        prepare_view(store, run_id)
    except Exception as e:  # noqa: BLE001 — the run is done and stored; the page builds them on open instead
        say(f"the run's views were not prepared ({type(e).__name__}: {e}); they are built on first open",
              file=sys.stderr)


def cmd_views(a) -> int:
    from evaluators.store.store import Store

    _prepare_views(Store(a.db), a.run_id)
    return EXIT_OK


def _views_in_background(store, run_id: str) -> None:
    """After a CLI run: the Results page's columns and search text built by a detached process (with no
    key in its environment), so the first open in a dashboard reads them, and this command ends now."""
    import subprocess

    from evaluators.read.columns import views_dir
    from evaluators.run.workers import worker_env

    if views_dir(store) is None:
        return
    subprocess.Popen([sys.executable, "-m", "evaluators", "views", run_id], env=worker_env(None, None, store.url),
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    try:
        a = build_parser().parse_args(argv)
        if a.command != "run":
            resume_gc()
        commands = {"run": cmd_run, "metrics": lambda a: cli_custom.cmd_metrics(a, cmd_metrics), "worker": cmd_worker,
                    "views": cmd_views, **cli_safety.COMMANDS, **cli_wildbench.COMMANDS, **cli_review.COMMANDS,
                    **cli_db.COMMANDS, **cli_queue.COMMANDS, **cli_monitor.COMMANDS, **cli_manage.COMMANDS,
                    **cli_align.COMMANDS, **cli_redteam.COMMANDS}
        return commands[a.command](a)
    except DataValidationError as e:
        say(f"error: {e.one_line()}", file=sys.stderr)
        return EXIT_USAGE
    except EvalError as e:
        say(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("\ninterrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except SystemExit as e:  # --help
        return int(e.code or 0)
    except Exception as e:  # noqa: BLE001 — one line for the user; EVAL_DEBUG=1 for the traceback
        if os.environ.get("EVAL_DEBUG"):
            raise
        # the first line only: a database driver's message goes on with the SQL and its parameters (a row's
        # values, a note, a key), which are not for a terminal or a CI log
        first = (str(e).strip().splitlines() or [""])[0][:500]
        say(f"internal error: {type(e).__name__}: {first} (set EVAL_DEBUG=1 for details)", file=sys.stderr)
        return EXIT_ERROR
