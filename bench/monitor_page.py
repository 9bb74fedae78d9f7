"""The Monitoring page's reads on a week of production traffic (issue 31: 100 traces a minute, 1,000,000 traces).

    python bench/monitor_page.py [--traces 1000000] [--keep DIR] [--db URL] [--reps 3]

Builds a store (SQLite under ``--keep``, or the empty PostgreSQL database ``--db`` names), written in bulk through
SQLAlchemy Core, not through the receiver, holding one project ``shop`` with:

- ``--traces`` traces arriving 0.6 s apart over a week (the newest 100 still open), each mapped to a row whose query
  and response are cut at random places from WildBench answers (``../shared/fixtures/wildbench``, the text
  ``bench/dashboard_scale.py`` uses: 3,071 answers of three models, so the vocabulary varies as real traffic's
  does), 3% with no content captured, 20 holding the rare word ``zebrafish-7731``; one span each (0.1% with a
  late span more);
- two rules with a decision per trace: ``quality`` (10%: judged 9.4%, failed 0.3%, pending 0.3%) and ``safety`` (2%);
- each judged trace's scores, as the rules' run stores them: coherence, relevance and fluency (1-5) for ``quality``,
  violence (0-7) for ``safety``: about 300,000 results.

Then times, in this process, the read functions the page calls (``evaluators.read.monitor``): the traffic counts,
the trace list's first page, its next page, and a first page under each filter (time range, state, a rule's
decision, text), one trace opened, and the rates over time (``evaluators.read.monitor_series.rate_series``: a week
by the hour, the last day by 5 minutes). Each figure is the median of ``--reps`` (the first of each is also shown: a
cold cache), against the Results page's targets (bench/RESULTS.md): a page open 2 s, a filter change 0.5 s.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.dashboard_scale as wildbench  # noqa: E402

PROJECT = "shop"
START = dt.datetime(2026, 11, 20, 0, 0)
DEPLOY = START + dt.timedelta(days=4)  # service.version 1.4.0 before, 1.5.0 after
RARE = "zebrafish-7731"
QUALITY = ["coherence", "relevance", "fluency"]
TARGETS = {"open": 2.0, "filter": 0.5}


def _tid(i: int) -> str:
    return hashlib.md5(f"trace {i}".encode()).hexdigest()


def _texts(rng: random.Random, pool: list[str]) -> tuple[str, str]:
    a, b = rng.choice(pool), rng.choice(pool)
    i, j = rng.randrange(max(1, len(a) - 200)), rng.randrange(max(1, len(b) - 900))
    return a[i:i + rng.randint(40, 200)], b[j:j + rng.randint(200, 900)]


def _facts(rng: random.Random, model: str, seen: dt.datetime) -> tuple[int, dict]:
    """A trace's latency (ms) and facts: its model, service, tokens, 0.5% errors, service.version 1.4.0 until the
    deploy, then 1.5.0."""
    latency = rng.randint(300, 4000)
    return latency, {"model": model, "service_name": "shop-api", "latency_ms": latency,
                     "tokens": rng.randint(200, 2400), "error": rng.random() < 0.005,
                     "attributes": {"service.version": "1.4.0" if seen < DEPLOY else "1.5.0"}}


def build(url: str, n: int) -> None:
    """The store of the module docstring."""
    from evaluators import load_dataset
    from evaluators.store.monitor_rules import MonitorDecisionRow, MonitorRuleRow
    from evaluators.store.schema import ResultRow
    from evaluators.store.store import Store
    from evaluators.store.traces import MonitorProjectRow, MonitorSpanRow, MonitorTraceRow, fact_columns

    store = Store(url)
    pool = [a["text"] for a in wildbench.answers()]
    rng = random.Random(31)
    rare = set(rng.sample(range(n - 1000), 20))
    one = Path(tempfile.mkdtemp(prefix="evaldash-monitor-row-")) / "row.jsonl"
    one.write_text('{"query": "q", "response": "r"}\n')
    run_id = store.create_run(store.save_dataset(load_dataset(one)), {"metrics": ["coherence"]}, "bench", "monitor")
    with store.engine.begin() as c:
        c.execute(MonitorProjectRow.__table__.insert(), [{"name": PROJECT, "quiet_seconds": 30.0, "created_at": START}])
        c.execute(MonitorRuleRow.__table__.insert(), [
            {"project": PROJECT, "name": name, "version": 1, "metrics": metrics, "sample_rate": rate,
             "judge": {"model": "gpt-4o-mini"}, "key_env": None, "created_at": START}
            for name, metrics, rate in (("quality", QUALITY, 0.1), ("safety", ["violence"], 0.02))])
    chunk, t0 = 5000, time.perf_counter()
    for lo in range(0, n, chunk):
        traces, spans, decisions, results = [], [], [], []
        for i in range(lo, min(n, lo + chunk)):
            tid, seen = _tid(i), START + dt.timedelta(seconds=0.6 * i)
            is_open, content = i >= n - 100, rng.random() >= 0.03
            q, r = _texts(rng, pool)
            if i in rare:
                r = f"{r} {RARE}"
            fields = {"query": q, "response": r, "model": rng.choice(("gpt-4o-mini", "gpt-4o", "qwen2.5"))} \
                if content else {"model": "gpt-4o-mini"}
            start_ns = int(seen.replace(tzinfo=dt.timezone.utc).timestamp() * 1e9)
            latency, facts = _facts(rng, fields["model"], seen)
            traces.append({"facts": None if is_open else facts, **fact_columns(None if is_open else facts), "project": PROJECT, "trace_id": tid, "first_seen": seen, "last_seen": seen, "receipts": 1,
                           "root_ended": True, "start_ns": start_ns, "status": "open" if is_open else "mapped",
                           "completeness": None if is_open else "complete", "mapped_at": None if is_open else seen,
                           "fields": None if is_open else fields,
                           "sources": None if is_open else {k: "gen_ai.input.messages of span `chat`" for k in fields},
                           "content": None if is_open else content, "hint": None if content else "set CAPTURE",
                           "conversation_key": None})
            for k, late in ((1, False), *(((2, True),) if rng.random() < 0.001 else ())):
                spans.append({"project": PROJECT, "trace_id": tid, "span_id": f"{i:012x}{k:04x}",
                              "parent_span_id": "", "name": "chat gpt-4o-mini", "start_ns": start_ns,
                              "end_ns": start_ns + latency * 10**6,
                              "data": {"name": "chat gpt-4o-mini", "status_code": 0}, "received_at": seen,
                              "late": late})
            if is_open:
                continue
            for rule, rate in (("quality", 0.1), ("safety", 0.02)):
                x = rng.random()
                decision = ("sampled_out" if x >= rate else "no_content" if not content
                            else "failed" if x < rate * 0.03 else "pending" if x < rate * 0.06 else "judged")
                decisions.append({"project": PROJECT, "trace_id": tid, "rule": rule, "rule_version": 1,
                                  "decision": decision, "error": "judge timed out" if decision == "failed" else None,
                                  "run_id": run_id if decision == "judged" else None,
                                  "row_idx": i if decision == "judged" else None, "decided_at": seen,
                                  "start_ns": start_ns})
                if decision == "judged":
                    for metric in QUALITY if rule == "quality" else ["violence"]:
                        value = float(rng.choice((1, 2, 3, 4, 4, 5, 5)) if rule == "quality" else
                                      rng.choice((0, 0, 0, 0, 1, 2, 5)))
                        results.append({"run_id": run_id, "row_idx": i, "metric": metric, "turn": 0, "status": "ok",
                                        "value": value, "outputs": {metric: value}, "cached": False,
                                        "created_at": seen})
        with store.engine.begin() as c:
            c.execute(MonitorTraceRow.__table__.insert(), traces)
            c.execute(MonitorSpanRow.__table__.insert(), spans)
            c.execute(MonitorDecisionRow.__table__.insert(), decisions)
            c.execute(ResultRow.__table__.insert(), results)
        if lo % 100_000 == 0:
            print(f"  {lo + len(traces):,} traces ({time.perf_counter() - t0:.0f} s)", flush=True)
    if store.engine.dialect.name == "postgresql":  # as autovacuum leaves a table after a bulk load: its visibility
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:  # map lets counts read
            c.exec_driver_sql("VACUUM ANALYZE")  # the indexes only
    else:
        with store.engine.begin() as c:
            c.exec_driver_sql("ANALYZE")


def timed(fn, reps: int) -> tuple[float, float, object]:
    """(first, median of ``reps``, the last result) of ``fn()`` in seconds."""
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times[0], statistics.median(times), out


def first_open(store, until_ns: int) -> list:
    """What the Monitoring page reads when it opens with its defaults (the last 24 hours, 1-hour windows, the first
    rule's first metric): the traffic counts, the trace list's first page, the slice pickers' values, the traffic
    per window and the rates (the alert history is one small table)."""
    from evaluators.read.monitor import trace_page, traffic
    from evaluators.read.monitor_series import rate_series
    from evaluators.read.monitor_traffic import slice_values, traffic_series

    day = (until_ns - 86_400 * 10**9, until_ns)
    traffic(store, PROJECT)
    trace_page(store, PROJECT)
    slice_values(store, PROJECT, *day)
    traffic_series(store, PROJECT, *day, 3600, "quality")
    return rate_series(store, PROJECT, "quality", None, "coherence", *day, 3600)["points"]


def measure(url: str, n: int, reps: int) -> list[tuple[str, float, float, str, float]]:
    from evaluators.read.monitor import TraceFilter, trace_detail, trace_page, traffic
    from evaluators.read.monitor_series import compare_periods, rate_series
    from evaluators.read.monitor_traffic import Slice, around_deploy, deploys, slice_values, traffic_series
    from evaluators.store.store import Store

    store = Store(url)
    first = trace_page(store, PROJECT)
    day = START + dt.timedelta(days=3)
    week = [int((START + dt.timedelta(days=d)).replace(tzinfo=dt.timezone.utc).timestamp()) * 10**9 for d in (0, 7)]
    cases = [
        ("traffic counts (traces by state, decisions per rule)", "open", lambda: traffic(store, PROJECT), None),
        ("trace list, first page (50 newest)", "open", lambda: trace_page(store, PROJECT), None),
        ("trace list, next page", "filter", lambda: trace_page(store, PROJECT, before=first["next"]), None),
        ("filter: one day, 3 days back", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            since=day, until=day + dt.timedelta(days=1))), None),
        ("filter: state no content (3%)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            state="no_content")), None),
        ("filter: state late (0.1%)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(state="late")), None),
        ("filter: quality judged (9.4%)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            rule="quality", rule_version=1, decision="judged")), None),
        ("filter: quality failed (0.3%)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            rule="quality", rule_version=1, decision="failed")), None),
        ("filter: text 'the' (most rows)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(text="the")), None),
        (f"filter: text '{RARE}' (20 rows)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(text=RARE)),
         None),
        ("filter: failed + text 'python' + one day", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            since=day, until=day + dt.timedelta(days=1), rule="quality", rule_version=1, decision="failed",
            text="python")), None),
        ("filter: model gpt-4o (the page's slice, a third)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            model="gpt-4o")), None),
        ("filter: a span named 'retrieve' (none has one)", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            span="retrieve")), None),
        ("filter: judged coherence at most 1", "filter", lambda: trace_page(store, PROJECT, TraceFilter(
            metric="coherence", score_at_most=1.0)), None),
        ("one trace opened", "filter", lambda: trace_detail(store, PROJECT, first["rows"][10]["trace_id"]), None),
        ("rates over time: coherence, the week by the hour", "open", lambda: rate_series(
            store, PROJECT, "quality", None, "coherence", week[0], week[1], 3600)["points"], None),
        ("rates over time: coherence, the last day by 5 min", "filter", lambda: rate_series(
            store, PROJECT, "quality", None, "coherence", week[1] - 86_400 * 10**9, week[1], 300)["points"], None),
        ("rates over time: coherence, 3 days against the 3 before", "filter", lambda: list(map(compare_periods(
            store, PROJECT, "quality", "coherence", (week[1] - 6 * 86_400 * 10**9, week[1] - 3 * 86_400 * 10**9),
            (week[1] - 3 * 86_400 * 10**9, week[1])).get, ("before", "after"))), None),
        ("rates over time: violence (safety), the week by 6 hours", "filter", lambda: rate_series(
            store, PROJECT, "safety", None, "violence", week[0], week[1], 21_600)["points"], None),
        ("the page's first open, its defaults: every read (counts, list, the last 24 hours by the hour)", "open",
         lambda: first_open(store, week[1]), None),
        ("traffic per window: the week by the hour, quality's decisions", "open", lambda: traffic_series(
            store, PROJECT, week[0], week[1], 3600, "quality"), None),
        ("traffic per window: the last day by 5 min", "filter", lambda: traffic_series(
            store, PROJECT, week[1] - 86_400 * 10**9, week[1], 300, "quality"), None),
        ("slice pickers' values (models, services, versions), the week", "open", lambda: slice_values(
            store, PROJECT, week[0], week[1]), None),
        ("rates over time: coherence, the week by the hour, model gpt-4o", "filter", lambda: rate_series(
            store, PROJECT, "quality", None, "coherence", week[0], week[1], 3600, 30, Slice(model="gpt-4o"))["points"],
         None),
        ("deploy of 1.5.0: before against after (deploys + compare)", "filter", lambda: list(map(compare_periods(
            store, PROJECT, "quality", "coherence", *around_deploy(deploys(store, PROJECT, week[0], week[1]), "1.5.0",
                                                                   week[1])).get, ("before", "after"))), None),
    ]
    out = []
    for name, target, fn, _ in cases:
        cold, med, res = timed(fn, reps)
        shown = (f"{len(res['rows'])} rows" + (" (looked through 10,000)" if res.get("looked_to") else "")
                 if isinstance(res, dict) and "rows" in res else
                 f"{len(res)} windows, {sum(p['traces'] for p in res):,} traces" if isinstance(res, list) and res
                 and "traces" in res[0] else
                 f"{len(res)} windows, {sum(p['n'] for p in res):,} judged" if isinstance(res, list) else "")
        out.append((name, cold, med, shown, TARGETS[target]))
        print(f"{name:55s} first {cold:6.3f} s  median {med:6.3f} s  {shown:28s} target {TARGETS[target]} s "
              f"{'PASS' if med <= TARGETS[target] else 'FAIL'}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--keep", help="the SQLite store's folder (reused when it holds one)")
    ap.add_argument("--db", help="an empty PostgreSQL database's URL (built in it once; reused when it has traces)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wildbench", type=Path, default=wildbench.WILDBENCH,
                    help="the WildBench answers' folder (default ../shared/fixtures/wildbench/eval_results)")
    args = ap.parse_args()
    if not args.wildbench.exists():
        print(f"SKIPPED: {args.wildbench} is absent")
        return
    wildbench.WILDBENCH = args.wildbench
    if args.db:
        url = args.db
    else:
        home = Path(args.keep or tempfile.mkdtemp(prefix="evaldash-monitor-"))
        home.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{home / 'evals.db'}"
    from evaluators.store.store import Store

    if not Store(url).trace_counts(PROJECT)["traces"]:
        t = time.perf_counter()
        build(url, args.traces)
        print(f"built {args.traces:,} traces in {time.perf_counter() - t:.0f} s at {url}")
    else:
        print(f"reusing the store at {url}")
    measure(url, args.traces, args.reps)


if __name__ == "__main__":
    main()
