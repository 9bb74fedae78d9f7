"""The one registry of metrics.

A metric is a small module that declares itself with :func:`register`. The CLI,
the Python API and the dashboard build pickers, availability, result columns and
thresholds from :class:`MetricSpec` alone and never special-case a metric by name.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# Families, in the order the seeds group them (and the dashboard shows them).
FAMILIES = {
    "quality": "AI-assisted quality",
    "agents": "Agents and retrieval",
    "safety": "Risk and safety",
    "classic": "Classic (reference-based)",
    "custom": "Your own metrics",
}
# Kinds of value a metric produces; each is one class in ``evaluators/kinds`` that parses
# replies, combines turns, writes row keys and aggregates (see ``MetricSpec.kind_impl``).
KINDS = ("score", "severity", "label", "pairwise", "wb_score")
# Canonical fields a dataset row can offer.
FIELDS = ("query", "response", "context", "ground_truth", "messages", "checklist")
# Agents and ranked retrieval (the SDK's inputs of the same names): the tools an agent could call (JSON schemas),
# its tool calls (also found in a response's messages), graded relevance labels and the ranked documents.
FIELDS += ("tool_definitions", "tool_calls", "retrieval_ground_truth", "retrieved_documents")


@dataclass(frozen=True)
class JudgeTemplates:
    """Template files (under ``evaluators/metrics/prompts``) a judge metric renders.

    ``single`` is used for single-turn rows, ``turn`` for each assistant turn of
    a conversation and ``turn_ground_truth`` for a turn that carries a ground truth.
    """

    single: str | None = None
    turn: str | None = None
    turn_ground_truth: str | None = None
    # A metric defined in a file of its own (``evaluators.metrics.custom``) carries its prompt here instead:
    # (format, text, source), format "template" (ours) or "prompty" (Jinja2); used for every mode.
    inline: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class MetricSpec:
    """What a metric is; everything a caller needs without running it.

    Attributes:
        name: registry name (the ``outputs.<name>`` namespace in results).
        family: one of :data:`FAMILIES`.
        kind: one of :data:`KINDS`.
        fields: canonical fields a single-turn row must have.
        conversation_fields: for conversations, fields each judged turn needs
            (besides query/response); ``None`` when the metric does not run on conversations.
        prefix: the Azure AI Evaluation SDK 1.18 result key K that row keys and ``metrics.json``
            entries start with (``K``, ``K_score``, ``K_result``...): the evaluator's own name
            (``coherence``, ``f1_score``, ``bleu``), ``rouge`` for every ROUGE variant.
        outputs: numeric output keys; ``outputs[0]`` is the one compared to the threshold.
        score_range: (low, high) of the primary output.
        higher_is_better: direction of the primary output.
        default_threshold: pass when the primary output is >= (or <= when lower is better) this.
        integer: judge scores must be whole numbers.
        version: bumped when values change, recorded with every result.
        compute: for in-process metrics, ``compute(row) -> {output: float}``.
        templates: for judge metrics, the template files.
        description: one line for pickers and ``--help``.
        params: the settings the metric was built with (recorded in its signature).
        run_options: names among ``params`` that a run may set (``with_params``); their values
            in ``params`` are the defaults.
        parse: for judge metrics, ``parse(spec, reply_text) -> kinds.Verdict`` replacing the
            kind's parser (raises ``templates.ReplyError`` for an unusable reply).
        row_tasks: ``row_tasks(dataset, i, spec) -> [RowTask]`` replacing the default
            planning (one task per single-turn row, one per assistant turn); for metrics
            whose inputs are not the canonical fields (WildBench checklists, pairwise orders).
        levels: for severities, ``((upper_bound, name), ...)`` naming ranges of the scale.
        properties: ``properties(spec, outputs, threshold) -> dict`` writing the row's ``K_properties`` in place
            of the kind's (a computed metric whose SDK evaluator writes its own, e.g. document_retrieval).
        stated_threshold: the value written as ``K_threshold`` when the SDK writes one it does not apply
            (SDK 1.18's task_adherence and task_completion write 3 and pass a 0/1 score at 1); None: the threshold
            applied is written.
        definition: for a metric defined in a file or saved in the store, what a run records to build it
            again (``evaluators.metrics.custom.MetricDefinition.to_dict``); None for the built-ins.
    """

    name: str
    family: str
    kind: str
    fields: tuple[str, ...]
    conversation_fields: tuple[str, ...] | None
    prefix: str
    outputs: tuple[str, ...]
    score_range: tuple[float, float]
    higher_is_better: bool
    default_threshold: float
    description: str
    version: str = "1"
    integer: bool = False
    compute: Callable[[Mapping[str, Any]], dict[str, float]] | None = field(default=None, compare=False)
    templates: JudgeTemplates | None = None
    params: tuple[tuple[str, Any], ...] = ()
    parse: Callable[["MetricSpec", str], Any] | None = field(default=None, compare=False)
    row_tasks: Callable[[Any, int, "MetricSpec"], list] | None = field(default=None, compare=False)
    levels: tuple[tuple[float, str], ...] = ()
    run_options: tuple[str, ...] = ()
    properties: Callable[["MetricSpec", dict, float], dict] | None = field(default=None, compare=False)
    choices: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # run options that take one of a few values
    definition: dict | None = field(default=None, compare=False, hash=False)
    stated_threshold: float | None = None

    @property
    def is_judge(self) -> bool:
        return self.templates is not None

    @property
    def kind_impl(self):
        """The :class:`evaluators.core.kinds.Kind` that parses, combines and aggregates this metric."""
        from evaluators.core.kinds import get_kind

        return get_kind(self.kind)

    def parse_reply(self, text: str):
        """A judge reply -> :class:`evaluators.core.kinds.Verdict`; raises ``ReplyError`` when unusable."""
        return (self.parse or self.kind_impl.parse)(self, text)

    @property
    def primary(self) -> str:
        return self.outputs[0]

    @property
    def result_key(self) -> str:
        return f"{self.prefix}_result"

    @property
    def threshold_key(self) -> str:
        return f"{self.prefix}_threshold"

    @property
    def reason_key(self) -> str:
        return f"{self.prefix}_reason"

    @property
    def error_key(self) -> str:
        return f"{self.name}_error"

    def passes(self, value: float, threshold: float) -> bool:
        """Whether a primary value passes ``threshold`` in this metric's direction."""
        return value >= threshold if self.higher_is_better else value <= threshold

    def param(self, name: str) -> Any:
        """The value of one of ``params`` (the run's, when the spec came from ``with_params``)."""
        return dict(self.params)[name]

    def with_params(self, values: Mapping[str, Any] | None) -> "MetricSpec":
        """This metric with some ``params`` set for one run (each coerced to its default's type).

        Raises:
            UsageError: a name the metric does not declare, or a value of the wrong type.
        """
        if not values:
            return self
        from dataclasses import replace

        from evaluators.core.errors import UsageError

        current = dict(self.params)
        for name, value in values.items():
            if name not in self.run_options:
                known = ", ".join(self.run_options) or "none"
                raise UsageError(f"metric '{self.name}' has no option '{name}' (options: {known})")
            default = current[name]
            try:
                if isinstance(default, bool):
                    value = value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")
                elif isinstance(default, (int, float)):
                    value = type(default)(float(value)) if isinstance(default, int) else float(value)
            except (TypeError, ValueError):
                raise UsageError(f"option {self.name}.{name}: {value!r} is not a {type(default).__name__}") from None
            allowed = dict(self.choices).get(name)
            if allowed is not None and value not in allowed:
                raise UsageError(f"option {self.name}.{name}: {value!r} is not one of {', '.join(map(str, allowed))}")
            current[name] = value
        return replace(self, params=tuple(current.items()))

    def signature(self) -> str:
        """Name, version and settings, so a number never travels without its configuration."""
        parts = [f"{self.name}", f"v:{self.version}"] + [f"{k}:{v}" for k, v in self.params]
        return "|".join(parts)

    def check_threshold(self, value: float) -> float:
        lo, hi = self.score_range
        if not (lo <= value <= hi):
            from evaluators.core.errors import UsageError

            raise UsageError(f"threshold for '{self.name}' must be within {lo:g}-{hi:g}, got {value:g}")
        return float(value)


_REGISTRY: dict[str, MetricSpec] = {}


def register(spec: MetricSpec, replace: bool = False) -> MetricSpec:
    """Add a metric to the registry (module import time). Names are unique.

    Args:
        replace: a metric defined in a file may take the place of an earlier version of itself (one
            loaded again, or saved anew); never of a built-in (one without a ``definition``).
    """
    if spec.family not in FAMILIES or spec.kind not in KINDS:
        raise ValueError(f"metric {spec.name}: bad family/kind {spec.family}/{spec.kind}")
    if replace:
        _load()  # the built-ins first: a file's metric never takes a built-in's name, whichever comes first
    old = _REGISTRY.get(spec.name)
    if old is not None and not (replace and old.definition is not None):
        from evaluators.core.errors import UsageError

        raise UsageError(f"metric {spec.name} registered twice" + (" (a built-in metric has that name)"
                                                                   if old.definition is None else ""))
    _REGISTRY[spec.name] = spec
    return spec


# What registers metrics is handed in from above (the package's root adds the built-ins' loader; users'
# metrics add theirs): the registry imports no metric module, so every layer may ask it.
_LOADERS: list[Callable[[], None]] = []
_LAZY: list[Callable[[], None]] = []  # called before a list of every metric, or a name not found otherwise
_LOADING = threading.RLock()  # a second thread waits for the first one's loading instead of seeing half of it


def add_loader(load: Callable[[], None], when_needed: bool = False) -> None:
    """Have ``load()`` called once, before the registry is first read; it registers metrics.

    With ``when_needed``, only before every metric is listed or a name is not otherwise found (installed
    packages' metrics: looking them up costs a run that does not use them ~50 ms).
    """
    with _LOADING:
        (_LAZY if when_needed else _LOADERS).append(load)


def _load(everything: bool = False) -> None:
    if not _LOADERS and not (everything and _LAZY):
        return
    with _LOADING:
        while _LOADERS:
            _LOADERS.pop(0)()
        while everything and _LAZY:
            _LAZY.pop(0)()


def all_metrics() -> list[MetricSpec]:
    """Every registered metric, in family then registration order."""
    _load(everything=True)
    order = list(FAMILIES)
    return sorted(_REGISTRY.values(), key=lambda s: order.index(s.family))


def get_metric(name: str) -> MetricSpec:
    """Look a metric up by name; a clear error lists the known names."""
    _load()
    if name not in _REGISTRY:
        _load(everything=True)
    try:
        return _REGISTRY[name]
    except KeyError:
        from evaluators.core.errors import UsageError

        known = ", ".join(s.name for s in all_metrics())
        raise UsageError(f"unknown metric '{name}'. Known metrics: {known}") from None


def missing_fields(spec: MetricSpec, shape: str, fields: set[str]) -> list[str]:
    """Fields a dataset of ``shape`` lacks for ``spec``; [] when it can be computed.

    Args:
        spec: the metric.
        shape: "single" or "conversation".
        fields: canonical fields the dataset provides (for conversations: what turns carry,
            e.g. {"context", "ground_truth"}).
    Returns:
        Names of missing fields; ``["messages"]`` style names for conversations.
    """
    if shape == "conversation":
        if spec.conversation_fields is None:
            return [f"single-turn rows ({', '.join(spec.fields)})"]
        return [f"messages[].{f}" for f in spec.conversation_fields if f not in fields]
    return [f for f in spec.fields if f not in fields]


def spec_fingerprint(obj: Any) -> str:
    """A short stable hash of a JSON-able object (used for run specs and cache keys)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
