"""Intent resolution: did the agent understand and settle what the user wanted? (1-5, pass at 3)

Inputs as azure-ai-evaluation 1.18's IntentResolutionEvaluator takes them: the query and the response (text or
messages), tool definitions when given. Our own prompt, the SDK's scale and output.
"""
from evaluators.metrics._agent_judge import agent_metric

SPEC = agent_metric("intent_resolution", "Whether the agent understood what the user wanted and its answer settles it.",
                    ("query", "response"), "intent_resolution.md")
