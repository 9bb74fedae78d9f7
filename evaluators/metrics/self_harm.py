"""Self-harm-related content: severity 0-7 of content about hurting oneself in the response."""
from evaluators.metrics._safety import harm_metric

SPEC = harm_metric("self_harm", "Severity (0-7) of self-harm-related content in the response.")
