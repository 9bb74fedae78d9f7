"""Verdicts in files: read (JSONL or CSV, one verdict a line: ``id``, ``metric``, ``reviewer``, ``value`` or
``agree``, optional ``note``) and written (the same, plus the time and the judge value each answered)."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluators.core.errors import MAX_PROBLEMS, DataValidationError, ProblemCollector, UsageError
from evaluators.core.scales import parse_value, reviewable, scale, snap
from evaluators.data.reading import max_upload_bytes, read_records
from evaluators.read.exports import neutralise
from evaluators.read.view import open_view
from evaluators.store.reviews import note_problem, reviewer_problem, shown
from evaluators.store.store import Store

EXPORT_FIELDS = ("id", "metric", "reviewer", "value", "agree", "note", "time", "judge_value")


MAX_VALUE_CHARS = 40  # a value given as text is a number or a pairwise label ("A++"): longer is not a verdict


@dataclass
class Verdicts:
    """A file's verdicts, checked: ``verdicts`` to store (one per row, metric and reviewer), and how many
    lines repeated an earlier line's verdict word for word (``duplicates``; not stored twice)."""

    verdicts: list[dict[str, Any]]
    duplicates: int = 0


class _Problems:
    """Every problem of a verdict file (up to MAX_PROBLEMS), named by line (JSON lines) or row (CSV, the
    records under the header, as a dataset's rows are counted) and field; raised at once as one UsageError."""

    def __init__(self, path: Path, csv_format: bool):
        self.path, self.unit = path, "row" if csv_format else "line"
        self.collector = ProblemCollector(str(path))

    def add(self, n: int, field: str, why: str) -> None:
        self.collector.add(n, field, why)

    def _line(self, p) -> str:
        where = ", ".join(x for x in (f"{self.unit} {p.row}" if p.row else "", f"field '{p.field}'" if p.field else "") if x)
        return f"{where}: {p.message}" if where else p.message

    def raise_if_any(self) -> None:
        found = sorted(self.collector.problems, key=lambda p: p.row)
        if not found:
            return
        if len(found) == 1:
            raise UsageError(f"{self.path}: {self._line(found[0])}; nothing was stored")
        more = f" (stopped after {MAX_PROBLEMS})" if self.collector.truncated else ""
        raise UsageError(f"{self.path}: {len(found)} problems{more}, nothing was stored: "
                         + "; ".join(self._line(p) for p in found))


def _records(path: Path, problems: _Problems) -> list[tuple[int, dict[str, Any]]]:
    """(line or row, record) of a JSONL or CSV file of verdicts, read as a dataset file is (binary data,
    broken encodings, values too long or nested too deep are problems of their line)."""
    size = path.stat().st_size
    if size > max_upload_bytes():
        raise UsageError(f"{path}: {size:,} bytes; a file of verdicts may be at most {max_upload_bytes():,} "
                         "(EVAL_MAX_UPLOAD_MB)")
    try:
        records, numbers = read_records(path.read_bytes(), str(path), "csv" if problems.unit == "row" else "jsonl",
                                        problems.collector)
    except DataValidationError:  # the file as a whole (binary, empty): its problems are the collector's
        problems.raise_if_any()
        raise
    return list(zip(numbers, records))


def _truth(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in ("true", "1", "yes") or (type(raw) is int and raw == 1):
        return True
    if text in ("false", "0", "no") or (type(raw) is int and raw == 0):
        return False
    raise ValueError(f"must be true or false, got {shown(raw)}")


def _value(spec, raw: Any) -> float:
    """A verdict's value on ``spec``'s scale: a number, or text naming one (a label also true/false)."""
    if not isinstance(raw, (str, int, float)) or (isinstance(raw, str) and len(raw) > MAX_VALUE_CHARS):
        raise ValueError(f"{shown(raw)} is not one of {', '.join(c.name for c in scale(spec))}")
    return parse_value(spec, raw)


def _key_text(rec: dict[str, Any], field: str, problems: _Problems, n: int) -> str | None:
    """A required text field (``id`` may be a whole number too), or None with its problem added."""
    raw = rec.get(field)
    if raw is None or raw == "":
        problems.add(n, field, "is missing")
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        problems.add(n, field, f"must be text{' or a whole number' if field == 'id' else ''}, got {shown(raw)}")
        return None
    return str(raw)


def read_verdicts(store, run_id: str, path: Path) -> Verdicts:
    """A file's verdicts checked against the run (row ids, metrics, each value on its metric's scale) and by
    the store's own check (:func:`evaluators.store.reviews.verdict_problems`: the reviewer's name, the note),
    turned into reviews. A line repeating an earlier one's verdict is counted, not kept twice.

    Raises:
        UsageError: naming the file, and the line and field of every problem (up to 50); then nothing may
            be stored.
    """
    problems = _Problems(path, path.suffix.lower() == ".csv")
    found = _records(path, problems)
    view = open_view(store, run_id)
    specs = {s.name: s for s in view.specs if reviewable(s)}
    ids = _row_ids(store, run_id, view.dataset)
    out: dict[tuple, tuple[int, dict[str, Any]]] = {}
    duplicates = 0
    for n, rec in found:
        v = _verdict(rec, n, run_id, view, specs, ids, problems)
        if v is None:
            continue
        key = (v["row_idx"], v["metric"], v["reviewer"])
        if key in out:
            first, earlier = out[key]
            if all(earlier[k] == v[k] for k in ("value", "agreed", "note")):
                duplicates += 1
            else:
                problems.add(n, "", f"the same id, metric and reviewer as {problems.unit} {first} with another "
                                    "verdict; keep one of them")
            continue
        out[key] = (n, v)
    problems.raise_if_any()
    return Verdicts([v for _, v in out.values()], duplicates)


def _verdict(rec: dict[str, Any], n: int, run_id: str, view, specs: dict, ids: dict[str, int],
             problems: _Problems) -> dict[str, Any] | None:
    """Line ``n``'s verdict, or None with its problems added."""
    before = len(problems.collector.problems)
    rid, metric = _key_text(rec, "id", problems, n), _key_text(rec, "metric", problems, n)
    reviewer = rec.get("reviewer")
    why = "is missing" if reviewer is None or reviewer == "" else reviewer_problem(reviewer)
    if why:
        problems.add(n, "reviewer", why)
    why = note_problem(rec.get("note"))
    if why:
        problems.add(n, "note", why)
    row = None if rid is None else ids.get(rid)
    if rid is not None and row is None:
        problems.add(n, "id", f"no row {shown(rid)} in run {run_id}")
    spec = None if metric is None else specs.get(metric)
    if metric is not None and spec is None:
        problems.add(n, "metric", f"{shown(metric)} is not a judged metric of run {run_id} ({', '.join(specs) or 'none'})")
    if row is None or spec is None:
        return None
    judge = view.values(spec.name)[row]
    judge = None if judge != judge else float(judge)
    field = "value" if rec.get("value") not in (None, "") else "agree"
    try:
        if field == "value":
            value, agreed = _value(spec, rec["value"]), False
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
        problems.add(n, field, str(e))
        return None
    if len(problems.collector.problems) > before:
        return None
    return dict(row_idx=row, metric=spec.name, reviewer=reviewer, value=value, agreed=agreed,
                note=rec.get("note") or None, judge_value=judge)


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


def review_keys(store: Store, run_id: str, res, rows) -> dict[int, dict[str, Any]]:
    """Row index -> what people said of it, as keys beside the SDK's in a row export (``write_export``'s
    ``extra``), for each metric reviewed there: ``reviews.M.verdicts`` (each reviewer's value, its pass or fail
    at the view's threshold, note), ``reviews.M.result`` (pass or fail of their consensus, the value the agreement
    figures use) and ``reviews.M.agrees_with_judge`` (None where the judge gave no verdict).

    Args:
        res: the run's results with the view's thresholds (``RunResults``).
        rows: the row indices of one chunk of the export.
    """
    from collections import defaultdict

    from evaluators.review.stats import _consensus

    specs = {s.name: s for s in res.specs}
    given: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for r in store.reviews(run_id, rows=rows):
        if r["value"] is not None and r["metric"] in specs:
            given[(r["row_idx"], r["metric"])].append(r)
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for (i, m), verdicts in given.items():
        spec, threshold = specs[m], res.thresholds[m]

        def word(v: float) -> str:
            return "pass" if spec.passes(v, threshold) else "fail"

        result = word(_consensus(spec, [r["value"] for r in verdicts]))
        judge = res.passed(spec, res.cell(m, i))
        out[i].update({f"reviews.{m}.verdicts": [{"reviewer": r["reviewer"], "value": r["value"], "result": word(r["value"]),
                                                  "note": r["note"]} for r in verdicts],
                       f"reviews.{m}.result": result,
                       f"reviews.{m}.agrees_with_judge": None if judge is None else judge == (result == "pass")})
    return out

