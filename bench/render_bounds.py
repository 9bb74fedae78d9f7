"""What rendering prompts costs a row, as a run renders them (``render_judge_tasks``, a chunk at a time): a
built-in template (coherence), our template's form as a user's metric (examples/metrics/politeness.md, size
checked) and a Prompty metric (examples/metrics/cites_policy.prompty, rendered in the bounded render process).

    .venv/bin/python bench/render_bounds.py [--rows 3000] [--reps 5]

Prints the median of ``reps`` passes, in microseconds a row. Measured at 3,000 rows (7 passes) on the shared
2-core machine (load average 14-18, so +-30%), twice each, before the bounds (29c49fd) and after: coherence 52
and 75 us before, 60 and 55 after (unchanged: ours are not bounded); politeness 37 and 50 before, 30 and 45
after (the size check); cites_policy 3,930 and 3,287 us before (a sandbox made and the body compiled every row),
993 and 637 after (compiled once in the render process; a row's round trip to it). Runs against whatever ``evaluators`` is first on
the path, so the code before a change can be measured the same way (``PYTHONPATH=/tmp/before``).
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("evaluators") is None:  # (PYTHONPATH may name another copy of the code: it is used)
    sys.path.insert(0, str(ROOT))

from evaluators.data.loading import load_dataset  # noqa: E402
from evaluators.judge.config import JudgeConfig  # noqa: E402
from evaluators.metrics.custom import register_metric_files  # noqa: E402
from evaluators.run.planning import plan_tasks, render_judge_tasks  # noqa: E402
from evaluators.run.spec import RunSpec  # noqa: E402

EXAMPLES = ROOT / "examples" / "metrics"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import json

    base = [json.loads(x) for x in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines() if x.strip()]
    rows = [{**base[i % len(base)], "policy_id": f"P-{i}"} for i in range(a.rows)]
    ds = load_dataset(rows)
    register_metric_files([str(EXAMPLES / "politeness.md"), str(EXAMPLES / "cites_policy.prompty")])
    judge = JudgeConfig(model="m", provider="compatible", base_url="http://127.0.0.1:9/v1")
    import evaluators

    print(f"{a.rows} rows, median of {a.reps} passes, code at {Path(evaluators.__file__).parent.parent}")
    for metric in ("coherence", "politeness", "cites_policy"):
        spec = RunSpec([metric], {}, judge)
        tasks, _ = plan_tasks(ds, spec, set())
        render_judge_tasks(tasks[:50], spec)  # warm: templates parsed, a render process started
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            for i in range(0, len(tasks), 500):  # the runner's chunks
                render_judge_tasks(tasks[i:i + 500], spec)
            times.append((time.perf_counter() - t) / len(tasks))
        print(f"  {metric:13s} {statistics.median(times) * 1e6:8.1f} us a row   "
              f"(passes {', '.join(f'{x * 1e6:.1f}' for x in times)})")


if __name__ == "__main__":
    main()
