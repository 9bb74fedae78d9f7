"""``python -m evaluators review import|export`` and ``agreement``: people's verdicts on a run, and how far
the judge agrees with them.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes as there.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterator

from evaluators.core.errors import UsageError

FILE_FIELDS = ("id", "metric", "reviewer", "value", "agree", "note")
EXPORT_FIELDS = ("id", "metric", "reviewer", "value", "agree", "note", "time", "judge_value")


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
    g = sub.add_parser("agreement", help="judge-human agreement and rates corrected by the reviews")
    g.add_argument("run_id")
    g.add_argument("--json", action="store_true", help="one JSON object with the metrics.json keys")
    g.add_argument("--threshold", action="append", metavar="METRIC=VALUE", help="read the run at another threshold")
    g.add_argument("--db")


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSONL or CSV file of verdicts."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".csv":
        for n, rec in enumerate(csv.DictReader(io.StringIO(text)), start=2):
            yield n, {k: (v if v != "" else None) for k, v in rec.items() if k is not None}
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}: line {n}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise UsageError(f"{path}: line {n}: expected an object with id, metric, reviewer and value")
        yield n, rec


def _truth(raw: Any) -> bool:
    text = str(raw).strip().lower()
    if raw is True or text in ("true", "1", "yes"):
        return True
    if raw is False or text in ("false", "0", "no"):
        return False
    raise ValueError(f"agree must be true or false, got {raw!r}")


def read_verdicts(store, run_id: str, path: Path) -> list[dict[str, Any]]:
    """A file's verdicts checked against the run (row ids, metrics, each value on its metric's scale) and
    turned into reviews; raises UsageError naming the file, line and field of the first bad one."""
    from evaluators.read.view import open_view
    from evaluators.review.scales import parse_value, reviewable, snap

    view = open_view(store, run_id)
    specs = {s.name: s for s in view.specs if reviewable(s)}
    ds = view.dataset
    ids = _row_ids(store, run_id, ds)
    out = []
    for n, rec in _lines(path):
        where = f"{path}: line {n}"
        for f in ("id", "metric", "reviewer"):
            if rec.get(f) in (None, ""):
                raise UsageError(f"{where}: field '{f}' is missing")
        row = ids.get(str(rec["id"]))
        if row is None:
            raise UsageError(f"{where}: field 'id': no row {rec['id']!r} in run {run_id}")
        spec = specs.get(str(rec["metric"]))
        if spec is None:
            raise UsageError(f"{where}: field 'metric': {rec['metric']!r} is not a judged metric of run {run_id} "
                             f"({', '.join(specs) or 'none'})")
        judge = view.values(spec.name)[row]
        judge = None if judge != judge else float(judge)
        try:
            if rec.get("value") not in (None, ""):
                value, agreed = parse_value(spec, rec["value"]), False
            elif rec.get("agree") not in (None, ""):
                agreed = _truth(rec["agree"])
                if judge is None:
                    raise ValueError("the judge gave this row no value to agree with")
                if agreed:
                    value = snap(spec, judge)
                elif spec.kind == "label":  # a yes/no verdict that is not the judge's is the other one
                    value = 1.0 - snap(spec, judge)
                else:
                    raise ValueError(f"agree=false does not say which of {spec.name}'s values is right; "
                                     "give 'value' instead")
            else:
                raise ValueError("give 'value' or 'agree'")
        except ValueError as e:
            field = "value" if rec.get("value") not in (None, "") else "agree"
            raise UsageError(f"{where}: field '{field}': {e}") from None
        out.append(dict(row_idx=row, metric=spec.name, reviewer=str(rec["reviewer"]), value=value, agreed=agreed,
                        note=rec.get("note") or None, judge_value=judge))
    return out


def _row_ids(store, run_id: str, ds) -> dict[str, int]:
    """The file's ``id`` -> row index: by the dataset's ``id`` column when it has one, else the row number."""
    if "id" in ds.columns:
        return {str(v): i for i, v in store.dataset_texts(store.get_run(run_id)["dataset_id"], ["id"])}
    return {str(ds.row_no(i)): i for i in range(len(ds))}


def cmd_review(a) -> int:
    from evaluators.cli.main import EXIT_OK
    from evaluators.store.store import Store

    store = Store(a.db)
    store.get_run(a.run_id)
    if a.review_command == "import":
        path = Path(a.file)
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        verdicts = read_verdicts(store, a.run_id, path)
        for metric in {v["metric"] for v in verdicts}:  # the judgment each verdict was checked against
            times = store.judged_times(a.run_id, metric, [v["row_idx"] for v in verdicts if v["metric"] == metric])
            for v in verdicts:
                if v["metric"] == metric:
                    v["judged_at"] = times.get(v["row_idx"])
        n = store.save_reviews(a.run_id, verdicts)  # one transaction: all or none
        print(f"stored {n} verdict{'s' if n != 1 else ''} on run {a.run_id} "
              f"({len({v['row_idx'] for v in verdicts})} rows, {len({v['reviewer'] for v in verdicts})} reviewers)")
        return EXIT_OK
    return _export(store, a.run_id, Path(a.out))


def _export(store, run_id: str, out: Path) -> int:
    from evaluators.cli.main import EXIT_OK
    from evaluators.read.exports import neutralise, write_atomic
    from evaluators.read.view import open_view

    ds = open_view(store, run_id).dataset
    ids = {i: k for k, i in _row_ids(store, run_id, ds).items()}
    recs = [{"id": ids.get(r["row_idx"]), "metric": r["metric"], "reviewer": r["reviewer"], "value": r["value"],
             "agree": r["agreed"], "note": r["note"], "time": r["created_at"].isoformat(timespec="seconds"),
             "judge_value": r["judge_value"]} for r in store.reviews(run_id) if r["value"] is not None]
    if out.suffix.lower() == ".csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows({k: neutralise(v) for k, v in r.items()} for r in recs)
        write_atomic(out, buf.getvalue())
    else:
        write_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    print(f"wrote {out}: {len(recs)} verdict{'s' if len(recs) != 1 else ''}")
    return EXIT_OK


def cmd_agreement(a) -> int:
    from evaluators.cli.main import EXIT_OK, _floats
    from evaluators.read.view import open_view
    from evaluators.review import agreement
    from evaluators.review.stats import flat
    from evaluators.store.store import Store

    store = Store(a.db)
    view = open_view(store, a.run_id, _floats(a.threshold, "--threshold"))
    found = agreement(store, a.run_id, results=view)
    specs = {s.name: s for s in view.specs}
    if a.json:
        keys = {k: v for name, g in found.items() if g.verdicts for k, v in flat(specs[name], g).items()}
        print(json.dumps(keys, indent=2))
        return EXIT_OK
    if not any(g.verdicts for g in found.values()):
        print(f"run {a.run_id}: no verdicts yet (review rows in the dashboard, or `review import`)")
        return EXIT_OK
    for name, g in found.items():
        if not g.verdicts:
            continue
        print(f"{name}: {g.sentence()}")
        print(f"  {g.reviewed_rows} reviewed rows, {g.verdicts} verdicts" +
              (f", {g.stale_rows} reviewed against an earlier judgment" if g.stale_rows else ""))
        for label, (v, lo, hi) in (("Cohen's kappa (pass/fail)", g.kappa), ("weighted kappa (scale)", g.weighted_kappa),
                                   ("Spearman's rho", g.spearman)):
            if v is not None:
                print(f"  {label}: {v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""))
        if g.alpha is not None:
            print(f"  Krippendorff's alpha between reviewers: {g.alpha:.3f} on {g.alpha_rows} rows")
        if g.confusion:
            (ff, fp), (pf, pp) = g.confusion
            print(f"  judge fail / human fail {ff}, judge fail / human pass {fp}, "
                  f"judge pass / human fail {pf}, judge pass / human pass {pp}")
    return EXIT_OK


def add_review_keys(store, run_id: str, out_dir: str, metrics: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """``metrics.json`` with the agreement keys added (written again in place) when the dataset brought
    verdicts (``human_<metric>`` columns); ``metrics`` unchanged otherwise."""
    from evaluators.review import HUMAN_PREFIX, agreement_keys

    if not any(c.startswith(HUMAN_PREFIX) for c in columns):
        return metrics
    from evaluators.read.exports import write_atomic

    merged = {**metrics, **agreement_keys(store, run_id)}
    write_atomic(Path(out_dir) / "metrics.json", json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return merged


COMMANDS = {"review": cmd_review, "agreement": cmd_agreement}
