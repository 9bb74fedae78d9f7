"""Tool call accuracy: were the agent's tool calls relevant, complete and correctly parameterised? (1-5, pass at 3)

Inputs as azure-ai-evaluation 1.18's ToolCallAccuracyEvaluator takes them: the query, the tool calls (found in
the response's messages, else the ``tool_calls`` column, else a text response taken as the calls) and the
definitions of the tools called. Not judged, with the SDK's words, when there is no call or a called tool has
no definition. Writes ``gpt_tool_call_accuracy`` beside the score, as the SDK still does.
"""
from evaluators.core.agent import tool_calls, tool_names
from evaluators.metrics._agent_judge import agent_metric

NO_CALLS = "No tool calls found in response or provided tool_calls."
NO_DEFINITIONS = "Tool definitions input is required but not provided"
MISSING_DEFINITIONS = "Tool definitions for all tool calls must be provided."


def _calls(raw: dict):
    calls = tool_calls(raw["response"]) or raw["tool_calls"]
    if not calls and isinstance(raw["response"], str) and raw["response"]:
        return raw["response"]
    return calls or None


def _skip(raw: dict) -> str | None:
    calls, defs = _calls(raw), tool_names(raw["tool_definitions"])
    if calls is None:
        return NO_CALLS
    if not defs:
        return NO_DEFINITIONS
    if isinstance(calls, list):
        called = {c.get("name", (c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict)}
        if called - set(defs):
            return MISSING_DEFINITIONS
    return None


def _needed(raw: dict) -> dict:
    calls, defs = _calls(raw), tool_names(raw["tool_definitions"])
    if not isinstance(calls, list):
        return defs
    called = {c.get("name", (c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict)}
    return {n: d for n, d in defs.items() if n in called}


SPEC = agent_metric("tool_call_accuracy", "Whether the agent's tool calls were relevant, complete and correctly "
                    "parameterised.", ("query", "tool_definitions", "tool_calls"), "tool_call_accuracy.md",
                    outputs=("gpt_tool_call_accuracy",), skip=_skip, defs=_needed, inputs_first=True)
