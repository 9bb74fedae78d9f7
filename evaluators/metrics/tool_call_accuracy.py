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


def calls_of(raw: dict, column: bool = True):
    """The calls judged: the response's, else (``column``) the ``tool_calls`` column's, else a text response."""
    calls = tool_calls(raw["response"]) or (raw["tool_calls"] if column else None)
    if not calls and isinstance(raw["response"], str) and raw["response"]:
        return raw["response"]
    return calls or None


def _called(calls) -> set:
    return {c.get("name", (c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict)}


def tool_skip(no_definitions: str, column: bool = True):
    """Why a row is not judged, as the SDK's tool-call evaluators say it (calls first, then definitions)."""

    def skip(raw: dict) -> str | None:
        calls, defs = calls_of(raw, column), tool_names(raw["tool_definitions"])
        if calls is None:
            return NO_CALLS
        if not defs:
            return no_definitions
        if isinstance(calls, list) and _called(calls) - set(defs):
            return MISSING_DEFINITIONS
        return None

    return skip


def needed(raw: dict, column: bool = True) -> dict:
    """The definitions of the tools called (all of them when the calls are text)."""
    calls, defs = calls_of(raw, column), tool_names(raw["tool_definitions"])
    if not isinstance(calls, list):
        return defs
    return {n: d for n, d in defs.items() if n in _called(calls)}


SPEC = agent_metric("tool_call_accuracy", "Whether the agent's tool calls were relevant, complete and correctly "
                    "parameterised.", ("query", "tool_definitions", "tool_calls"), "tool_call_accuracy.md",
                    outputs=("gpt_tool_call_accuracy",), skip=tool_skip(NO_DEFINITIONS), defs=needed,
                    inputs_first=True)
