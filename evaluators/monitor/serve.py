"""``python -m evaluators monitor serve``: the receiver (receiver.py) on uvicorn, with the trace assembler
(assemble.py) beside it in the same process; and ``monitor export``'s writer."""
from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path

from evaluators.monitor.assemble import Assembler
from evaluators.monitor.receiver import Limits, Receiver

# The mapped fields export writes under the dataset's names, in this order, then the rest of them.
EXPORT_FIELDS = ("query", "response", "context", "conversation", "tool_calls", "tool_definitions")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: any free one), made before the server runs so its address can be printed."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(store, host: str = "127.0.0.1", port: int = 4318, limits: Limits = Limits(),
          assemble_every: float = 1.0, judge_every: float = 0) -> None:
    """Receive until SIGINT or SIGTERM (uvicorn's graceful shutdown: requests in flight are answered). With
    ``judge_every``, a child process judges the rules meanwhile (`monitor rule run --every`), ended with it; on
    PostgreSQL a thread queues a round of each rule every ``judge_every`` s instead, for the queue's workers."""
    import subprocess

    import uvicorn

    sock = listen(host, port)
    bound = sock.getsockname()[1]
    assembler = Assembler(store, assemble_every,
                          on_error=lambda e: print(f"monitor: assembling traces failed ({type(e).__name__}: {e}); "
                                                   "trying again", file=sys.stderr, flush=True))
    assembler.start()
    print(f"monitor: receiving OTLP/HTTP on http://{host}:{bound} (POST /v1/traces, /v1/logs)", flush=True)
    config = uvicorn.Config(Receiver(store, limits).app(), log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=limits.write_timeout + 5)
    from evaluators.run.queue import uses_queue

    judge = deferrer = None
    if judge_every > 0 and uses_queue(store):  # the rounds are jobs of the queue's workers
        from evaluators.monitor.queued import Deferrer

        deferrer = Deferrer(store, judge_every, on_error=lambda e: print(
            f"monitor: queueing the rules' rounds failed ({type(e).__name__}: {e}); trying again", file=sys.stderr,
            flush=True))
        deferrer.start()
    elif judge_every > 0:  # the store's URL through the environment, not the command line (it may hold a password)
        judge = subprocess.Popen([sys.executable, "-m", "evaluators", "monitor", "rule", "run", "--every",
                                  str(judge_every), "--with-parent"], env={**os.environ, "EVAL_DATABASE_URL": store.url})
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:  # (not reached after a TERM: uvicorn raises it again once it has shut down, so the child watches
        assembler.stop()  # for its parent's end itself: --with-parent)
        if deferrer is not None:
            deferrer.stop()
        if judge is not None:
            judge.terminate()
            judge.wait(timeout=60)


def _ns(when: str | None, what: str) -> int | None:
    """An ISO time (UTC unless it says otherwise) as nanoseconds since the epoch."""
    if not when:
        return None
    from evaluators.core.errors import UsageError

    try:
        t = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what} {when!r} is not a time: give it as 2026-11-28 or 2026-11-28T09:30:00") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1_000_000_000)


def export_traces(store, project: str, out: Path, since: str | None = None, until: str | None = None) -> int:
    """Write ``traces.jsonl`` and ``scores.jsonl`` (:func:`_export_scores`) in ``out``: one line a mapped trace (``trace_id``, ``time``, ``project``, the mapped
    fields under the dataset's names, ``sources``), written beside and renamed into place when whole. Returns
    how many lines."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".traces.jsonl.{os.getpid()}.tmp"
    n, exported = 0, set()
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for t in store.iter_mapped_traces(project, _ns(since, "--since"), _ns(until, "--until")):
                exported.add(t["trace_id"])
                fields = dict(t["fields"] or {})
                line = {"trace_id": t["trace_id"], "time": _iso(t["start_ns"]), "project": project}
                line.update({k: fields.pop(k) for k in EXPORT_FIELDS if k in fields})
                line.update(fields)
                line.update(sources=t["sources"] or {}, content=t["content"], completeness=t["completeness"])
                if t["content"] is False and t["hint"]:
                    line["hint"] = t["hint"]
                if t["kind"] != "trace" or t["late"]:  # a conversation's row; a turn that came after it was made
                    line.update(kind=t["kind"], **({"late_turn": True} if t["late"] else {}))
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                n += 1
        tmp.replace(out / "traces.jsonl")
    finally:
        tmp.unlink(missing_ok=True)
    _export_scores(store, project, out, exported)
    return n


def _export_scores(store, project: str, out: Path, exported: set[str]) -> None:
    """``scores.jsonl``: one line a trace and rule (each rule's latest version): trace_id, rule, rule_version,
    decision, and for a judged trace its values under rows.jsonl's keys (``outputs.coherence.coherence``...), for
    a failed one its error."""
    from evaluators.read.results import open_results

    tmp = out / f".scores.jsonl.{os.getpid()}.tmp"
    runs: dict[str, object] = {}
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for rule in store.monitor_rules(project):
                decided = store.decisions(project, rule["name"], rule["version"])
                for tid in sorted(set(decided) & exported):
                    d = decided[tid]
                    line = {"trace_id": tid, "rule": rule["name"], "rule_version": rule["version"],
                            "decision": d["decision"]}
                    if d["decision"] == "judged":
                        if d["run_id"] not in runs:
                            runs[d["run_id"]] = open_results(store, d["run_id"])
                        row = runs[d["run_id"]].row(d["row_idx"])
                        line.update({k: v for k, v in row.items() if k.startswith("outputs.")})
                    elif d["error"]:
                        line["error"] = d["error"]
                    f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        tmp.replace(out / "scores.jsonl")
    finally:
        tmp.unlink(missing_ok=True)


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=ns // 1000)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")
