"""What the CLI's commands share: exit codes, reading repeated ``NAME=VALUE`` options, the judge, jury and key
from run's options, the dataset checked before the judge is called, ``--fail-under`` gates and ``--max-errors``,
and the lines a finished run prints. :mod:`evaluators.cli.main` and each subcommand's module import from here,
never from one another (no import cycle, lazy imports counted: tests/test_layers.py).
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from evaluators.cli import wildbench as cli_wildbench
from evaluators.cli.text import say, say_table
from evaluators.core.errors import UsageError

if TYPE_CHECKING:
    from evaluators.judge.config import JudgeConfig

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GATE, EXIT_CANCELLED, EXIT_FAILED = 0, 1, 2, 3, 4, 5


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for v in values or []:
        if "=" not in v:
            raise UsageError(f"{what} takes NAME=VALUE, got '{v}'")
        k, val = v.split("=", 1)
        out[k.strip()] = val.strip()
    return out


def _floats(values: list[str] | None, what: str) -> dict[str, float]:
    out = {}
    for k, v in _pairs(values, what).items():
        try:
            out[k] = float(v)
        except ValueError:
            raise UsageError(f"{what} {k}: '{v}' is not a number") from None
    return out


def _judge_from_args(a) -> "JudgeConfig":
    from evaluators.judge.config import JudgeConfig

    if a.judge:
        given = [f for f, v in (("--judge-base-url", a.judge_base_url), ("--judge-model", a.judge_model),
                                ("--judge-provider", a.judge_provider), ("--judge-api-key-env", a.judge_api_key_env))
                 if v]
        if given:
            raise UsageError(f"--judge {a.judge[0]} sets the judge's URL, model and key; drop {', '.join(given)}")
        if len(set(a.judge)) != len(a.judge):
            raise UsageError("--judge: a judge is named twice (use --repeat to ask one judge several times)")
        return JudgeConfig(judge_name=a.judge[0], temperature=a.temperature, max_tokens=a.max_tokens, seed=a.seed,
                           timeout=a.timeout, max_retries=a.retries, concurrency=a.concurrency, rpm=a.rpm,
                           tpm=a.tpm).resolved()
    provider = a.judge_provider or ("compatible" if a.judge_base_url else
                                    "azure" if os.environ.get("AZURE_OPENAI_ENDPOINT") else "openai")
    return JudgeConfig(model=a.judge_model or "gpt-4o-mini", provider=provider, base_url=a.judge_base_url,
                       temperature=a.temperature, max_tokens=a.max_tokens, seed=a.seed, timeout=a.timeout,
                       max_retries=a.retries, concurrency=a.concurrency, rpm=a.rpm, tpm=a.tpm)


def _jury_from_args(a, judge: "JudgeConfig") -> list["JudgeConfig"]:
    """The further judges of a jury (``--judge`` after the first), with the run judge's settings."""
    return [judge.with_(judge_name=name, base_url=None, azure_endpoint=None).resolved()
            for name in (a.judge or [])[1:]]


def key_from_env(flag: str, var: str | None) -> str | None:
    """The key the variable ``var`` (given with ``flag``) holds in this process's environment; None without one.
    A variable named but not set is refused, naming it (never a run without the key its user meant to give)."""
    if not var:
        return None
    key = os.environ.get(var)
    if not key:
        raise UsageError(f"{flag}: the environment variable {var} is not set")
    return key


def _api_key_from_args(a) -> str | None:
    """The key named by --judge-api-key-env, read from this process's environment."""
    return key_from_env("--judge-api-key-env", a.judge_api_key_env)


def _gate_key(name: str, metrics: dict) -> str:
    from evaluators.core.registry import get_metric

    if name in metrics:
        return name
    if "." not in name:
        spec = get_metric(name)
        return f"{spec.name}.{spec.primary}"
    metric, key = name.split(".", 1)
    if key == "pass_rate":
        return f"{metric}.{get_metric(metric).prefix}_pass_rate"
    raise UsageError(f"--fail-under: no aggregate '{name}'; e.g. {next(iter(metrics), 'bleu.bleu_score')}")


def check_gates(gates: dict[str, float], metric_names: list[str]) -> dict[str, str]:
    """gate name -> the metrics.json key it reads, checked before anything runs.

    Raises:
        UsageError: a name that is no aggregate of the chosen metrics.
    """
    if not gates:
        return {}  # (without loading the results code, which a run without gates loads later)
    from evaluators.data.dataset import Dataset
    from evaluators.core.registry import get_metric
    from evaluators.read.results import RunResults

    specs = [get_metric(m) for m in metric_names]
    empty = Dataset(name="", records=[], columns=[], mapping={}, shape="single", source="", detected="",
                    row_numbers=[])
    keys = RunResults(empty, [], specs).metrics()  # every key metrics.json will have, values aside
    out = {}
    for name in gates:
        key = _gate_key(name, keys)
        if key not in keys:
            raise UsageError(f"--fail-under: no aggregate '{name}' among the chosen metrics "
                             f"({', '.join(metric_names)}); e.g. {next(iter(keys), 'bleu.bleu_score')}")
        out[name] = key
    return out


def parse_max_errors(text: str) -> tuple[float, bool]:
    """``3`` -> (3, False) (a count); ``5%`` -> (0.05, True) (a share of the rows measured)."""
    t = text.strip()
    try:
        if t.endswith("%"):
            share = float(t[:-1]) / 100
            if 0 <= share <= 1:
                return share, True
        else:
            n = int(t)
            if n >= 0:
                return float(n), False
    except ValueError:
        pass
    raise UsageError(f"--max-errors takes a count (3) or a share (5%), got '{text}'")


def errors_breach(summary: dict, limit: tuple[float, bool]) -> str | None:
    """Why a gate's metric errored beyond the limit (errored and unscored rows count), or None."""
    bad = summary["errored_rows"] + summary.get("pending_rows", 0)
    measured = summary["scored_rows"] + bad
    value, is_share = limit
    over = (measured and bad / measured > value) if is_share else bad > value
    if not over:
        return None
    allowed = f"{value:.1%}" if is_share else f"{value:g}"
    return f"{bad} of {measured} rows errored or unscored (--max-errors {allowed})"


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def finished_line(store, rid: str, out_dir: str, metrics: dict) -> dict:
    """Print the run's end state as every view says it ("completed with errors" when cells errored) and, for
    such a run, add ``run.status`` and ``run.errored_tasks`` to ``metrics.json`` (written again in place), so a
    CI job reading the file alone cannot take it for a clean run. Returns the metrics as written."""
    import json
    from pathlib import Path

    from evaluators.read.exports import write_atomic
    from evaluators.read.results import status_text

    run = store.get_run(rid)
    shown = status_text(run)
    say(f"run {rid}: {shown}; wrote {out_dir.rstrip('/') or out_dir}/rows.jsonl and metrics.json")
    if shown == run["status"]:
        return metrics
    merged = {**metrics, "run.status": shown, "run.errored_tasks": run["tasks_errored"]}
    write_atomic(Path(out_dir) / "metrics.json", json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return merged


def print_summary(res, out=None) -> None:
    out = out or sys.stdout  # the stream in force now, not the one at import (a test's may be closed)
    rows = [("metric", "scored", "errored", "skipped", "pending", "mean", "95% CI", "pass rate")]
    for s in res.specs:
        sm = res.summary(s)
        lo, hi = sm[f"{s.primary}_ci95"]
        ci = "-" if lo is None else f"{lo:.3f}-{hi:.3f}"
        rows.append((s.name, str(sm["scored_rows"]), str(sm["errored_rows"]), str(sm["skipped_rows"]),
                     str(sm.get("pending_rows", 0)), _fmt(sm[s.primary]), ci,
                     "-" if sm["pass_rate"] is None else f"{sm['pass_rate']:.1%}"))
    say_table(rows, out)


def _checked_dataset(a, metrics: list[str], judge: "JudgeConfig", thresholds: dict[str, float],
                     api_key: str | None):
    """The dataset, loaded and checked with the run's settings as :func:`evaluators.api.prepare_run` checks
    them, without importing the store: whatever would be refused is refused before the judge's check leaves.

    Returns:
        (the dataset, whether a chosen metric needs the judge).
    """
    from evaluators.data.loading import load_dataset_streaming, metric_fields
    from evaluators.core.registry import get_metric
    from evaluators.run.spec import RunSpec

    # a JSON-lines file is checked, not held; a column no chosen metric reads never refuses a row
    ds = load_dataset_streaming(a.data, _pairs(a.map, "--map"),
                                fields=metric_fields(metrics, _pairs(a.template, "--template")))
    if not metrics:
        raise UsageError("choose at least one metric")
    ds.check_metrics(metrics)
    judged = any(get_metric(m).is_judge for m in metrics)
    spec = RunSpec(metrics=list(dict.fromkeys(metrics)), thresholds=dict(thresholds),
                   judge=judge.for_storage() if judged else None, templates=_pairs(a.template, "--template"),
                   options={m: dict(v) for m, v in cli_wildbench.run_options(a).items()}, repeat=a.repeat,
                   jury=[j.for_storage() for j in _jury_from_args(a, judge)] if judged else [])
    for name in spec.templates:
        get_metric(name)  # an unknown metric is named before its template file is looked for
    spec.read_templates()
    spec.validate()
    if judged:
        from evaluators.judge.config import resolve_api_key

        resolve_api_key(judge, api_key)  # no key where one is needed: said now, with no call made
    return ds, judged


def _gates_breached(res, metrics_out: dict, gates: dict, gate_keys: dict, max_errors) -> list[str]:
    """What each --fail-under gate breached: a value under its floor, or too many rows out of it."""
    breached = []
    specs = {s.name: s for s in res.specs}
    for name, floor in gates.items():
        key = gate_keys[name]
        value = metrics_out.get(key)
        if value is None or value < floor:
            breached.append(f"{key} = {_fmt(value)} < {floor:g}")
        # means and rates leave errored rows out: a gate also fails when too many rows are out
        why = errors_breach(res.summary(specs[key.split(".", 1)[0]]), max_errors)
        if why:
            breached.append(f"{key.split('.', 1)[0]}: {why}")
    return breached
