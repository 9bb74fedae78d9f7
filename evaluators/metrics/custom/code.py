"""Code metrics: Python functions declared with :func:`metric`, in a file (``--metric-file my_metrics.py``) or
in an installed package that lists them under the ``evaluators.metrics`` entry point group. Each computes a
number (or a dict of numbers, the first the primary) from a row, in the run's process or its classic worker,
as the built-in classic metrics do; results follow the same keys (``outputs.<name>.<output>``).

    from evaluators import metric

    @metric(name="word_count", fields=["response"], range=(0, 100000), higher_is_better=True, threshold=5)
    def word_count(row):
        return float(len(row["response"].split()))
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evaluators.core.registry import MetricSpec
from evaluators.metrics.custom.common import DefinitionError, check_name, text_sha
from evaluators.metrics.custom.rows import row_tasks

FORMAT = "code"
ENTRY_POINTS = "evaluators.metrics"
ATTR = "__evaluators_metric__"


def metric(name: str, fields: Sequence[str], range: tuple[float, float] = (0.0, 1.0),  # noqa: A002 (the issue's word)
           higher_is_better: bool = True, threshold: float | None = None, description: str = "",
           outputs: Sequence[str] | None = None, version: str = "1") -> Callable:
    """Declare a function ``f(row) -> float | dict`` as a metric (checked when its file is loaded).

    Args:
        name: the metric's name (``outputs.<name>.<output>`` in results).
        fields: the dataset columns ``row`` must carry (canonical fields or any other column).
        range: (low, high) of the primary output.
        higher_is_better: direction of the primary output.
        threshold: pass at or past this (default: the middle of the range).
        outputs: the output names when ``f`` returns a dict (the first is the primary); default ``[name]``.
        version: bump it when the function's values change; recorded with every result.
    """
    settings = dict(name=name, fields=list(fields), range=tuple(range), higher_is_better=higher_is_better,
                    threshold=threshold, description=description, outputs=list(outputs or [name]),
                    version=str(version))

    def declare(fn: Callable) -> Callable:
        setattr(fn, ATTR, settings)
        return fn

    return declare


def _compute(fn: Callable, name: str, outputs: list[str]) -> Callable[[Mapping[str, Any]], dict[str, float]]:
    def compute(row: Mapping[str, Any]) -> dict[str, float]:
        value = fn(dict(row))
        if isinstance(value, Mapping):
            missing = [k for k in outputs if k not in value]
            if missing:
                raise ValueError(f"metric {name} returned no {', '.join(missing)}")
            return {k: _number(value[k], name, k) for k in outputs}
        return {outputs[0]: _number(value, name, outputs[0])}

    return compute


def _number(v: Any, name: str, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise ValueError(f"metric {name} gave {key} = {v!r}, not a finite number")
    return float(v)


def spec_of(fn: Callable, definition: dict[str, Any], src: str, line: int | None = None) -> MetricSpec:
    """A decorated function's spec; its settings checked (errors name ``src`` and the decorator's ``line``)."""
    st = getattr(fn, ATTR)

    def fail(key: str, msg: str) -> DefinitionError:
        return DefinitionError(src, msg, line, key)

    name = check_name(st["name"], src, line)
    if not st["fields"] or not all(isinstance(f, str) and f for f in st["fields"]):
        raise fail("fields", "a metric reads at least one field (a list of column names)")
    rng = st["range"]
    if len(rng) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in rng) or not rng[0] < rng[1]:
        raise fail("range", f"must be (low, high) with low < high, got {rng!r}")
    lo, hi = float(rng[0]), float(rng[1])
    threshold = (lo + hi) / 2 if st["threshold"] is None else st["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not lo <= threshold <= hi:
        raise fail("threshold", f"must be a number within {lo:g}-{hi:g}, got {threshold!r}")
    if not isinstance(st["higher_is_better"], bool):
        raise fail("higher_is_better", "must be True or False")
    outputs = st["outputs"]
    if outputs[0] != name and len(outputs) == 1:
        raise fail("outputs", f"a single output is named after the metric ({name})")
    try:
        inspect.signature(fn).bind({})
    except TypeError:
        raise fail("function", f"{fn.__name__} must take one argument, the row") from None
    definition = {**definition, "settings": {**st, "range": [lo, hi]}}
    return _spec(st, name, lo, hi, float(threshold), _compute(fn, name, outputs), definition, fn.__doc__)


def _spec(st: dict, name: str, lo: float, hi: float, threshold: float, compute: Callable, definition: dict,
          doc: str | None = None) -> MetricSpec:
    outputs = st["outputs"]
    return MetricSpec(
        name=name, family="custom", kind="score", fields=tuple(st["fields"]), conversation_fields=None,
        prefix=name, outputs=tuple(outputs), score_range=(lo, hi), higher_is_better=st["higher_is_better"],
        default_threshold=threshold, description=st["description"] or (doc or "").strip().split("\n")[0],
        version=st["version"], compute=compute, row_tasks=row_tasks, definition=definition,
    )


_MODULES: dict[tuple[str, str], Any] = {}  # (path, sha) -> the module, imported once per process


def load_file(path: str | Path) -> list[MetricSpec]:
    """The metrics a Python file declares with :func:`metric`. Raises ``DefinitionError`` (file, line, key)."""
    p = Path(path).expanduser().resolve()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(str(path), f"cannot read the file ({getattr(e, 'strerror', None) or e})") from None
    sha = text_sha(text)
    module = _MODULES.get((str(p), sha))
    if module is None:
        try:
            compile(text, str(p), "exec")
        except SyntaxError as e:
            raise DefinitionError(str(path), f"not valid Python: {e.msg}", e.lineno) from None
        mod_name = f"evaluators_user_metrics.{p.stem}_{hashlib.sha256(str(p).encode()).hexdigest()[:8]}_{sha}"
        spec = importlib.util.spec_from_file_location(mod_name, p)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module  # (dataclasses and pickling look their module up)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 — the user's module failed as it was imported: said with where
            sys.modules.pop(mod_name, None)
            tb = e.__traceback__
            line = None
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == str(p):
                    line = tb.tb_lineno
                tb = tb.tb_next
            raise DefinitionError(str(path), f"importing it failed: {type(e).__name__}: {e}", line) from None
        _MODULES[(str(p), sha)] = module
    found = [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, ATTR)
             and getattr(fn, "__module__", None) == module.__name__]
    if not found:
        raise DefinitionError(str(path), "declares no metric (decorate a function with @metric(...) from "
                                         "evaluators)")
    out = []
    for fn in found:
        out.append(spec_of(fn, {"format": FORMAT, "path": str(p), "sha": sha, "function": fn.__name__,
                                "source": str(path)}, str(path), fn.__code__.co_firstlineno))
    return out


def entry_point_specs() -> list[MetricSpec]:
    """Metrics installed packages declare under the ``evaluators.metrics`` entry point group.

    Each entry point names a decorated function (``pkg.module:function``). A broken one is refused by name.
    """
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINTS):
        where = f"entry point {ep.name} = {ep.value}"
        try:
            try:
                fn = ep.load()
            except Exception as e:  # noqa: BLE001 — an installed package's import failed: said with its name
                raise DefinitionError(where, f"cannot be loaded: {type(e).__name__}: {e}") from None
            if not hasattr(fn, ATTR):
                raise DefinitionError(where, "is not a function declared with @metric(...)")
            out.append(spec_of(fn, {"format": FORMAT, "entry_point": ep.value, "source": where}, where))
        except DefinitionError as e:  # refused, and said by `metrics list`; the other metrics stay usable
            REFUSED.append(str(e))
    return out


REFUSED: list[str] = []  # installed packages' metrics refused as they were loaded (what and why)


def from_definition(d: Mapping[str, Any]) -> MetricSpec:
    """A code metric a run recorded, loaded again from its file or entry point. When the file is gone or
    changed since, the metric is still read (its recorded settings) but computing it is refused, said why."""
    try:
        if d.get("entry_point"):
            from importlib.metadata import EntryPoint

            fn = EntryPoint(name="metric", value=d["entry_point"], group=ENTRY_POINTS).load()
            return spec_of(fn, dict(d), f"entry point {d['entry_point']}")
        spec = {s.definition["function"]: s for s in load_file(d["path"])}.get(d["function"])
        if spec is not None and spec.definition["sha"] == d["sha"]:
            return spec
        why = f"{d['path']} changed since the run started (its metric was read with content {d['sha']})"
    except Exception as e:  # noqa: BLE001 — reading the run's results needs only the recorded settings
        why = str(e)
    st = d["settings"]

    def refused(row: Mapping[str, Any]) -> dict[str, float]:
        raise DefinitionError(str(d.get("source")), f"cannot compute {st['name']}: {why}")

    lo, hi = st["range"]
    threshold = (lo + hi) / 2 if st["threshold"] is None else float(st["threshold"])
    return _spec(st, st["name"], float(lo), float(hi), threshold, refused, dict(d))
