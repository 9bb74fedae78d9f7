"""Evaluation engine: datasets, metrics, LLM judge, runs and results. Usable headless.

    >>> from evaluators import evaluate
    >>> res = evaluate("data/rag_single_turn.jsonl", ["f1_score", "rouge"])  # doctest: +SKIP
    >>> res.metrics["f1_score.f1_score"]  # doctest: +SKIP

The names below are imported when first used (PEP 562), not with the package: ``python -m
evaluators run`` reaches its judge before SQLAlchemy and the metrics are loaded.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evaluators.core import registry as _registry

_WHERE = {
    "evaluate": "api", "open_results": "read.results", "prepare_run": "api", "EvalResult": "api",
    "Dataset": "data.dataset", "load_dataset": "data.loading",
    "DataValidationError": "core.errors", "EvalError": "core.errors", "UsageError": "core.errors",
    "JudgeConfig": "judge.config",
    "MetricSpec": "core.registry", "all_metrics": "core.registry", "get_metric": "core.registry",
    "Runner": "run.runner", "RunSpec": "run.spec",
    "attack_compare": "suites.safety", "attack_records": "suites.safety", "fill_responses": "suites.safety",
    "Store": "store.store", "metric": "metrics.custom", "align": "review.align", "scan": "suites.redteam.scan",
    "Target": "run.target",
}

__all__ = ["evaluate", "open_results", "prepare_run", "EvalResult", "Dataset", "load_dataset", "JudgeConfig",
           "MetricSpec", "all_metrics", "get_metric", "Runner", "RunSpec", "Store", "EvalError", "UsageError",
           "DataValidationError", "attack_compare", "attack_records", "fill_responses", "metric", "align", "scan",
           "Target"]

# The composition root: the registry (bottom layer) is handed the built-in metrics' loader from here, the one
# place above every layer, so that no layer imports upward to reach the metrics.
def _builtin_metrics() -> None:
    from evaluators.metrics import load_builtins

    load_builtins()


def _installed_metrics() -> None:
    """Metrics installed packages declare under the ``evaluators.metrics`` entry point group."""
    from evaluators.metrics.custom import register_entry_points

    register_entry_points()


_registry.add_loader(_builtin_metrics)
_registry.add_loader(_installed_metrics, when_needed=True)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from evaluators.api import EvalResult, evaluate, prepare_run
    from evaluators.read.results import open_results
    from evaluators.data.dataset import Dataset
    from evaluators.data.loading import load_dataset
    from evaluators.core.errors import DataValidationError, EvalError, UsageError
    from evaluators.judge.config import JudgeConfig
    from evaluators.core.registry import MetricSpec, all_metrics, get_metric
    from evaluators.run.runner import Runner
    from evaluators.run.spec import RunSpec
    from evaluators.suites.safety import attack_compare, attack_records, fill_responses
    from evaluators.review.align import align
    from evaluators.store.store import Store
    from evaluators.metrics.custom import metric
    from evaluators.run.target import Target
    from evaluators.suites.redteam.scan import scan


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'evaluators' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
