"""The Python API: what the CLI and the dashboard call."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evaluators.data.dataset import Dataset
from evaluators.data.loading import load_dataset_streaming, metric_fields
from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig
from evaluators.core.registry import get_metric
from evaluators.read.results import RunResults, open_results  # noqa: F401  (public: evaluators.open_results)
from evaluators.run.planning import Progress
from evaluators.run.runner import Runner
from evaluators.run.spec import RunSpec
from evaluators.store.store import Store


def _juror(judge: Any, concurrency: int | None) -> JudgeConfig:
    """A jury's further judge: a name is a judge configured on this machine (judges.toml)."""
    return JudgeConfig(judge_name=judge) if isinstance(judge, str) else _judge_config(judge, concurrency)


def _judge_config(judge: Any, concurrency: int | None) -> JudgeConfig | None:
    if judge is None:
        cfg = None
    elif isinstance(judge, JudgeConfig):
        cfg = judge
    elif isinstance(judge, Mapping):
        cfg = JudgeConfig.from_dict(dict(judge))
    elif isinstance(judge, str):
        cfg = JudgeConfig(model=judge)
    else:
        raise UsageError(f"judge must be a JudgeConfig, a dict or a model name, not {type(judge).__name__}")
    if cfg is not None and concurrency:
        cfg = cfg.with_(concurrency=int(concurrency))
    return cfg


def prepare_run(store: Store, data: Any, metrics: list[str], judge: Any = None,
                thresholds: Mapping[str, float] | None = None, column_mapping: Mapping[str, str] | None = None,
                templates: Mapping[str, str] | None = None, concurrency: int | None = None,
                out_dir: str | None = None, name: str | None = None, resume: bool = True,
                options: Mapping[str, Mapping[str, Any]] | None = None,
                on_checked: Callable[[], Any] | None = None, repeat: int = 1, jury: Sequence[Any] = (),
                cost: Mapping[str, Any] | None = None, metric_files: Sequence[Any] = ()) -> str:
    """Validate everything, store the dataset, and create (or find, to resume) a run.

    Args:
        store: the store.
        data: anything :func:`evaluators.data.loading.load_dataset` takes, or a stored dataset id (``ds:<id>``).
        metrics: metric names.
        judge: a :class:`JudgeConfig`, its dict, or a model name.
        templates: metric -> path of the user's template; its text is read now and stored with the run.
        options: metric -> {param: value} for this run (see ``RunSpec.options``).
        out_dir: with ``resume``, an unfinished run with the same data and settings is continued.
        on_checked: called once everything was checked, before the dataset is stored (the CLI sends
            the judge's check from there, so it is under way while the rows are written).
        repeat: ask each judge task this many times (``RunSpec.repeat``).
        jury: further judges (configs, dicts or configured names) asked every judge task (``RunSpec.jury``).
        cost: ``prices`` (model -> price dict), ``budget`` (USD), ``batch`` (bool), ``estimate``: kept in the
            run's spec (see ``RunSpec``); on a resume they replace the run's (a raised budget goes on).
        metric_files: your own metrics' files (``[NAME=]PATH``), registered before anything is checked.
    Returns:
        The run id.
    Raises:
        UsageError, DataValidationError: before anything is stored.
    """
    if metric_files:
        from evaluators.metrics.custom import register_metric_files

        register_metric_files(list(metric_files))
    stored_id = None
    if isinstance(data, str) and data.startswith("ds:"):
        stored_id = data[3:]
        ds = store.open_dataset(stored_id)  # read as it is walked, not loaded whole
    else:
        # a JSON-lines file is checked and stored, never held; a column no chosen metric reads never refuses a row
        ds = load_dataset_streaming(data, column_mapping, fields=metric_fields(metrics, templates or {}))
    if not metrics:
        raise UsageError("choose at least one metric")
    ds.check_metrics(metrics)
    cfg = _judge_config(judge, concurrency) if any(get_metric(m).is_judge for m in metrics) else None
    spec = RunSpec(metrics=list(dict.fromkeys(metrics)), thresholds=dict(thresholds or {}),
                   # a named judge is kept by name: its URL is read at run time, and one pointed elsewhere is refused
                   judge=cfg.for_storage() if cfg else None, templates=dict(templates or {}),
                   options={m: dict(v) for m, v in (options or {}).items()}, repeat=int(repeat),
                   jury=[_juror(j, concurrency).for_storage() for j in jury] if cfg else [],
                   prices=dict((cost or {}).get("prices") or {}), budget=(cost or {}).get("budget"),
                   batch=bool((cost or {}).get("batch")), estimate=(cost or {}).get("estimate"),
                   batch_retry="direct" if (cost or {}).get("batch_direct_retry") else "batch",
                   target=(cost or {}).get("target"))
    for name in spec.templates:
        get_metric(name)  # an unknown metric is named before its template file is looked for
    spec.read_templates()  # the text, kept with the run: a resume uses it whoever resumes
    spec.validate()
    if on_checked is not None:
        on_checked()
    dataset_id = stored_id or store.save_dataset(ds)
    fp = spec.fingerprint()
    out = str(Path(out_dir).resolve()) if out_dir else None
    if out and resume:
        rid = store.find_run_for_out_dir(out, dataset_id, fp)
        if rid:
            store.update_run(rid, spec=spec.to_dict())  # new thresholds or concurrency apply on resume
            return rid
    return store.create_run(dataset_id, spec.to_dict(), fp, name or f"{ds.name} · {', '.join(spec.metrics)}", out)


@dataclass
class EvalResult:
    """What :func:`evaluate` returns: ``rows`` (DataFrame, SDK keys), ``metrics`` (dict)."""

    run_id: str
    status: str
    results: RunResults

    @property
    def rows(self):
        return self.results.frame()

    @property
    def metrics(self) -> dict[str, Any]:
        return self.results.metrics()


def evaluate(data: Any, metrics: list[str], judge: Any = None, thresholds: Mapping[str, float] | None = None,
             column_mapping: Mapping[str, str] | None = None, *, store: Store | None = None,
             api_key: str | None = None, concurrency: int | None = None, templates: Mapping[str, str] | None = None,
             out: str | Path | None = None, on_progress: Callable[[Progress], None] | None = None,
             options: Mapping[str, Mapping[str, Any]] | None = None, repeat: int = 1,
             jury: Sequence[Any] = (), metric_files: Sequence[Any] = (),
             cost: Mapping[str, Any] | None = None, target: Any = None) -> EvalResult:
    """Evaluate a dataset headless.

    Args:
        data: path, DataFrame, list of dicts or :class:`Dataset`.
        metrics: metric names, e.g. ``["f1_score", "coherence"]``.
        judge: judge settings for judge metrics (:class:`JudgeConfig`, dict or model name).
        thresholds: metric -> pass threshold.
        column_mapping: field -> column, e.g. ``{"query": "question"}``.
        store: defaults to ``EVAL_DATABASE_URL`` or the local SQLite file.
        api_key: the judge's key for this call only (else from the environment).
        options: metric -> {param: value}, e.g. ``{"wildbench_pairwise": {"length_penalty": -1}}``.
        out: also write ``rows.jsonl`` and ``metrics.json`` there (and resume a run written there).
        repeat: ask each judge task this many times; the row's value combines the judgments.
        jury: further judges asked every judge task; the row's value is the jurors' median (labels: majority).
        metric_files: your own metrics' files (``.md``, ``.prompty``, ``.py``, ``.json``; ``NAME=PATH`` renames).
        cost: ``prices`` and ``budget`` (USD the run stops before exceeding), as :func:`prepare_run` takes them.
        target: answers the rows first (``data`` may then hold questions only): a function, as the Azure SDK's
            ``target`` (called with the row's columns its parameters name, or all of them for ``**kwargs``; the
            keys of the dict it returns become columns ``target.<key>``, mapped with ``"${target.response}"`` in
            ``column_mapping``, by default ``target.response`` to response), or a
            :class:`evaluators.run.target.Target` (a model asked once a row, through the store's call cache;
            ``api_key`` is then the target's).
    Returns:
        :class:`EvalResult` with ``.rows`` and ``.metrics``.
    """
    from evaluators.read.exports import write_outputs

    store = store or Store()
    if target is not None:
        data, column_mapping, facts = _answered(store, data, target, column_mapping, api_key, cost)
        api_key = None if not callable(target) else api_key  # a Target's key is not the judge's
        cost = {**(cost or {}), "target": facts} if facts else cost
    rid = prepare_run(store, data, metrics, judge, thresholds, column_mapping, templates, concurrency,
                      out_dir=str(out) if out else None, options=options, repeat=repeat, jury=jury,
                      metric_files=metric_files, cost=cost)
    status = Runner(store, rid, api_key=api_key, on_progress=on_progress).run()
    res = open_results(store, rid)
    if out:
        write_outputs(out, res.rows(), res.metrics())
    return EvalResult(rid, status, res)


__all__ = ["evaluate", "prepare_run", "open_results", "EvalResult", "Dataset", "JudgeConfig", "Store"]


# Completion tokens a verdict is estimated to take (one figure for the estimate, the budget and the bench).
def _answered(store: Store, data: Any, target: Any, column_mapping: Mapping[str, str] | None, api_key: str | None,
              cost: Mapping[str, Any] | None) -> tuple[list[dict], dict[str, str] | None, dict | None]:
    """``data``'s rows with the target's answers, the column mapping with the SDK's ``${target.x}`` /
    ``${data.x}`` references read as columns, and what a model target cost (None for a function)."""
    from evaluators.judge.prices import price_for
    from evaluators.run.target import answer_rows, call_rows, question_rows, target_facts

    mapping = {f: _column_ref(c) for f, c in (column_mapping or {}).items()}
    if isinstance(data, (str, Path)):
        records, asked = question_rows(data, {f: c for f, c in mapping.items() if not c.startswith("target.")})
    else:
        records, asked = [dict(r) for r in data], {"query": mapping.get("query", "query")}
    if not callable(target):
        price = price_for(target.config.model, (cost or {}).get("prices"))
        usage = answer_rows(store, records, asked, target, api_key, price=price, budget=(cost or {}).get("budget"))
        if usage.failed:
            i, why = next(iter(sorted(usage.failed.items())))
            raise UsageError(f"the target did not answer {len(usage.failed)} of {len(records)} rows (first: row "
                             f"{i + 1}: {why}); call again to ask only those")
        return (records, {f: c for f, c in mapping.items() if not c.startswith("target.")} or None,
                target_facts(target, usage))
    call_rows(records, target)
    if "response" not in mapping and records and "target.response" in records[0]:
        mapping["response"] = "target.response"
    return records, mapping, None


def _column_ref(ref: str) -> str:
    """The SDK's ``${target.response}`` is our column ``target.response``; ``${data.question}`` is ``question``."""
    ref = ref.strip()
    if ref.startswith("${") and ref.endswith("}"):
        inner = ref[2:-1].strip()
        return inner[len("data."):] if inner.startswith("data.") else inner
    return ref


from evaluators.judge.prices import VERDICT_TOKENS  # noqa: E402

ESTIMATE_SAMPLE = 200  # a Prompty metric's rows rendered for an estimate (the rest scaled from them)


def estimate_run(store: Store, dataset: Dataset, spec: RunSpec) -> dict[str, Any]:
    """What a run will cost before it starts: judge calls (net of the cache), tokens, past latency, USD.

    Returns:
        dict with ``judge_calls``, ``cached``, ``classic_values``, ``skipped_turns``, ``prompt_tokens``
        (the rendered prompts counted with the judge model's tokenizer: :mod:`evaluators.judge.tokens`),
        ``completion_tokens`` (``VERDICT_TOKENS`` a call), ``latency_s`` (median of this model's recorded
        calls, or None), ``tokenizer`` (how the prompts were counted), ``by_metric`` (metric -> its calls and
        tokens) and ``usd`` (at the run's or the operator's price for the model, halved as the Batch API
        charges when ``spec.batch``; None with no price known). A Prompty metric's figures on more than
        ``ESTIMATE_SAMPLE`` rows are scaled from that many rows' (its rows render in a bounded process).
    """
    from evaluators.judge.prices import price_for
    from evaluators.judge.tokens import tokenizer_for
    from evaluators.run.planning import plan_tasks, render_judge_tasks

    tasks, skipped = plan_tasks(dataset, spec, set())
    judged = [t for t in tasks if t.spec.is_judge]
    # A Prompty metric's rows are rendered in a bounded process, a second a row at worst: the estimate (made
    # merely by ticking the metric) renders a sample of them, evenly spread, and scales its figures.
    scale: dict[str, float] = {}
    for name in {t.spec.name for t in judged if (t.spec.templates.inline or ("",))[0] == "prompty"}:
        mine = [t for t in judged if t.spec.name == name]
        if len(mine) > ESTIMATE_SAMPLE:
            keep = {id(mine[i * len(mine) // ESTIMATE_SAMPLE]) for i in range(ESTIMATE_SAMPLE)}
            judged = [t for t in judged if t.spec.name != name or id(t) in keep]
            scale[name] = len(mine) / ESTIMATE_SAMPLE
    rendered = render_judge_tasks(judged, spec, failed=[]) if judged else []  # (unrenderable rows: no call)
    hits = store.cache_get_many([r[3] for r in rendered])
    tok = tokenizer_for(spec.judge.model if spec.judge else None)
    by_metric: dict[str, dict[str, float]] = {}
    cached = 0.0
    for r in rendered:
        weight = scale.get(r[0].spec.name, 1.0)
        if r[3] in hits:
            cached += weight
            continue
        m = by_metric.setdefault(r[0].spec.name, {"judge_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        m["judge_calls"] += weight
        m["prompt_tokens"] += tok.count_messages(r[2]) * weight
        m["completion_tokens"] += VERDICT_TOKENS * weight
    by_metric = {k: {f: round(v) for f, v in m.items()} for k, m in by_metric.items()}
    calls = sum(m["judge_calls"] for m in by_metric.values())
    price = price_for(spec.judge.model, spec.prices) if spec.judge else None
    for m in by_metric.values():
        m["usd"] = price.cost(m["prompt_tokens"], m["completion_tokens"], batch=spec.batch) if price else None
    prompt = sum(m["prompt_tokens"] for m in by_metric.values())
    return {"judge_calls": calls, "cached": round(cached), "classic_values": sum(not t.spec.is_judge for t in tasks),
            "skipped_turns": len(skipped), "prompt_tokens": prompt, "completion_tokens": calls * VERDICT_TOKENS,
            "latency_s": store.median_latency_s(spec.judge.model) if spec.judge else None,
            "tokenizer": tok.describe(), "by_metric": by_metric,
            "usd": price.cost(prompt, calls * VERDICT_TOKENS, batch=spec.batch) if price else None}
