"""Task adherence: did the agent stay within its instructions and task? (0 or 1, pass at 1)

Inputs as azure-ai-evaluation 1.18's TaskAdherenceEvaluator takes them: the query (system instructions
included) and the response with its tool calls; tool definitions when given.
"""
from evaluators.metrics._agent_judge import SDK_STATED_THRESHOLD, agent_metric

SPEC = agent_metric("task_adherence", "Whether the agent kept to its instructions and task (no material failure).",
                    ("query", "response"), "task_adherence.md", binary=True,
                    stated_threshold=SDK_STATED_THRESHOLD)
