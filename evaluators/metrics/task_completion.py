"""Task completion: is the user's task done by the end of the agent's turn? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's TaskCompletionEvaluator takes them: query, response with its tool calls
and results, tool definitions when given.
"""
from evaluators.metrics._agent_judge import SDK_STATED_THRESHOLD, agent_metric

SPEC = agent_metric("task_completion", "Whether the agent finished the user's task (every deliverable produced).",
                    ("query", "response"), "task_completion.md", binary=True,
                    stated_threshold=SDK_STATED_THRESHOLD)
