"""Response completeness: how much of the reference answer does the response cover? (1-5, pass at 3)

Inputs as azure-ai-evaluation 1.18's ResponseCompletenessEvaluator takes them: the response and the ground
truth (no query).
"""
from evaluators.metrics._agent_judge import agent_metric

SPEC = agent_metric("response_completeness", "How much of the ground truth's content the response covers.",
                    ("response", "ground_truth"), "response_completeness.md")
