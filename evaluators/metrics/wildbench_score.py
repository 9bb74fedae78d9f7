"""WildBench score: a checklist-guided 1-10 grade of one response, with strengths and weaknesses.

Row keys ``wildbench_score`` (1-10), ``wildbench_score_strengths``, ``wildbench_score_weaknesses``;
aggregates ``WB_score`` = (mean - 5) x 2 x 10 and, with task tags, category scores and
``WB_score.task_macro`` (kind ``wb_score``).
"""
from evaluators.core.registry import JudgeTemplates, MetricSpec, register
from evaluators.metrics._wildbench import score_row_tasks

SPEC = register(MetricSpec(
    name="wildbench_score", family="quality", kind="wb_score", fields=("response", "checklist"),
    conversation_fields=None, prefix="wildbench_score", outputs=("wildbench_score",),
    score_range=(1.0, 10.0), higher_is_better=True, default_threshold=7.0, integer=False,
    description="WildBench: 1-10 grade of a response guided by the task's checklist (WB-Score).",
    templates=JudgeTemplates(single="wildbench_score.md"), row_tasks=score_row_tasks, version="1",
))
