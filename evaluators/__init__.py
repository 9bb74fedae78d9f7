"""Evaluation engine: datasets, metrics, LLM judge, runs and results. Usable headless.

    >>> from evaluators import evaluate
    >>> res = evaluate("data/rag_single_turn.jsonl", ["f1_score", "rouge"])  # doctest: +SKIP
    >>> res.metrics["f1_score.f1_score"]  # doctest: +SKIP
"""
from .api import EvalResult, evaluate, open_results, prepare_run
from .data import Dataset, load_dataset
from .errors import DataValidationError, EvalError, UsageError
from .judge import JudgeConfig
from .registry import MetricSpec, all_metrics, get_metric
from .runner import Runner, RunSpec
from .safety import attack_compare, attack_records, fill_responses
from .store import Store

__all__ = ["evaluate", "open_results", "prepare_run", "EvalResult", "Dataset", "load_dataset", "JudgeConfig",
           "MetricSpec", "all_metrics", "get_metric", "Runner", "RunSpec", "Store", "EvalError", "UsageError",
           "DataValidationError", "attack_compare", "attack_records", "fill_responses"]
