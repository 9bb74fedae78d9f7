"""A round of monitor rules (``python -m evaluators monitor rule run``): each rule's traces decided, then its pending
ones judged through the engine (api.evaluate, a layer above evaluators.monitor, so handed to it from here)."""
from __future__ import annotations

from evaluators.cli.text import say


def rule_round(store, project: str | None, name: str | None) -> int:
    """Decide and judge for each rule asked for; returns how many rules there were."""
    from evaluators.monitor.rules import decide, judge_pending

    n = 0
    for proj in [project] if project else store.monitor_projects():
        for rule in [r for r in store.monitor_rules(proj) if name in (None, r["name"])]:
            n += 1
            decided = decide(store, proj, rule)
            done = judge_pending(store, proj, rule, engine(store, rule))
            if decided or done["judged"] or done["failed"]:
                say(f"rule {rule['name']!r} v{rule['version']} of {proj!r}: {decided:,} traces decided; "
                      f"{done['judged']:,} judged, {done['failed']:,} failed", flush=True)
    return n


def engine(store, rule):
    """The engine's run (api.evaluate: the judge client, cache, retries, rate limits) over a rule's rows."""
    import os

    from sqlalchemy import select

    from evaluators.api import evaluate
    from evaluators.core.errors import UsageError
    from evaluators.store.schema import ResultRow

    def judge_rows(rows, rule):
        key = None
        if rule["key_env"]:
            key = os.environ.get(rule["key_env"])
            if not key:
                raise UsageError(f"the rule's judge key variable {rule['key_env']} is not set here")
        res = evaluate(rows, rule["metrics"], judge=rule["judge"], store=store, api_key=key)
        with store.session() as s:
            errs = s.execute(select(ResultRow.row_idx, ResultRow.error).where(
                ResultRow.run_id == res.run_id, ResultRow.status == "error")).all()
        return res.run_id, {i: e or "error" for i, e in errs}
    return judge_rows
