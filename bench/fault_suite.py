"""The fault suite as a report: what was injected, how each task ended, and whether a retry of the
failed rows then matches a fault-free run.

    python bench/fault_suite.py [--rows 1000]

Same set-up as tests/test_faults.py: the loopback judge in its own process injects 20% 429
(half with Retry-After), 5% 500, 2% hangs past the 0.5 s client timeout, 5% malformed and
1% poison replies; 3 judge metrics; concurrency 32; 4 retries with millisecond backoff.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluators import JudgeConfig, Store, open_results, prepare_run  # noqa: E402
from evaluators.run.runner import Runner  # noqa: E402
from tests.judge_server import JudgeServerProcess  # noqa: E402
from tests.test_faults import FAULTS, METRICS, _rows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    args = ap.parse_args()
    data = _rows(args.rows)
    cfg = dict(model="m", provider="compatible", timeout=0.5, max_retries=4, backoff_base=0.005,
               backoff_max=0.02, concurrency=32)
    with tempfile.TemporaryDirectory() as tmp:
        with JudgeServerProcess(faults=FAULTS) as server:
            store = Store(f"sqlite:///{tmp}/f.db")
            rid = prepare_run(store, data, METRICS, judge=JudgeConfig(base_url=server.url, **cfg))
            t = time.perf_counter()
            status = Runner(store, rid).run()
            took = time.perf_counter() - t
            stats = server.stats()
            results = store.load_results(rid)
            errored = [r for r in results if r.status == "error"]
            print(f"{args.rows} rows x {len(METRICS)} judge metrics = {args.rows * len(METRICS)} tasks; "
                  f"run {status} in {took:.1f} s")
            print(f"server saw {stats['calls']} judging calls + {stats['probes']} judge check; faults served:")
            for kind, n in sorted(stats["served"].items(), key=lambda kv: -kv[1]):
                print(f"  {kind:<16} {n:>5}  ({n / max(1, stats['calls'] + stats['probes']):.1%})")
            print(f"stored results {len(results)} (ok {len(results) - len(errored)}, errored {len(errored)}, "
                  f"each with its reason: {all(r.error for r in errored)})")
            kinds: dict[str, int] = {}
            for r in errored:
                k = r.error.split(":")[0][:60]
                kinds[k] = kinds.get(k, 0) + 1
            for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
                print(f"  {n:>5}  {k}")
            server.set_faults(None)
            store.clear_errors(rid)
            Runner(store, rid, rows={r.row_idx for r in errored}).run()
            faulted = open_results(store, rid).metrics()
        with JudgeServerProcess() as clean:
            store2 = Store(f"sqlite:///{tmp}/c.db")
            rid2 = prepare_run(store2, data, METRICS, judge=JudgeConfig(base_url=clean.url, **cfg))
            Runner(store2, rid2).run()
            reference = open_results(store2, rid2).metrics()
    print(f"after retrying the failed rows: aggregates equal a fault-free run's: {faulted == reference}; "
          f"scored {[faulted[f'{m}.scored_rows'] for m in METRICS]}")


if __name__ == "__main__":
    main()
