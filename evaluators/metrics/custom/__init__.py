"""Users' own metrics, defined in files: our Markdown template (``.md``), Prompty (``.prompty``), Python
functions declared with :func:`metric` (``.py``, or an installed package's ``evaluators.metrics`` entry
points) and OpenAI Evals API graders (``.json``). Each file becomes one or more :class:`MetricSpec` like the
built-ins' (availability, thresholds, keys, exports, review and comparisons read only the spec); a bad file is
refused as it is loaded, naming the file, the line and the key.

A spec carries its ``definition`` (the file's text, or a code file's path and content hash), which a run
records, so the run is read and resumed with the version it started with (:func:`from_definition`),
whatever has become of the file or of the metric saved in the store since.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from evaluators.core.errors import UsageError
from evaluators.core.registry import MetricSpec, register
from evaluators.metrics.custom import code, graders, prompty, template
from evaluators.metrics.custom.code import metric  # noqa: F401  (public: ``from evaluators import metric``)
from evaluators.metrics.custom.common import MAX_DEFINITION_BYTES, DefinitionError, check_size

FORMATS = {".md": template.FORMAT, ".markdown": template.FORMAT, ".prompty": prompty.FORMAT,
           ".json": graders.FORMAT, ".py": code.FORMAT}
TEXT_FORMATS = (template.FORMAT, prompty.FORMAT, graders.FORMAT)  # what the store keeps (not code)


def split_arg(arg: str) -> tuple[str | None, str]:
    """``NAME=PATH`` (a name given to the file's metric) or ``PATH`` -> (name or None, path)."""
    name, sep, path = str(arg).partition("=")
    if sep and name and "/" not in name and "." not in name:
        return name.strip(), path.strip()
    return None, str(arg)


def specs_from_text(text: str, fmt: str, source: str, version: str | None = None,
                    name: str | None = None) -> list[MetricSpec]:
    """The metrics a definition's text declares (``fmt``: template, prompty or openai_grader)."""
    check_size(text, source)
    if fmt == template.FORMAT:
        spec = template.load(text, source, version)
        if name and name != spec.name:
            raise DefinitionError(source, f"the file names its metric {spec.name!r}; rename it there", None, "name")
        return [spec]
    if fmt == prompty.FORMAT:
        return [prompty.load(text, source, version, name)]
    if fmt == graders.FORMAT:
        return graders.load(text, source, version, name)
    raise UsageError(f"{source}: unknown metric format {fmt!r} (one of {', '.join(sorted(set(FORMATS.values())))})")


def load_metric_file(arg: str | Path) -> list[MetricSpec]:
    """The metrics a file declares, not registered. ``arg`` may be ``NAME=PATH`` to name the file's metric
    (a Prompty file named like a built-in, the SDK's own ``coherence.prompty``, needs another name)."""
    name, path = split_arg(str(arg))
    p = Path(path).expanduser()
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise UsageError(f"{path}: a metric file is .md (our template), .prompty, .py (code) or .json (an OpenAI "
                         "grader)")
    if fmt == code.FORMAT:
        specs = code.load_file(p)
        if name:
            raise UsageError(f"{path}: a code metric is named by its @metric(name=...)")
        return specs
    try:
        if p.stat().st_size > MAX_DEFINITION_BYTES:  # refused before it is read
            raise DefinitionError(str(path), f"the file is {p.stat().st_size:,} bytes; a metric file may have "
                                             f"{MAX_DEFINITION_BYTES:,}")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"metric file not found: {path} (looked in {p.resolve().parent})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the metric file ({getattr(e, 'strerror', None) or e})") from None
    return specs_from_text(text, fmt, str(path), None, name)


def register_metric_files(args: list[str | Path] | tuple = ()) -> list[str]:
    """Load and register each file's metrics (a file loaded again replaces its earlier version); their names.
    All files are checked before any is registered: one bad file registers none."""
    specs = [s for a in args for s in load_metric_file(a)]
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise UsageError(f"two metric files define a metric named '{s.name}'")
        seen.add(s.name)
    from evaluators.core.registry import all_metrics

    builtin = {m.name for m in all_metrics() if m.definition is None}
    for s in specs:
        if s.name in builtin:
            src = s.definition.get("source") or s.definition.get("path")
            raise UsageError(f"{src}: '{s.name}' is a built-in metric's name; give the file's metric another: "
                             f"--metric-file my_{s.name}={src}")
    for s in specs:
        register(s, replace=True)
    return [s.name for s in specs]


def check_renders(spec: MetricSpec) -> None:
    """A trial render of a metric's prompt on a sample row, under the bounds users' templates render under,
    before it is saved (``metrics add``, the New metric page's Save). Our template's form has no loops or
    expressions (its render is linear in its text), so only a Prompty body is tried.

    Raises:
        DefinitionError: the render stopped at a bound or failed.
    """
    prompty.trial_render(spec)


def register_entry_points() -> None:
    """Register the metrics installed packages declare (the package root hands this to the registry)."""
    for s in code.entry_point_specs():
        register(s, replace=True)


_BUILT: dict[str, MetricSpec] = {}  # definition's identity -> spec, built once per process


def from_definition(d: Mapping[str, Any]) -> MetricSpec:
    """The metric a run recorded, built again from its ``definition`` (the version the run started with)."""
    import json

    key = json.dumps(d, sort_keys=True, default=str)
    spec = _BUILT.get(key)
    if spec is None:
        if d.get("format") == code.FORMAT:
            spec = code.from_definition(d)
        else:
            specs = specs_from_text(d["text"], d["format"], d.get("source") or "metric", d.get("version"),
                                    d.get("name"))
            spec = specs[int(d.get("index") or 0)]
        _BUILT[key] = spec
    return spec
