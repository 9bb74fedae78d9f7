"""Kinds of metric value: how a judge reply is parsed, turns are combined, row keys are
written and rows are aggregated.

A metric declares its kind in the registry (``MetricSpec.kind``); everything that depends
on the kind lives in one class here, so results, exports and the dashboard never branch
on a metric's name. ``score`` (1-5, 0-1, 1-10: mean, pass rate) is :class:`Kind` itself;
``severity`` (0-7 with levels, defect rate), ``label`` (true/false with categories) and
``pairwise`` (two responses, one verdict) subclass it in their own modules.
"""
from evaluators.core.kinds.base import NOTE, Kind, MetricCell, Verdict, get_kind, kind_names, register_kind

# Each kind's module registers itself on import (importing any module of this package runs this first, so every
# kind is registered before one is asked for); a new kind adds its module here.
from evaluators.core.kinds import label, pairwise, score, severity, wb_score  # noqa: E402,F401

__all__ = ["NOTE", "Kind", "MetricCell", "Verdict", "get_kind", "kind_names", "register_kind"]
