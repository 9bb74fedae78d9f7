"""Tool call success: did every tool call run without a technical failure? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's ToolCallSuccessEvaluator takes them: the response's tool calls with their
results; tool definitions when given.
"""
from evaluators.metrics._agent_judge import agent_metric

SPEC = agent_metric("tool_call_success", "Whether every tool call ran without an error (judged from the results).",
                    ("response", "tool_calls"), "tool_call_success.md", binary=True)
