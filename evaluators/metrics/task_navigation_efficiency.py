"""Task navigation efficiency: did the agent call the expected tools, in the expected order? (computed, 0 or 1)

As azure-ai-evaluation 1.18's TaskNavigationEfficiencyEvaluator computes it, from the response's tool calls (the
SDK's ``tool_call`` parts, or an OpenAI log's ``tool_calls``) and ``ground_truth``, the expected tool names in
order. The value is 1 when the calls match under the run's ``matching_mode``:

- ``exact_match`` (default): the same names in the same order, nothing more;
- ``in_order_match``: the expected names appear in order, other calls between them allowed;
- ``any_order_match``: each expected name is called at least as often as expected, in any order.

``task_navigation_efficiency_properties`` holds precision, recall and F1 of the calls against the expected
names counted as multisets (0 for all three when the agent called no tool). The threshold is 1: a row passes
when it matches.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from evaluators.core.agent import parse_json_text, tool_calls
from evaluators.core.registry import MetricSpec, register
from evaluators.core.tasks import RowTask

MODES = ("exact_match", "in_order_match", "any_order_match")
OUTPUTS = ("task_navigation_efficiency", "precision_score", "recall_score", "f1_score")


def _in_order(steps: list, expected: list) -> bool:
    at = 0
    for s in steps:
        if at < len(expected) and s == expected[at]:
            at += 1
    return at == len(expected)


def matches(steps: list[str], expected: list[str], mode: str) -> bool:
    """Whether the called tools match the expected ones under ``mode`` (see the module docstring)."""
    if mode == "exact_match":
        return steps == expected
    if mode == "in_order_match":
        return _in_order(steps, expected)
    if mode == "any_order_match":
        have = Counter(steps)
        return all(have[s] >= n for s, n in Counter(expected).items())
    raise ValueError(f"matching_mode must be one of {', '.join(MODES)}, got {mode!r}")


def precision_recall(steps: list[str], expected: list[str]) -> dict[str, float]:
    """Precision, recall and F1 of the calls against the expected names, as multisets."""
    if not steps:
        return {"precision_score": 0.0, "recall_score": 0.0, "f1_score": 0.0}
    got, want = Counter(steps), Counter(expected)
    tp = sum(min(n, want[s]) for s, n in got.items())
    fp, fn = sum(got.values()) - tp, sum(want.values()) - tp
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision_score": p, "recall_score": r, "f1_score": 2 * p * r / (p + r) if p + r else 0.0}


def expected_steps(ground_truth: Any) -> list[str]:
    gt = parse_json_text(ground_truth)
    if not gt:
        raise ValueError("ground_truth cannot be empty: give the expected tool names, in order")
    if not isinstance(gt, list) or not all(isinstance(s, str) for s in gt):
        raise ValueError(f"ground_truth must be a list of tool names (text), got {type(gt).__name__}")
    return [s.strip() for s in gt]


def called_steps(response: Any) -> list[str]:
    resp = parse_json_text(response)
    if not isinstance(resp, list):
        raise ValueError("response must be a list of messages with tool calls, got "
                         + ("text" if isinstance(resp, str) else type(resp).__name__))
    calls = tool_calls(resp)
    for k, c in enumerate(calls):
        if not isinstance(c.get("name"), str):
            raise ValueError(f"tool call {k + 1} has no name")
    return [c["name"].strip() for c in calls]


def compute(row: Mapping[str, Any]) -> dict[str, float]:
    expected = expected_steps(row.get("ground_truth"))
    steps = called_steps(row.get("response"))
    return {"task_navigation_efficiency": float(matches(steps, expected, row.get("matching_mode") or MODES[0])),
            **precision_recall(steps, expected)}


def properties(spec: MetricSpec, outputs: Mapping[str, Any], threshold: float) -> dict[str, Any]:
    return {k: outputs.get(k) for k in OUTPUTS[1:]}


def row_tasks(ds, i: int, spec: MetricSpec) -> list[RowTask]:
    """One computed task per row, on the response's messages and the expected names as the file gives them."""
    values = {"response": ds.value(i, "response"), "ground_truth": ds.value(i, "ground_truth"),
              "matching_mode": spec.param("matching_mode")}
    return [RowTask(0, values, "single")]


SPEC = register(MetricSpec(
    name="task_navigation_efficiency", family="agents", kind="score", fields=("response", "tool_calls", "ground_truth"),
    conversation_fields=None, prefix="task_navigation_efficiency", outputs=OUTPUTS, score_range=(0.0, 1.0),
    higher_is_better=True, default_threshold=1.0,
    description="Whether the agent called the expected tools in the expected order (computed; ground_truth: the "
                "tool names).",
    compute=compute, row_tasks=row_tasks, properties=properties,
    params=(("matching_mode", "exact_match"),), run_options=("matching_mode",), choices=(("matching_mode", MODES),)))
