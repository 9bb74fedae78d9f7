"""What each judge call of a run was given, re-created at read time (the SDK's ``sample_input``)."""
from __future__ import annotations

from evaluators.core.errors import UsageError
from evaluators.core.tasks import default_row_tasks
from evaluators.judge.templates import Template, sample_input
from evaluators.run.spec import resolve_templates


class JudgeInputs:
    """Re-creates at read time what each judge call of a run was given, from the stored run spec
    (its template texts) and the stored dataset: nothing per row is stored for it.

    Args:
        dataset: the run's dataset.
        run_spec: the run's :class:`evaluators.run.runner.RunSpec`.
    """

    def __init__(self, dataset, run_spec):
        self.dataset, self.run_spec = dataset, run_spec
        self._templates: dict[str, dict[str, Template]] = {}

    def _resolved(self, spec) -> dict[str, Template]:
        if spec.name not in self._templates:
            self._templates[spec.name] = resolve_templates(spec, self.run_spec.templates, self.run_spec.template_texts)
        return self._templates[spec.name]

    def sample_input(self, spec, result) -> str | None:
        """The SDK's ``sample_input`` for one stored judge result, or None when it cannot be re-created
        exactly (the row or turn is gone, or the template in force is not the one the call used)."""
        try:
            planner = spec.row_tasks or default_row_tasks
            task = next((t for t in planner(self.dataset, result.row_idx, spec) if t.turn == result.turn), None)
            template = self._resolved(spec).get(task.mode) if task is not None else None
        except (IndexError, KeyError, UsageError):
            return None
        if template is None:
            return None
        used = (result.meta or {}).get("prompt_sha")
        if used is not None and used != template.sha:
            return None
        return sample_input(template, task.values)
