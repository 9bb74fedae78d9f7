"""What a run computes (:class:`RunSpec`) and the templates its judge metrics use.

Kept apart from the runner so that the CLI can check a run's settings before it imports the
store (SQLAlchemy): the judge's check leaves only once everything refusable was refused, and
within moments of start-up. :mod:`evaluators.run.runner` re-exports both names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig
from evaluators.core.registry import MetricSpec, get_metric, spec_fingerprint
from evaluators.judge.templates import Template, load_template, load_user_template_text, parse_template
from evaluators.metrics.custom import from_definition

MAX_REPEAT = 20


@dataclass
class RunSpec:
    """What to compute. Thresholds are applied when results are read, not here.

    Attributes:
        metrics: registry names.
        thresholds: metric -> threshold (defaults from the registry).
        judge: judge settings (needed when a judge metric is chosen).
        templates: metric -> path of a user's template replacing the built-in one(s).
        options: metric -> {param: value} setting a metric's declared ``params`` for this run
            (e.g. ``{"wildbench_pairwise": {"length_penalty": -1, "both_orders": True}}``).
        template_texts: metric -> the text of that template, read once when the run is prepared
            (:meth:`read_templates`), so a resumed run uses the template it started with whoever
            resumes it and wherever the file has gone.
        repeat: each judge task is asked this many times (each its own call and cache entry); the row's
            value combines them (:mod:`evaluators.core.votes`), and how often they disagree is reported.
        jury: further judges asked every judge task as well as ``judge``: the row's value is the median of
            the jurors' (the majority for labels), and agreement between them is reported.
        prices: model -> its price (``evaluators.judge.prices.Price`` as a dict), kept with the run so its cost
            reads the same later; budget: USD the run stops before exceeding; batch: judge through the
            provider's Batch API; estimate: what the run was estimated to cost when started. None of these
            change the numbers: they are not in the fingerprint, and a resume may change them.
        definitions: metric -> the definition of a metric defined in a file or saved in the store, recorded
            when the run is prepared (:meth:`read_templates`): the run is read and resumed with that version.
        target: where the answers came from when a model under test wrote them (its model, URL, prompt's digest,
            variant name, experiment, and what answering cost: calls, tokens, latency, USD), reported apart from
            the judge's; its USD counts against ``budget``. Not in the fingerprint: the answers are the data.
    """

    metrics: list[str]
    thresholds: dict[str, float] = field(default_factory=dict)
    judge: JudgeConfig | None = None
    templates: dict[str, str] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    template_texts: dict[str, str] = field(default_factory=dict)
    repeat: int = 1
    jury: list[JudgeConfig] = field(default_factory=list)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    budget: float | None = None
    batch: bool = False
    batch_retry: str = "batch"  # requests a batch left unanswered go in a new batch, or ("direct") as direct calls
    estimate: dict[str, Any] | None = None
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    target: dict[str, Any] | None = None

    def jurors(self) -> list[JudgeConfig]:
        """Every judge asked each task: the run's judge, then the jury's (just the judge without a jury)."""
        return ([self.judge] if self.judge else []) + list(self.jury)

    def specs(self) -> list[MetricSpec]:
        return [self.metric(m).with_params(self.options.get(m)) for m in self.metrics]

    def metric(self, name: str) -> MetricSpec:
        """The metric as this run uses it: the version it recorded, else the registry's."""
        if name in self.definitions:
            return from_definition(self.definitions[name])
        return get_metric(name)

    def threshold(self, spec: MetricSpec) -> float:
        return float(self.thresholds.get(spec.name, spec.default_threshold))

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": list(self.metrics), "thresholds": dict(self.thresholds),
                "judge": self.judge.to_dict() if self.judge else None, "templates": dict(self.templates),
                "options": {k: dict(v) for k, v in self.options.items()},
                "template_texts": dict(self.template_texts), **({"repeat": self.repeat} if self.repeat > 1 else {}),
                **({"jury": [j.to_dict() for j in self.jury]} if self.jury else {}),
                **({"prices": dict(self.prices)} if self.prices else {}),
                **({"budget": self.budget} if self.budget is not None else {}),
                **({"batch": True} if self.batch else {}), **({"estimate": self.estimate} if self.estimate else {}),
                **({"batch_retry": self.batch_retry} if self.batch and self.batch_retry != "batch" else {}),
                **({"definitions": dict(self.definitions)} if self.definitions else {}),
                **({"target": dict(self.target)} if self.target else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunSpec":
        return cls(metrics=list(d["metrics"]), thresholds=dict(d.get("thresholds") or {}),
                   judge=JudgeConfig.from_dict(d["judge"]) if d.get("judge") else None,
                   templates=dict(d.get("templates") or {}), options=dict(d.get("options") or {}),
                   template_texts=dict(d.get("template_texts") or {}), repeat=int(d.get("repeat") or 1),
                   jury=[JudgeConfig.from_dict(j) for j in d.get("jury") or []],
                   prices=dict(d.get("prices") or {}), budget=d.get("budget"), batch=bool(d.get("batch")),
                   estimate=d.get("estimate"), batch_retry=d.get("batch_retry") or "batch",
                   definitions=dict(d.get("definitions") or {}), target=d.get("target"))

    def read_templates(self) -> None:
        """Read each user template's text now (a missing file is an error, never a built-in's fallback)."""
        for name, path in self.templates.items():
            if name not in self.template_texts:
                self.template_texts[name] = load_user_template_text(path, metric=name)
        for name in self.metrics:  # and the definition of each metric defined in a file, as it is now
            if name not in self.definitions and get_metric(name).definition is not None:
                self.definitions[name] = dict(get_metric(name).definition)

    def fingerprint(self) -> str:
        """Identity of what the numbers depend on (not thresholds, concurrency or timeouts)."""
        tpl = {}
        for s in self.specs():
            if s.is_judge:
                tpl[s.name] = sorted(t.sha for t in resolve_templates(s, self.templates, self.template_texts).values())
        ident = {"metrics": sorted(self.metrics), "templates": tpl,
                 "judge": self.judge.identity() if self.judge and tpl else None}
        if self.options:  # a metric's run options (both orders, a length rule) change its numbers
            ident["options"] = self.options
        if self.repeat > 1 and tpl:  # so do repeated judgments
            ident["repeat"] = self.repeat
        if self.jury and tpl:  # and the other judges of a jury
            ident["jury"] = [j.identity() for j in self.jury]
        if self.definitions:  # and the version of each metric defined in a file (a code file's content too)
            ident["definitions"] = {k: spec_fingerprint(v) for k, v in self.definitions.items()}
        return spec_fingerprint(ident)

    def validate(self) -> None:
        specs = self.specs()
        if not 1 <= self.repeat <= MAX_REPEAT:
            raise UsageError(f"--repeat takes 1 to {MAX_REPEAT} judgments per task, got {self.repeat}")
        for name, value in self.thresholds.items():
            self.metric(name).check_threshold(value)
        self._validate_cost(specs)
        if any(s.is_judge for s in specs) and self.judge is None:
            judged = ", ".join(s.name for s in specs if s.is_judge)
            raise UsageError(f"{judged} need(s) an LLM judge: give --judge-base-url/--judge-model (or judge=...)")
        for name in self.options:
            if name not in self.metrics:
                raise UsageError(f"options given for '{name}', which is not among the chosen metrics")
        for name in self.templates:
            if not self.metric(name).is_judge:
                raise UsageError(f"'{name}' is not a judge metric; only judge metrics take a template")
            if self.metric(name).templates.inline:
                raise UsageError(f"'{name}' is defined in a file of its own: change its prompt there")
        if self.judge is not None and any(s.is_judge for s in specs):
            self.judge.resolved()  # an unknown named judge, or one pointed elsewhere, is refused here
        for j in self.jury:
            if not j.judge_name and not (j.provider == "compatible" and j.base_url):
                raise UsageError("a jury's further judges are judges configured on this machine (judges.toml) or "
                                 "keyless OpenAI-compatible servers: their keys cannot be typed per run")
            j.resolved()
        for s in specs:
            if s.is_judge:
                resolve_templates(s, self.templates, self.template_texts)  # unknown placeholders fail here
            if s.name == "meteor":
                from evaluators.metrics.wordnet import load_wordnet

                load_wordnet()  # a missing WordNet is a setup error, said once, not per row

    def _validate_cost(self, specs: list[MetricSpec]) -> None:
        """A budget needs a price for the judge."""
        from evaluators.judge.prices import price_for

        judged = self.judge is not None and any(s.is_judge for s in specs)
        if self.budget is not None:
            if not (isinstance(self.budget, (int, float)) and self.budget > 0 and self.budget != float("inf")):
                raise UsageError(f"--budget takes a positive amount of US dollars, got {self.budget!r}")
            if judged and price_for(self.judge.model, self.prices) is None:
                raise UsageError(f"--budget needs the price of the judge model '{self.judge.model}': give --price "
                                 "INPUT,CACHED,OUTPUT or list it in prices.toml")


def run_metric(spec: dict[str, Any] | None, name: str) -> MetricSpec:
    """One of a stored run's metrics as the run uses it (its recorded definition, else the registry's): the
    dashboard reads runs made with metric files it never loaded, and old versions of saved metrics."""
    recorded = (spec or {}).get("definitions") or {}
    return from_definition(recorded[name]) if name in recorded else get_metric(name)


def resolve_templates(spec: MetricSpec, overrides: dict[str, str],
                      texts: dict[str, str] | None = None) -> dict[str, Template]:
    """mode ('single', 'turn', 'turn_ground_truth') -> template, with a user's template replacing all modes.

    Args:
        spec: the metric.
        overrides: metric -> path of the user's template.
        texts: metric -> that template's stored text (used instead of reading the path again).
    """
    t = spec.templates
    if t.inline is not None:  # a metric defined in a file: its own prompt, for every mode (--template is refused)
        from evaluators.judge.inline import inline_template

        tpl = inline_template(spec)
        return {"single": tpl, "turn": tpl}
    modes = {"single": t.single, "turn": t.turn, "turn_ground_truth": t.turn_ground_truth}
    if texts and spec.name in texts:
        user = parse_template(texts[spec.name], overrides.get(spec.name) or f"{spec.name} template", bounded=True)
    elif spec.name in overrides:
        user = parse_template(load_user_template_text(overrides[spec.name], metric=spec.name), overrides[spec.name],
                              bounded=True)
    else:
        user = None
    return {mode: user or load_template(builtin) for mode, builtin in modes.items() if builtin}
