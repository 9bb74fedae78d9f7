"""``python -m evaluators review import|export`` and ``agreement``: people's verdicts on a run, and how far
the judge agrees with them.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError
from evaluators.cli.text import say


def add_commands(sub) -> None:
    r = sub.add_parser("review", help="import or export people's verdicts on a run's rows")
    rs = r.add_subparsers(dest="review_command", required=True)
    i = rs.add_parser("import", help="store verdicts from a JSONL or CSV file (id, metric, reviewer, value or agree, note)")
    i.add_argument("run_id")
    i.add_argument("file")
    i.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")
    e = rs.add_parser("export", help="write every verdict of a run (JSONL, or CSV by the file's extension)")
    e.add_argument("run_id")
    e.add_argument("--out", required=True)
    e.add_argument("--db")
    g = sub.add_parser("agreement", help="judge-human agreement and rates corrected by the reviews; with a "
                                         "second run of the same rows, judge-judge agreement and paired differences")
    g.add_argument("run_id")
    g.add_argument("other_run_id", nargs="?", help="another run of the same rows (another judge, model or prompt)")
    g.add_argument("--json", action="store_true", help="one JSON object with the metrics.json keys")
    g.add_argument("--threshold", action="append", metavar="METRIC=VALUE", help="read the run at another threshold")
    g.add_argument("--db")


def cmd_review(a) -> int:
    from evaluators.cli.common import EXIT_OK
    from evaluators.store.store import Store

    store = Store(a.db)
    try:
        store.get_run(a.run_id)
    except KeyError:
        raise UsageError(f"no run {a.run_id!r} in this store (a run's id is what `run` prints, and the Results "
                         "page's address says run=ID)") from None
    if a.review_command == "import":
        path = Path(a.file)
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        from evaluators.review.io import read_verdicts

        found = read_verdicts(store, a.run_id, path)
        verdicts = found.verdicts
        for metric in {v["metric"] for v in verdicts}:  # the judgment each verdict was checked against
            times = store.judged_times(a.run_id, metric, [v["row_idx"] for v in verdicts if v["metric"] == metric])
            for v in verdicts:
                if v["metric"] == metric:
                    v["judged_at"] = times.get(v["row_idx"])
        n = store.import_reviews(a.run_id, verdicts)  # one transaction: all or none
        say(_import_summary(a.run_id, n, found.duplicates, verdicts))
        return EXIT_OK
    return _export(store, a.run_id, Path(a.out))


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _import_summary(run_id: str, n: dict[str, int], duplicates: int, verdicts: list[dict[str, Any]]) -> str:
    """What an import did, counted as it happened: "stored 3 verdicts on run R (2 new, 1 replacing the
    reviewer's earlier one); 4 already stored as given; 1 duplicate line ignored (5 rows, 2 reviewers)"."""
    stored = n["new"] + n["changed"]
    parts = [f"stored {_count(stored, 'verdict')} on run {run_id}"
             + (f" ({n['new']:,} new, {n['changed']:,} replacing the reviewer's earlier one)" if n["changed"] else "")]
    if n["unchanged"]:
        parts.append(f"{n['unchanged']:,} already stored as given")
    if duplicates:
        parts.append(f"{_count(duplicates, 'duplicate line')} ignored")
    return ("; ".join(parts) + f" ({_count(len({v['row_idx'] for v in verdicts}), 'row')}, "
            f"{_count(len({v['reviewer'] for v in verdicts}), 'reviewer')})")


def _export(store, run_id: str, out: Path) -> int:
    from evaluators.cli.common import EXIT_OK
    from evaluators.read.exports import write_atomic
    from evaluators.review.io import export_records, export_text

    recs = export_records(store, run_id)
    write_atomic(out, export_text(recs, out.suffix.lower() == ".csv"))
    say(f"wrote {out}: {len(recs)} verdict{'s' if len(recs) != 1 else ''}")
    return EXIT_OK


def cmd_agreement(a) -> int:
    from evaluators.cli.common import EXIT_OK, _floats
    from evaluators.read.view import open_view
    from evaluators.review import agreement
    from evaluators.review.stats import flat
    from evaluators.store.store import Store

    store = Store(a.db)
    view = open_view(store, a.run_id, _floats(a.threshold, "--threshold"))
    if a.other_run_id:
        return _two_runs(view, open_view(store, a.other_run_id, _floats(a.threshold, "--threshold")), a)
    found = agreement(store, a.run_id, results=view)
    specs = {s.name: s for s in view.specs}
    if a.json:
        keys = {k: v for name, g in found.items() if g.verdicts for k, v in flat(specs[name], g).items()}
        say(json.dumps(keys, indent=2))
        return EXIT_OK
    if not any(g.verdicts for g in found.values()):
        say(f"run {a.run_id}: no verdicts yet (review rows in the dashboard, or `review import`)")
        return EXIT_OK
    for name, g in found.items():
        if not g.verdicts:
            continue
        say(f"{name}: {g.sentence()}")
        say(f"  {g.reviewed_rows} reviewed rows, {g.verdicts} verdicts" +
              (f", {g.stale_rows} reviewed against an earlier judgment" if g.stale_rows else ""))
        for label, (v, lo, hi) in (("Cohen's kappa (pass/fail)", g.kappa), ("weighted kappa (scale)", g.weighted_kappa),
                                   ("Spearman's rho", g.spearman)):
            if v is not None:
                say(f"  {label}: {v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""))
        if g.alpha is not None:
            say(f"  Krippendorff's alpha between reviewers: {g.alpha:.3f} on {g.alpha_rows} rows")
        if g.confusion:
            (ff, fp), (pf, pp) = g.confusion
            say(f"  judge fail / human fail {ff}, judge fail / human pass {fp}, "
                  f"judge pass / human fail {pf}, judge pass / human pass {pp}")
    return EXIT_OK


def _two_runs(base, other, a) -> int:
    """``agreement RUN_A RUN_B``: per shared metric the paired difference of B against A, and where both
    are judged, how far the two judges agree."""
    from evaluators.cli.common import EXIT_OK
    from evaluators.read.paired import judges_agreement, paired_differences

    if len(base) != len(other):
        raise UsageError(f"run {a.run_id} has {len(base)} rows and run {a.other_run_id} {len(other)}: "
                         "compare runs of the same rows")
    diffs = paired_differences(base, other, label=f"run {a.other_run_id}")
    judges = judges_agreement(base, other)
    if a.json:
        out: dict[str, Any] = {}
        for d in diffs:
            r = d.get("rate")
            if r is None:
                continue
            stem = f"{d['metric']}.{d['measure'].replace(' ', '_')}"
            out.update({f"{stem}_diff": r.diff, f"{stem}_diff_ci95_low": r.low, f"{stem}_diff_ci95_high": r.high,
                        f"{stem}_diff_p_value": r.p_value, f"{stem}_diff_rows_needed": r.rows_needed,
                        f"{d['metric']}.paired_rows": d["rows"]})
            if d.get("mean") is not None:
                m = d["mean"]
                out.update({f"{d['metric']}.mean_diff": m.diff, f"{d['metric']}.mean_diff_ci95_low": m.low,
                            f"{d['metric']}.mean_diff_ci95_high": m.high, f"{d['metric']}.mean_diff_p_value": m.p_value})
        for name, g in judges.items():
            for key in ("kappa", "weighted_kappa", "spearman"):
                v, lo, hi = g[key]
                out.update({f"{name}.judges_{key}": v, f"{name}.judges_{key}_ci95_low": lo,
                            f"{name}.judges_{key}_ci95_high": hi})
        say(json.dumps(out, indent=2))
        return EXIT_OK
    for d in diffs:
        say(d["sentence"])
    for name, g in judges.items():
        parts = [f"{label} {g[key][0]:.3f}" + (f" [{g[key][1]:.3f}, {g[key][2]:.3f}]" if g[key][1] is not None else "")
                 for key, label in (("kappa", "kappa"), ("weighted_kappa", "weighted kappa"), ("spearman", "rho"))
                 if g[key][0] is not None]
        say(f"{name}: judges agree on {100 * g['agree']:.1f}% of {g['rows']} rows; " + ", ".join(parts))
    return EXIT_OK


def add_review_keys(store, run_id: str, out_dir: str, metrics: dict[str, Any], columns: list[str],
                    several: bool = False) -> dict[str, Any]:
    """``metrics.json`` with the keys of people's verdicts (when the dataset brought ``human_<metric>``
    columns) and of several judgments per task (``several``: ``--repeat`` or a jury) added, written again in
    place; unchanged otherwise."""
    from evaluators.review import HUMAN_PREFIX, agreement_keys

    reviewed = any(c.startswith(HUMAN_PREFIX) for c in columns)
    if not reviewed and not several:
        return metrics
    from evaluators.read.exports import write_atomic
    from evaluators.read.repeats import repeat_keys
    from evaluators.read.view import open_view

    view = open_view(store, run_id)
    merged = {**metrics, **(agreement_keys(store, run_id, results=view) if reviewed else {}),
              **(repeat_keys(view) if several else {})}
    write_atomic(Path(out_dir) / "metrics.json", json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return merged


COMMANDS = {"review": cmd_review, "agreement": cmd_agreement}
