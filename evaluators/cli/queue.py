"""``python -m evaluators submit|wait`` and the queue's ``worker``: runs on the job queue of a PostgreSQL store
(evaluators.run.queue), for a team's evaluation service with workers on many machines.

``submit`` checks what ``run`` checks (the data, the options, the judge's one call) with the submitter's key,
stores the dataset and queues the run: its id is the last word of its last line. ``wait`` follows a run to
its end and writes ``rows.jsonl`` and ``metrics.json`` as ``run`` does, with ``run``'s exit codes.
``worker`` (no run id) takes chunks of queued runs, and the monitor's rule rounds (evaluators.monitor.queued),
until stopped; its judge keys come from its own environment or configured judges, never from the queue.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import os
import sys
import time

from evaluators.core.errors import EvalError, UsageError
from evaluators.cli.text import say

# run's options that submit takes too (its --out, resume, gates and progress belong to wait, or to neither)
NOT_SUBMIT = {"help", "data", "out", "fresh", "quiet", "fail_under", "max_errors"}


def add_commands(sub, run_parser) -> None:
    """Add submit and wait; ``run_parser`` is run's, whose options submit shares."""
    s = sub.add_parser("submit", help="check a run as `run` does and put it on the job queue (PostgreSQL store); "
                                      "prints the run's id as the last word")
    s.add_argument("data", help="JSONL, JSON, CSV or Parquet file")
    for action in run_parser._actions:  # the very options of run (metrics, judge, thresholds, templates...)
        if action.dest not in NOT_SUBMIT:
            s._add_action(action)
    s.add_argument("--chunk-rows", type=int, help="rows a job (default: a few jobs for each live worker, 200 to "
                   "10,000 rows, so that several workers share any run of more than a few hundred rows)")
    w = sub.add_parser("wait", help="wait for a queued run to end; write rows.jsonl and metrics.json as `run` does")
    w.add_argument("run_id")
    w.add_argument("--out", required=True, help="folder for rows.jsonl and metrics.json")
    for action in run_parser._actions:
        if action.dest in ("fail_under", "max_errors", "db", "quiet"):
            w._add_action(action)


def cmd_submit(a) -> int:
    from evaluators.cli import custom_metrics as cli_custom

    metrics = [x.strip() for x in a.metrics.split(",") if x.strip()]
    cli_custom.register_for_run(a, metrics)  # --metric-file: the run records each definition for the workers
    if _target_wanted(a):  # questions only: this machine asks the target (its key stays here), then queues each
        import tempfile  # variant's answered file; the answers stay in the store's cache, the folder goes

        from evaluators.cli import experiment

        a.quiet = False  # (submit says what it does)
        with tempfile.TemporaryDirectory(prefix="evals-answers-") as a.out:
            return experiment.run(a, metrics, _submit_data, compare=False)
    return _submit_data(a, metrics)


def _target_wanted(a) -> bool:
    from evaluators.cli import target as cli_target

    return cli_target.wanted(a)


def _submit_data(a, metrics: list[str]) -> int:
    from evaluators.cli import common as m, cost as cli_cost, wildbench as cli_wildbench
    if a.batch and a.chunk_rows is not None:
        raise UsageError("--batch queues the run as one job (the provider's Batch API does the parallel work, and "
                         "the job's batches are polled by whichever worker holds it): drop --chunk-rows")
    thresholds = m._floats(a.threshold, "--threshold")
    api_key = m._api_key_from_args(a)
    judge = m._judge_from_args(a)
    ds, judged = m._checked_dataset(a, metrics, judge, thresholds, api_key)
    jury = m._jury_from_args(a, judge)
    cost = cli_cost.settings(a, judge, jury, judged)  # prices and --budget, as run takes them
    if a.chunk_rows is not None and a.chunk_rows < 1:
        raise UsageError("--chunk-rows must be at least 1")
    probe = None
    if judged and not a.batch:  # the one-call check, with this machine's key: a wrong URL, key or model is said now
        from evaluators.judge.client import EarlyProbe

        probe = EarlyProbe(judge, api_key)
    from evaluators.api import prepare_run
    from evaluators.run.queue import enqueue_run, uses_queue
    from evaluators.store.store import Store

    store = Store(a.db)
    if not uses_queue(store):
        raise UsageError("submit queues runs for workers on a PostgreSQL store (EVAL_DATABASE_URL="
                         "postgresql+psycopg://...); with this store, use `run`")
    if probe is not None:
        probe._done.wait()
        if probe.error is not None:
            raise probe.error if isinstance(probe.error, EvalError) else EvalError(str(probe.error))
    rid = prepare_run(store, ds, metrics, judge, thresholds, None, m._pairs(a.template, "--template"), resume=False,
                      options=cli_wildbench.run_options(a), repeat=a.repeat, jury=jury, cost=cost,
                      name=getattr(a, "run_name", None))
    a.run_id = rid
    # --batch: one job (each chunk would make and poll batches of its own); a worker killed while it waits is
    # replaced by another, which polls the batches the first one stored instead of submitting them again
    n = enqueue_run(store, rid, max(1, len(ds)) if a.batch else a.chunk_rows)
    say(f"{len(ds)} rows in {n} job(s){' through the Batch API' if a.batch else ''}; follow it with "
          f"`python -m evaluators wait {rid} --out DIR`")
    say(f"queued run {rid}")
    return m.EXIT_OK


def cmd_wait(a) -> int:
    from evaluators.cli import common as m, cost as cli_cost
    from evaluators.cli.review import add_review_keys
    from evaluators.read.outputs import write_run_outputs
    from evaluators.store.store import Store

    gates = m._floats(a.fail_under, "--fail-under")
    max_errors = m.parse_max_errors(a.max_errors)
    store = Store(a.db)
    try:
        run = store.get_run(a.run_id)
    except KeyError:
        raise UsageError(f"no run {a.run_id} in this store") from None
    gate_keys = m.check_gates(gates, run["spec"]["metrics"])
    last = ""
    while run["status"] not in ("completed", "failed", "cancelled", "stopped"):
        line = f"\r{run['tasks_done'] + run['tasks_errored']}/{run['tasks_total']} done, {run['tasks_errored']} errored"
        if not a.quiet and line != last:
            print(line, end="", file=sys.stderr, flush=True)
            last = line
        time.sleep(1.0)
        run = store.get_run(a.run_id)
    if last:
        print(file=sys.stderr)
    rid, status = run["id"], run["status"]
    res = write_run_outputs(store, rid, a.out)
    spec = run["spec"]
    columns = store.dataset_info(run["dataset_id"])["columns"]
    metrics_out = add_review_keys(store, rid, a.out, res.metrics(), columns,
                                  (spec.get("repeat") or 1) > 1 or bool(spec.get("jury")))
    metrics_out = m.finished_line(store, rid, a.out, metrics_out)
    m.print_summary(res)
    metrics_out = cli_cost.add_cost_keys(store, rid, a.out, metrics_out)  # as run writes them
    if status in ("cancelled", "stopped"):
        if status == "stopped":
            say(f"stopped: {run['error']}", file=sys.stderr)
        return m.EXIT_CANCELLED
    if status == "failed":
        say(f"error: run {rid} failed: {run['error']}", file=sys.stderr)
        return m.EXIT_FAILED
    breached = m._gates_breached(res, metrics_out, gates, gate_keys, max_errors)
    if breached:
        say("fail-under breached: " + "; ".join(breached), file=sys.stderr)
        return m.EXIT_GATE
    return m.EXIT_OK


def cmd_queue_worker(a) -> int:
    """``worker`` without a run id: a worker of the job queue, until SIGINT or SIGTERM."""
    from evaluators.cli.common import EXIT_OK
    from evaluators.run.queue import run_worker, uses_queue
    from evaluators.store.store import Store

    from evaluators.run import queue

    if bool(a.judge_base_url) != bool(a.judge_api_key_env):
        raise UsageError("--judge-base-url and --judge-api-key-env go together: the key in that variable is sent "
                         "only to that URL's runs")
    if a.judge_api_key_env:
        key = os.environ.get(a.judge_api_key_env)
        if not key:
            raise UsageError(f"--judge-api-key-env: {a.judge_api_key_env} is not set in this worker's environment")
        queue.URL_KEYS[a.judge_base_url.rstrip("/")] = key
    store = Store(a.db)
    if not uses_queue(store):
        raise UsageError("a queue worker needs a PostgreSQL store: set EVAL_DATABASE_URL=postgresql+psycopg://...")
    from evaluators.cli.monitor_rounds import register_jobs

    register_jobs()  # the monitor's rule rounds, beside runs' chunks
    say(f"worker taking queued runs and monitor rules from {store.engine.url.render_as_string(hide_password=True)}",
        file=sys.stderr)
    run_worker(store, a.jobs)
    return EXIT_OK


COMMANDS = {"submit": cmd_submit, "wait": cmd_wait}
