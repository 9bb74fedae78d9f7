"""Trying a metric on a few rows before saving it (the dashboard's New metric page): each row's rendered prompt,
the judge's reply and the parsed value, or why there is none, in words. Nothing is stored or cached."""
from __future__ import annotations

import asyncio
from typing import Any

from evaluators.core.asyncrun import run_to_end
from evaluators.core.errors import UsageError
from evaluators.core.registry import MetricSpec, missing_fields
from evaluators.data.dataset import Dataset
from evaluators.judge.client import JudgeClient, JudgeError
from evaluators.judge.config import JudgeConfig
from evaluators.metrics.custom.bounded import RenderBoundError
from evaluators.run.spec import resolve_templates

TRIAL_ROWS = 5


def try_metric(ds: Dataset, spec: MetricSpec, judge: JudgeConfig | None, api_key: str | None = None,
               rows: int = TRIAL_ROWS) -> list[dict[str, Any]]:
    """The first ``rows`` rows' trial: dicts with ``row``, ``prompt`` (the messages as text), ``reply``,
    ``value`` and ``error`` (a sentence; None when the value was read). A computed metric has no prompt."""
    lacking = missing_fields(spec, ds.shape, ds.readable())
    if lacking:
        raise UsageError(f"{spec.name} reads {', '.join(lacking)}, which {ds.name} does not have; pick another "
                         "dataset or other fields")
    planner = spec.row_tasks
    tasks = []
    for i in range(min(rows, len(ds))):
        rts = planner(ds, i, spec) if planner else []
        tasks.append((i, rts[0] if rts else None))
    if not spec.is_judge:
        out = []
        for i, rt in tasks:
            try:
                value, error = spec.compute(rt.values)[spec.primary], None
            except Exception as e:  # noqa: BLE001 — the user's function failed on this row: said, not raised
                value, error = None, f"{type(e).__name__}: {e}"
            out.append({"row": ds.row_no(i), "prompt": None, "reply": None, "value": value, "error": error})
        return out
    tpl = resolve_templates(spec, {})["single" if ds.shape == "single" else "turn"]

    async def go() -> list[dict[str, Any]]:
        client = JudgeClient(judge.resolved(), api_key)
        try:
            return list(await asyncio.gather(*[one(client, i, rt) for i, rt in tasks]))
        finally:
            await client.aclose()

    async def one(client: JudgeClient, i: int, rt) -> dict[str, Any]:
        out: dict[str, Any] = {"row": ds.row_no(i), "prompt": None, "reply": None, "value": None, "error": None}
        if rt is None or rt.skip:
            out["error"] = f"not judged: {rt.skip if rt else 'the row has nothing to judge'}"
            return out
        try:
            messages = tpl.render(rt.values)
        except RenderBoundError as e:  # a loop without end, a prompt of gigabytes: this row's error, said
            out["error"] = f"the prompt could not be rendered: {e}"
            return out
        out["prompt"] = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
        try:
            reply = await client.complete(messages, extra=tpl.request_params())
        except JudgeError as e:
            out["error"] = f"the judge call failed: {e}"
            return out
        out["reply"] = reply.text
        try:
            verdict = spec.parse_reply(reply.text)
        except ValueError as e:
            out["error"] = f"the reply could not be read: {e}"
            return out
        out["value"] = verdict.outputs.get(spec.primary)
        out["reason"] = verdict.reason
        return out

    return run_to_end(go())
