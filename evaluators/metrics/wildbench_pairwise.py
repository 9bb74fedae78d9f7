"""WildBench pairwise: which of two responses is better (A++, A+, A=B, B+, B++), checklist-guided.

Row keys ``wildbench_pairwise_choice``, ``wildbench_pairwise_reward`` (for model A: +100 / +50 / 0 /
-50 / -100 after the length rule), ``wildbench_pairwise_reason``. Params: ``length_penalty`` (K
characters, WildBench's default 500; -1 disables) and ``both_orders`` (also judge the pair swapped;
a verdict that flips with the order counts as a tie). Aggregates: ``WB_reward`` (kind ``pairwise``).
"""
from evaluators.core.registry import JudgeTemplates, MetricSpec, register
from evaluators.core.wb_rules import DEFAULT_LENGTH_PENALTY
from evaluators.metrics._wildbench import pairwise_row_tasks

SPEC = register(MetricSpec(
    name="wildbench_pairwise", family="quality", kind="pairwise", fields=("response", "checklist"),
    conversation_fields=None, prefix="wildbench_pairwise", outputs=("wildbench_pairwise_reward",),
    score_range=(-100.0, 100.0), higher_is_better=True, default_threshold=0.0, integer=False,
    description="WildBench: compare candidate_A with candidate_B (A++ .. B++) guided by the checklist (WB-Reward).",
    templates=JudgeTemplates(single="wildbench_pairwise.md"), row_tasks=pairwise_row_tasks, version="1",
    params=(("length_penalty", DEFAULT_LENGTH_PENALTY), ("both_orders", False)),
    run_options=("length_penalty", "both_orders"),
))
