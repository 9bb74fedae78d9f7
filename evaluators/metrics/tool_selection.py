"""Tool selection: did the agent pick the right tools, none needless and none missing? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's ToolSelectionEvaluator takes them: the query, the names of the tools called
(the response's calls, else the ``tool_calls`` column) and their definitions. ``tool_selection_properties`` adds
``tool_selection_accuracy``: correct selections over all, as a percentage, from the judge's counts.
"""
from evaluators.metrics._agent_judge import agent_metric, percent
from evaluators.metrics.tool_call_accuracy import needed, tool_skip


def _accuracy(props: dict) -> dict:
    right, wrong = props.get("correct_tool_selections", 0), props.get("wrong_tool_selections", 0)
    return {"tool_selection_accuracy": percent(right, right + wrong)}


SPEC = agent_metric("tool_selection", "Whether the agent chose the right tools for the task (none needless or missing).",
                    ("query", "tool_definitions", "tool_calls"), "tool_selection.md", binary=True,
                    skip=tool_skip("Tool definitions must be provided."), defs=needed, inputs_first=True,
                    extra=_accuracy)
