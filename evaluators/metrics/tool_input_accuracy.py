"""Tool input accuracy: were every call's arguments correct, complete and well-formed? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's ToolInputAccuracyEvaluator takes them: the query, the response's tool calls
(only the response's) and the definitions of the tools called (required). ``tool_input_accuracy_properties`` adds
``parameter_extraction_accuracy``: correct arguments over all passed, as a percentage, from the judge's counts.
"""
from evaluators.metrics._agent_judge import agent_metric, percent
from evaluators.metrics.tool_call_accuracy import needed, tool_skip


def _accuracy(props: dict) -> dict:
    return {"parameter_extraction_accuracy": percent(props.get("correct_parameters_passed", 0),
                                                     props.get("total_parameters_passed", 0))}


def _skip(raw: dict) -> str | None:
    if not raw["response"]:
        return "Response parameter is required to extract tool calls."
    return tool_skip("Tool definitions must be provided.", column=False)(raw)


SPEC = agent_metric("tool_input_accuracy", "Whether every tool call's arguments were correct and complete.",
                    ("query", "response", "tool_definitions"), "tool_input_accuracy.md", binary=True,
                    skip=_skip, defs=lambda raw: needed(raw, column=False), inputs_first=True, extra=_accuracy)
