"""``run`` with a target (issue 36): the questions answered by each variant of the experiment (every
``--target-prompt`` with every ``--target-model``), each variant's answers judged as a run of its own, named
"experiment · variant"; then every variant compared with the first on the same rows, with the paired tests of
the Compare page (McNemar's exact test on pass/fail, the paired bootstrap's interval), said in sentences and kept
in ``DIR/experiment.json``. One variant is a plain run in ``DIR``."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from evaluators.cli import target as cli_target
from evaluators.cli.text import say


def run(a, metrics: list[str], run_data: Callable[[Any, list[str]], int], compare: bool = True) -> int:
    """Answer, then judge, each variant; ``run_data(a, metrics)`` runs (or, for ``submit``, queues: ``compare``
    False) one answered file and sets ``a.run_id``. The exit code is the first variant's that is not 0, else 0."""
    targets = cli_target.variants(a)
    if not targets:  # --target-callback: one function answers, then one run
        a.data, code = cli_target.answer_file(a, metrics)
        return code if a.data is None else run_data(a, metrics)
    several, done, codes = len(targets) > 1, [], []
    for target, prompt_file in targets:
        b = cli_target.for_variant(a, target, prompt_file, several)
        if several and not a.quiet:
            say(f"== variant {target.name}", file=sys.stderr)
        b.data, code = cli_target.answer_file(b, metrics)
        if b.data is not None:
            code = run_data(b, metrics)
            done.append((target.name, b.run_id, b.out))
        codes.append(code)
    if compare and several and len(done) > 1:
        compare_variants(a, done)
    return next((c for c in codes if c), 0)


def compare_variants(a, done: list[tuple[str, str, str]]) -> None:
    """Every variant against the first, metric by metric (printed; ``DIR/experiment.json``)."""
    from evaluators.api import open_results
    from evaluators.read.exports import write_atomic
    from evaluators.read.paired import paired_differences
    from evaluators.store.store import Store

    store = Store(a.db)
    (base_name, base_id, _), others = done[0], done[1:]
    base = open_results(store, base_id)
    out: dict[str, Any] = {"experiment": cli_target.experiment_name(a), "baseline": base_name,
                           "variants": [{"name": n, "run_id": rid, "out": str(d)} for n, rid, d in done],
                           "comparisons": []}
    say(f"experiment {out['experiment']}: each variant against {base_name} on the same rows")
    for name, rid, _ in others:
        diffs = paired_differences(base, open_results(store, rid), label=name, base_label=base_name)
        for d in diffs:
            say(f"  {d['sentence']}")
            rate = d.get("rate")
            out["comparisons"].append({
                "variant": name, "metric": d["metric"], "rows": d["rows"], "measure": d.get("measure"),
                "difference": None if rate is None else rate.diff, "ci95_low": None if rate is None else rate.low,
                "ci95_high": None if rate is None else rate.high, "p_value": None if rate is None else rate.p_value,
                "test": None if rate is None else rate.test, "sentence": d["sentence"]})
    write_atomic(Path(a.out) / "experiment.json", json.dumps(out, indent=1, ensure_ascii=False) + "\n")
