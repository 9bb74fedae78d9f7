"""WildBench as a suite: import of published judgment files (eval-result files) as runs, and leaderboards
over runs. The rules themselves (inputs, length rule, aggregates) are in :mod:`evaluators.core.wb_rules`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from evaluators.core.wb_rules import (DEFAULT_LENGTH_PENALTY, LABEL_REWARD, PAIR_FIELDS, is_excluded, mixture,  # noqa: F401
                                      model_name, pair_reason, pair_rows_from_cells, score_aggregates,
                                      score_rows_from_cells, tags_of, PairRow, ScoreRow)


# ---------------------------------------------------------------- published eval-result files
class ImportFormatError(ValueError):
    """A file is not a WildBench eval-result file; the message names file, record and field."""


@dataclass
class EvalFile:
    """One WildBench eval-result file, read and checked."""

    path: str
    mode: str  # "score" | "pairwise"
    records: list[dict]
    judge: str | None = None
    problems: list[str] = field(default_factory=list)


def _judge_from_path(path: Path) -> str | None:
    for part in path.parts:
        if part.startswith("eval="):
            return part[5:]
    return None


def read_eval_file(path: str | Path) -> EvalFile:
    """Read a WildBench eval-result file (a JSON array, or JSON lines) and tell its mode.

    Score records need ``session_id``, ``model_test``, ``score`` and ``model_output``; pairwise records
    ``session_id``, ``model_A``, ``model_B``, ``winner``, ``extent`` and ``model_outputs``.

    Raises:
        ImportFormatError: unreadable file, or a record lacking a field (file, record and field named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ImportFormatError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ImportFormatError(f"{p}: not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as e:
            raise ImportFormatError(f"{p}: neither a JSON array nor JSON lines ({e})") from None
    if not isinstance(data, list) or not data:
        raise ImportFormatError(f"{p}: expected a non-empty array of records")
    first = data[0] if isinstance(data[0], dict) else {}
    mode = "pairwise" if "model_outputs" in first or "winner" in first else "score"
    need = (("session_id", "model_A", "model_B", "winner", "extent", "model_outputs") if mode == "pairwise"
            else ("session_id", "model_test", "score", "model_output"))
    for k, rec in enumerate(data, 1):
        if not isinstance(rec, dict):
            raise ImportFormatError(f"{p}: record {k} is not an object")
        missing = [f for f in need if f not in rec]
        if missing:
            raise ImportFormatError(f"{p}: record {k} ({rec.get('session_id', '?')}) lacks {', '.join(missing)}")
        texts = ("session_id", "model_A", "model_B", "winner") if mode == "pairwise" else ("session_id", "model_test")
        for f in texts + (("model_output",) if mode == "score" else ()):
            if not isinstance(rec[f], str):
                raise ImportFormatError(f"{p}: record {k}, field {f}: {rec[f]!r} is not text")
        if mode == "score":
            try:
                score = float(rec["score"])
            except (TypeError, ValueError):
                raise ImportFormatError(f"{p}: record {k}, field score: {rec['score']!r} is not a number") from None
            if not 1 <= score <= 10:
                raise ImportFormatError(f"{p}: record {k}, field score: {score:g} is outside 1-10")
        else:
            outs = rec["model_outputs"]
            if not isinstance(outs, dict) or rec["model_A"] not in outs or rec["model_B"] not in outs:
                raise ImportFormatError(f"{p}: record {k}, field model_outputs: needs the texts of model_A and model_B")
            if not all(isinstance(outs[m], str) for m in (rec["model_A"], rec["model_B"])):
                raise ImportFormatError(f"{p}: record {k}, field model_outputs: the outputs of model_A and model_B "
                                        "must be text")
            if rec["winner"] not in (rec["model_A"], rec["model_B"], "tie") or rec["extent"] not in (0, 1, 2):
                raise ImportFormatError(f"{p}: record {k}, fields winner/extent: {rec['winner']!r}/{rec['extent']!r} "
                                        "is not a verdict (winner model_A, model_B or tie; extent 0, 1 or 2)")
    return EvalFile(str(p), mode, data, _judge_from_path(p))


def pair_label(rec: dict) -> str:
    """A pairwise record's verdict as the judge's label (A = ``model_A``)."""
    if rec["winner"] == "tie" or rec["extent"] == 0:
        return "A=B"
    side = "A" if rec["winner"] == rec["model_A"] else "B"
    return side + "+" * int(rec["extent"])


def parsed_text(parsed: Any, key: str) -> str | None:
    if isinstance(parsed, str):
        try:
            parsed = json.loads(parsed)
        except ValueError:
            import ast

            try:
                parsed = ast.literal_eval(parsed)
            except (ValueError, SyntaxError):
                return None
    v = parsed.get(key) if isinstance(parsed, dict) else None
    return None if v is None else (v if isinstance(v, str) else json.dumps(v))


def leaderboard(results: Sequence[Any], length_penalty: int | None = None,
                default_models: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per model aggregates over runs' WildBench metrics (:class:`evaluators.read.results.RunResults`).

    Rows of one model from several runs are pooled (so several pairwise runs against different
    references give that model's mixture of rewards).

    Args:
        results: the runs' results.
        length_penalty: K for pairwise rewards; None uses each run's own (metric param).
        default_models: per run, the name for rows that do not name their model (default: "model").
    Returns:
        model -> {``WB_score``, ``WB_score_ci95``, ``records``, ``Length``, category scores ..} from
        ``wb_score`` metrics, and {``rewards`` (reference -> ``WB_reward``, counts ..),
        ``mixture_of_rewards`` (+ ``_ci95``), ``task_macro_reward``, ``pairwise_records``} from
        ``pairwise`` metrics (the model is ``model`` / ``model_A``).
    """
    scores: dict[str, list[ScoreRow]] = {}
    pairs: dict[int, dict[str, dict[str, list[PairRow]]]] = {}  # K -> model -> reference -> rows
    for n, res in enumerate(results):
        fallback = (default_models[n] if default_models else None) or "model"
        for spec in res.specs:
            ok = [c for c in res.cells[spec.name] if c and c.status == "ok"]
            if spec.kind == "wb_score":
                for c in ok:
                    scores.setdefault(str(c.outputs.get("model") or fallback), []).extend(
                        score_rows_from_cells([c], spec.primary))
            elif spec.kind == "pairwise":
                k = int(length_penalty if length_penalty is not None
                        else dict(spec.params).get("length_penalty", DEFAULT_LENGTH_PENALTY))
                for c in ok:
                    model = str(c.outputs.get("model_A") or fallback)
                    for ref, rows in pair_rows_from_cells([c]).items():
                        pairs.setdefault(k, {}).setdefault(model, {}).setdefault(ref, []).extend(rows)
    board: dict[str, dict[str, Any]] = {}
    for model, rows in scores.items():
        board.setdefault(model, {}).update(score_aggregates(rows))
    for k, models in pairs.items():
        for model, by_ref in models.items():
            mix = mixture(by_ref, k)
            entry = board.setdefault(model, {})
            entry.update({"pairwise_K": k, "rewards": mix["references"], "mixture_of_rewards": mix["mixture_of_rewards"],
                          "mixture_of_rewards_ci95": mix["mixture_of_rewards_ci95"],
                          "pairwise_records": sum(len(r) for r in by_ref.values())})
            if "task_macro_reward" in mix:
                entry["task_macro_reward"] = mix["task_macro_reward"]
    return board


# ---------------------------------------------------------------- import as runs
@dataclass
class ImportedRun:
    run_id: str
    path: str
    mode: str
    model: str
    records: int
    reference: str | None = None
    reused: bool = False


def _reference_of(ef: EvalFile) -> tuple[str, str]:
    """(tested model, reference model) of a pairwise file: the reference is named by a ``ref=NAME``
    folder (WildBench's layout), else the tested model by the file's name."""
    names = {rec["model_A"] for rec in ef.records} | {rec["model_B"] for rec in ef.records}
    p = Path(ef.path)
    ref = next((part[4:] for part in p.parts if part.startswith("ref=")), None)
    if ref is not None:
        hits = [n for n in names if model_name(n) == model_name(ref)]
        tested = [n for n in names if model_name(n) != model_name(ref)]
        if hits and len(set(map(model_name, tested))) == 1:
            return tested[0], hits[0]
    stem = [n for n in names if model_name(n) == p.stem]
    others = [n for n in names if model_name(n) != p.stem]
    if stem and len(set(map(model_name, others))) == 1:
        return stem[0], others[0]
    raise ImportFormatError(f"{p}: cannot tell the tested model from the reference among {', '.join(sorted(names))}; "
                            "keep the file under a ref=<reference> folder or name it <tested model>.json")


def _score_rows(ef: EvalFile, metric: str, meta: dict) -> tuple[list[dict], list, str, None]:
    """A score file's records as dataset rows and ``wildbench_score`` results (row i, turn 0)."""
    from evaluators.store.schema import Result

    records, results = [], []
    model = model_name(ef.records[0]["model_test"])
    for i, rec in enumerate(ef.records):
        out = rec["model_output"] or ""
        parsed = rec.get("parsed_result")
        row = {"session_id": rec["session_id"], "model": model_name(rec["model_test"]), "model_output": out}
        for extra in ("checklist", "primary_tag", "secondary_tags"):
            if extra in rec:
                row[extra] = rec[extra]
        records.append(row)
        score = float(rec["score"])
        strengths, weaknesses = parsed_text(parsed, "strengths"), parsed_text(parsed, "weaknesses")
        reason = "\n".join(x for x in (strengths and f"Strengths: {strengths}",
                                       weaknesses and f"Weaknesses: {weaknesses}") if x) or None
        outputs = {"wildbench_score": score, "wildbench_score_strengths": strengths,
                   "wildbench_score_weaknesses": weaknesses, "model": row["model"], "length": len(out),
                   "excluded": is_excluded(out), "groups": tags_of(rec)}
        results.append(Result(i, metric, 0, "ok", value=score, outputs=outputs, reason=reason,
                              raw=parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False),
                              meta=dict(meta)))
    return records, results, model, None


def _pair_rows(ef: EvalFile, metric: str, meta: dict) -> tuple[list[dict], list, str, str]:
    """A pairwise file's records as dataset rows (the tested model as A) and ``wildbench_pairwise`` results
    (turn 1 where the judge saw the tested model as B, with the judge's label as given)."""
    from evaluators.store.schema import Result

    records, results = [], []
    tested, ref = _reference_of(ef)
    model, reference = model_name(tested), model_name(ref)
    for i, rec in enumerate(ef.records):
        outs = rec["model_outputs"]
        a, b = outs.get(tested, ""), outs.get(ref, "")
        records.append({"session_id": rec["session_id"], "model_A": model, "model_B": reference,
                        "candidate_A": a, "candidate_B": b,
                        **{k: rec[k] for k in ("checklist", "primary_tag", "secondary_tags") if k in rec}})
        label = pair_label(rec)
        turn = 0 if rec["model_A"] == tested else 1
        parsed = rec.get("parsed_result")
        details = {short: parsed_text(parsed, long) for long, short in PAIR_FIELDS.items()}
        reason = pair_reason(details)
        outputs = {"wildbench_pairwise_reward": float(LABEL_REWARD[label]), "choice": label, **details,
                   "model_A": model, "model_B": reference, "len_A": len(a), "len_B": len(b),
                   "excluded": is_excluded(a) or is_excluded(b), "groups": tags_of(rec)}
        results.append(Result(i, metric, turn, "ok", value=float(LABEL_REWARD[label]), outputs=outputs,
                              reason=reason, raw=None if parsed is None else json.dumps(parsed, ensure_ascii=False),
                              meta=dict(meta)))
    return records, results, model, reference


def import_file(store: Any, path: str | Path, length_penalty: int = DEFAULT_LENGTH_PENALTY) -> ImportedRun:
    """Store one WildBench eval-result file as a completed run (dataset + per-row results), once.

    Score records become ``wildbench_score`` results; pairwise records ``wildbench_pairwise`` results
    oriented so that model A is the tested model (a record where the judge saw the tested model as B
    is stored as the swapped order, turn 1, with the judge's label as given).

    Raises:
        ImportFormatError: see :func:`read_eval_file`.
    """
    import hashlib

    from evaluators.data.dataset import Dataset
    from evaluators.judge.config import JudgeConfig
    from evaluators.core.registry import get_metric, spec_fingerprint
    from evaluators.run.spec import RunSpec
    from evaluators.store.schema import utcnow

    ef = read_eval_file(path)
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    metric = "wildbench_score" if ef.mode == "score" else "wildbench_pairwise"
    options = {} if ef.mode == "score" else {metric: {"length_penalty": int(length_penalty)}}
    spec = get_metric(metric).with_params(options.get(metric))
    meta = {"signature": spec.signature(), "model": ef.judge, "imported_from": str(path)}
    if ef.mode == "score":
        records, results, model, reference = _score_rows(ef, metric, meta)
        mapping = {"response": "model_output"}
    else:
        records, results, model, reference = _pair_rows(ef, metric, meta)
        mapping = {"response": "candidate_A"}
    name = Path(path).name
    ds = Dataset(name=f"WildBench {ef.mode}: {model}" + (f" vs {reference}" if reference else ""),
                 records=records, columns=list(dict.fromkeys(c for r in records for c in r)), mapping=mapping,
                 shape="single", source=name, detected="wildbench", row_numbers=list(range(1, len(records) + 1)))
    dataset_id = store.save_dataset(ds)
    for run in store.list_runs(dataset_id):
        if (run["spec"].get("imported") or {}).get("sha256") == sha:
            if options:  # the same judgments; only K may change, and it applies at read time
                store.update_run(run["id"], spec={**run["spec"], "options": options})
            return ImportedRun(run["id"], str(path), ef.mode, model, len(records), reference, reused=True)
    rspec = RunSpec([metric], judge=JudgeConfig(model=ef.judge or "unknown judge"), options=options)
    spec_dict = {**rspec.to_dict(), "imported": {"file": str(path), "sha256": sha, "judge": ef.judge}}
    label = f"WildBench {ef.mode} · {model}" + (f" vs {reference}" if reference else "") + \
        f" · judge {ef.judge or '?'} (imported)"
    rid = store.create_run(dataset_id, spec_dict, spec_fingerprint(spec_dict), label)
    store.write_results(rid, results)
    now = utcnow()
    store.update_run(rid, status="completed", started_at=now, finished_at=now, tasks_total=len(results),
                     tasks_done=len(results))
    return ImportedRun(rid, str(path), ef.mode, model, len(records), reference)


def import_files(store: Any, paths: Sequence[str | Path], length_penalty: int = DEFAULT_LENGTH_PENALTY
                 ) -> tuple[list[ImportedRun], dict[str, dict[str, Any]]]:
    """Import several files (all are read and checked before any is stored) and build the leaderboard.

    Returns:
        (the runs, model -> aggregates) where aggregates hold ``WB_score``, ``records`` .. from score
        files and ``rewards`` (reference -> ``WB_reward`` ..), ``mixture_of_rewards`` from pairwise files.
    """
    from evaluators.read.results import open_results

    for p in paths:
        ef = read_eval_file(p)  # fail before storing anything
        if ef.mode == "pairwise":
            _reference_of(ef)
    runs = [import_file(store, p, length_penalty) for p in paths]
    board = leaderboard([open_results(store, r.run_id) for r in runs], length_penalty)
    return runs, board
