"""Planning a run: the row x metric tasks still to do (skipping what the store already has), their prompts
rendered and their cache keys, a chunk at a time so memory stays flat in the rows; and the run's progress."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from evaluators.data.dataset import Dataset
from evaluators.judge.config import JudgeConfig
from evaluators.core.registry import MetricSpec
from evaluators.core.tasks import default_row_tasks
from evaluators.run.spec import RunSpec, resolve_templates
from evaluators.store.schema import Result
from evaluators.judge.templates import Template
from evaluators.metrics.custom.bounded import RenderBoundError


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    errored: int = 0
    judge_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def eta_seconds(self) -> float | None:
        return eta_seconds(self.done + self.errored, self.total, time.monotonic() - self.started)


ETA_AFTER = 20  # results before a time left is said (the first ones come at once from the cache, or all together
# after one call's latency at any concurrency: a rate read from them is off by the concurrency either way)


def eta_seconds(finished: int, total: int, elapsed: float) -> float | None:
    """Time left at the rate so far; None until ``ETA_AFTER`` results (or a tenth of a smaller run) have come,
    and after the last."""
    if finished < min(ETA_AFTER, max(1, total // 10)) or finished >= total:
        return None
    return (total - finished) * elapsed / finished


@dataclass
class _Task:
    row: int
    spec: MetricSpec
    turn: int
    values: dict[str, Any]
    mode: str
    facts: dict[str, Any] | None = None
    record: dict[str, Any] | None = None  # the row's record, on single-turn classic tasks (for rows.jsonl)


def iter_tasks(ds: Dataset, spec: RunSpec, done: set, rows: set[int] | None = None,
               keep: Callable[[tuple[int, str, int]], bool] | None = None,
               values: bool = True) -> Iterator[_Task | Result]:
    """Walk the run's tasks lazily: a :class:`_Task` to do, or a skipped :class:`Result` to record
    (a conversation turn lacking a field). Nothing is rendered here.

    Classic metrics of single-turn rows come first, row by row, every classic metric of a row one
    after the other on one shared canonical record (read once per row, not once per metric); judge
    metrics follow, metric by metric and row by row.

    Args:
        ds: the dataset.
        spec: what to compute.
        done: (row, metric, turn) keys already settled.
        rows: restrict to these row indexes.
        keep: a further filter on (row, metric, turn) keys.
        values: False when the caller only counts or checks keys: single-turn classic tasks then carry
            no values (``values=None``), so no record is read for them.
    """
    specs = spec.specs()
    # single-turn rows with the default planner: one task per row and metric, never skipped
    rowwise = [s for s in specs if not s.is_judge and s.row_tasks is None] if ds.shape == "single" else []
    if rowwise:
        for i in range(len(ds)):
            if rows is not None and i not in rows:
                continue
            canonical = record = None
            for mspec in rowwise:
                key = (i, mspec.name, 0)
                if key in done or (keep is not None and not keep(key)):
                    continue
                if values and canonical is None:
                    canonical, record = ds.canonical(i), ds.records[i]
                yield _Task(i, mspec, 0, canonical, "single", record=record)
    for mspec in specs:
        if any(mspec is s for s in rowwise):
            continue
        planner = mspec.row_tasks or default_row_tasks
        for i in range(len(ds)):
            if rows is not None and i not in rows:
                continue
            for rt in planner(ds, i, mspec):
                key = (i, mspec.name, rt.turn)
                if key in done or (keep is not None and not keep(key)):
                    continue
                if rt.skip:
                    yield Result(i, mspec.name, rt.turn, "skipped", error=rt.skip)
                else:
                    yield _Task(i, mspec, rt.turn, rt.values, rt.mode, rt.facts)


def plan_tasks(ds: Dataset, spec: RunSpec, done: set, rows: set[int] | None = None) -> tuple[list[_Task], list[Result]]:
    """Tasks still to do, and skipped results to record (all of :func:`iter_tasks`, as lists)."""
    tasks, skipped = [], []
    for x in iter_tasks(ds, spec, done, rows):
        (skipped if isinstance(x, Result) else tasks).append(x)
    return tasks, skipped


def render_judge_tasks(tasks: list[_Task], spec: RunSpec,
                       templates: dict[str, dict[str, Template]] | None = None,
                       failed: list | None = None) -> list[tuple[_Task, Template, list[dict], str]]:
    """(task, template, chat messages, cache key) for each judge task.

    Args:
        templates: metric -> mode -> template already resolved (filled in as needed), so a run
            rendering chunk after chunk parses each template once.
        failed: where a task whose user template stopped at a bound (or failed) goes, as (task, template,
            RenderBoundError), left out of what is returned; without it the error is raised.
    """
    templates = {} if templates is None else templates
    for s in {t.spec for t in tasks}:
        if s.name not in templates:
            templates[s.name] = resolve_templates(s, spec.templates, spec.template_texts)
    out = []
    for t in tasks:
        template = templates[t.spec.name][t.mode]
        try:
            messages = template.render(t.values)
        except RenderBoundError as e:  # (a user's template only: ours are not bounded)
            if failed is None:
                raise
            failed.append((t, template, e))
            continue
        out.append((t, template, messages, cache_key(template, messages, spec.judge)))
    return out


def cache_key(template: Template, messages: list[dict], judge: JudgeConfig) -> str:
    blob = json.dumps([template.sha, messages, judge.identity()], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
