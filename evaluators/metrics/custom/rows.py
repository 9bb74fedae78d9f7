"""Planning a file-defined metric's rows: single-turn rows give it any column it declares, not only the
canonical fields (a ``policy_id`` column, say); conversations are planned per assistant turn as usual."""
from __future__ import annotations

from typing import TYPE_CHECKING

from evaluators.core.registry import FIELDS
from evaluators.core.tasks import RowTask, default_row_tasks

if TYPE_CHECKING:
    from evaluators.core.registry import MetricSpec
    from evaluators.data.dataset import Dataset


def row_tasks(ds: "Dataset", i: int, spec: "MetricSpec") -> list[RowTask]:
    if ds.shape != "single":
        return default_row_tasks(ds, i, spec)
    values = ds.canonical(i)
    extra = [f for f in spec.fields if f not in FIELDS]
    if extra:
        record = ds.records[i]
        values.update({f: record.get(f) for f in extra})
    return [RowTask(0, values, "single")]
