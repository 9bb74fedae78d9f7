"""Tool output utilization: did the agent use its tools' results faithfully? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's ToolOutputUtilizationEvaluator takes them: query, response with its tool
calls and results, and the definitions of the tools it called (required).
"""
from evaluators.core.agent import tool_calls, tool_names
from evaluators.metrics._agent_judge import agent_metric
from evaluators.metrics.tool_call_accuracy import NO_DEFINITIONS


def _used(raw: dict) -> dict:
    called = {c.get("name") for c in tool_calls(raw["response"])}
    defs = tool_names(raw["tool_definitions"])
    return {n: d for n, d in defs.items() if n in called} or defs


def _skip(raw: dict) -> str | None:
    return None if tool_names(raw["tool_definitions"]) else NO_DEFINITIONS


SPEC = agent_metric("tool_output_utilization", "Whether the agent used its tools' results faithfully.",
                    ("query", "response", "tool_definitions"), "tool_output_utilization.md", binary=True,
                    skip=_skip, defs=_used)
