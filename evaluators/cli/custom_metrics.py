"""Users' own metrics on the command line: ``--metric-file [NAME=]PATH`` (repeatable) on ``run`` and
``metrics``; ``metrics add FILE`` (saved in the store for the team, versioned), ``metrics list`` and
``metrics show NAME``. Registered by :mod:`evaluators.cli.main`; exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluators.core.errors import UsageError
from evaluators.cli.text import say

SUBCOMMANDS = ("add", "list", "show")


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metric-file", action="append", metavar="[NAME=]PATH",
                   help="a metric of your own: our template (.md), Prompty (.prompty), Python (.py, @metric) or an "
                        "OpenAI Evals grader (.json); repeatable. NAME= renames a Prompty or grader file's metric")


def add_metrics_options(m: argparse.ArgumentParser) -> None:
    m.add_argument("target", nargs="?", help="with add: the metric file; with show: the metric's name")
    add_run_options(m)
    m.add_argument("--version", type=int, help="with show: a saved metric's version (default: the latest)")
    m.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")


def register_for_run(a: argparse.Namespace, metrics: list[str]) -> None:
    """Before a run is checked: its metric files registered, and, when a chosen name is still unknown, the
    metrics saved in the store (only then: a run of built-ins does not open the store before its checks)."""
    from evaluators.core.registry import all_metrics
    from evaluators.metrics.custom import register_metric_files

    register_metric_files(getattr(a, "metric_file", None) or [])
    known = {s.name for s in all_metrics()}
    if any(m not in known for m in metrics):
        from evaluators.store.store import Store

        Store(getattr(a, "db", None)).register_saved_metrics()


def cmd_metrics(a: argparse.Namespace, list_metrics) -> int:
    """``metrics [DATA] | add FILE | list | show NAME``; ``list_metrics`` is ``main``'s listing."""
    from evaluators.metrics.custom import register_metric_files

    if a.data not in SUBCOMMANDS:  # (the store is not opened: `metrics list` adds the team's saved metrics)
        register_metric_files(a.metric_file or [])
        return list_metrics(a)
    from evaluators.store.store import Store

    store = Store(a.db)
    if a.data == "add":
        if not a.target:
            raise UsageError("metrics add takes the metric file: python -m evaluators metrics add FILE")
        return _add(store, a.target)
    if a.data == "list":
        register_metric_files(a.metric_file or [])
        store.register_saved_metrics()
        a.data = None
        code = list_metrics(a)
        from evaluators.metrics.custom.code import REFUSED

        for why in REFUSED:
            say(f"refused: {why}", file=sys.stderr)
        return code
    if not a.target:
        raise UsageError("metrics show takes a metric's name")
    register_metric_files(a.metric_file or [])
    return _show(store, a.target, a.version)


def _add(store, target: str) -> int:
    from evaluators.metrics.custom import FORMATS, load_metric_file, split_arg

    name, path = split_arg(target)
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    specs = load_metric_file(target)  # refused here, naming the line and key, before anything is stored
    if fmt == "code":
        raise UsageError(f"{target}: a code metric stays in its file (or package); use --metric-file {target}")
    text = path.read_text(encoding="utf-8")
    saved = store.save_metric(text, fmt, name=name)
    say(f"saved {saved['name']} version {saved['version']} ({specs[0].kind}, fields "
          f"{', '.join(specs[0].fields)}); every run and teammate using this store now sees it")
    return 0


def _show(store, name: str, version: int | None) -> int:
    from evaluators.core.registry import get_metric
    from evaluators.store.saved_metrics import saved_spec

    saved = None
    try:
        saved = store.saved_metric(name, version)
    except UsageError:
        if version:
            raise
    spec = saved_spec(saved) if saved else get_metric(name)
    lo, hi = spec.score_range
    say(f"{spec.name}  ({'saved, version ' + str(saved['version']) if saved else 'version ' + spec.version})")
    say(f"  {spec.description}")
    say(f"  kind {spec.kind}, {lo:g}-{hi:g}, pass {'>=' if spec.higher_is_better else '<='} "
          f"{spec.default_threshold:g}; fields {', '.join(spec.fields)}; {'judge' if spec.is_judge else 'computed'}")
    say(f"  signature {spec.signature()}")
    if saved:
        say(f"  versions {', '.join(map(str, store.saved_metric_versions(name)))}; format {saved['format']}")
        say()
        say(saved["text"])
    elif spec.definition:
        say(f"  from {spec.definition.get('source') or spec.definition.get('path')}")
    return 0
