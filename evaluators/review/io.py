"""Verdicts in files: read (JSONL or CSV, one verdict a line: ``id``, ``metric``, ``reviewer``, ``value`` or
``agree``, optional ``note``) and written (the same, plus the time and the judge value each answered)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterator

from evaluators.core.errors import UsageError
from evaluators.read.exports import neutralise
from evaluators.read.view import open_view
from evaluators.core.scales import parse_value, reviewable, snap
from evaluators.store.store import Store

EXPORT_FIELDS = ("id", "metric", "reviewer", "value", "agree", "note", "time", "judge_value")


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


def export_records(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Every verdict of a run in the file format, with its time and the judge value it answered."""
    ds = open_view(store, run_id).dataset
    ids = {i: k for k, i in _row_ids(store, run_id, ds).items()}
    return [{"id": ids.get(r["row_idx"]), "metric": r["metric"], "reviewer": r["reviewer"], "value": r["value"],
             "agree": r["agreed"], "note": r["note"], "time": r["created_at"].isoformat(timespec="seconds"),
             "judge_value": r["judge_value"]} for r in store.reviews(run_id) if r["value"] is not None]


def export_text(records: list[dict[str, Any]], csv_format: bool) -> str:
    """Records as JSON lines, or as CSV (cells a spreadsheet would run as a formula neutralised)."""
    if not csv_format:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows({k: neutralise(v) for k, v in r.items()} for r in records)
    return buf.getvalue()
