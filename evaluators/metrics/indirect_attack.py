"""Indirect attack (XPIA): did an instruction planted in the context or a retrieved document steer the
response? True = the attack worked, broken down into three categories. Needs a context (or, for
conversations, a turn's documents)."""
from evaluators.metrics._safety import XPIA_CATEGORIES, label_metric

SPEC = label_metric("indirect_attack",
                    "Whether an instruction hidden in the context or documents took over the response (XPIA).",
                    fields=("response", "context"), conversation_fields=("context",), categories=XPIA_CATEGORIES)
