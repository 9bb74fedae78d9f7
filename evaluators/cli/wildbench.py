"""``python -m evaluators wildbench import|leaderboard`` and the WildBench options of ``run``.

``import FILE... --out DIR`` stores published WildBench eval-result files as runs (browsable and
comparable like our own) and writes ``DIR/leaderboard.json``: model -> aggregates. ``leaderboard``
does the same over runs already in the store. ``run`` gains ``--length-penalty K``, ``--both-orders``
and the generic ``--option METRIC.PARAM=VALUE``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError
from evaluators.core.wb_rules import DEFAULT_LENGTH_PENALTY
from evaluators.cli.text import say, say_table


def add_commands(sub) -> None:
    """Add the ``wildbench`` command, and metric options to ``run`` (``sub``: the CLI's subparsers)."""
    run = sub.choices.get("run")
    if run is not None:
        run.add_argument("--option", action="append", metavar="METRIC.PARAM=VALUE",
                         help="a metric's option, e.g. wildbench_pairwise.both_orders=true")
        run.add_argument("--length-penalty", type=int, metavar="K",
                         help="wildbench_pairwise: a slight win by a response longer by more than K "
                              "characters counts as a tie (default 500; -1 disables)")
        run.add_argument("--both-orders", action="store_true",
                         help="wildbench_pairwise: also judge each pair swapped; a flip counts as a tie")
    w = sub.add_parser("wildbench", help="WildBench: import published judgments, leaderboards")
    wsub = w.add_subparsers(dest="wb_command", required=True)
    imp = wsub.add_parser("import", help="store WildBench eval-result files as runs; write DIR/leaderboard.json")
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--out", required=True, help="folder for leaderboard.json")
    imp.add_argument("--length-penalty", type=int, default=DEFAULT_LENGTH_PENALTY, metavar="K",
                     help="K characters for pairwise rewards (default 500; -1 disables)")
    imp.add_argument("--db", help="SQLAlchemy URL of the store")
    lb = wsub.add_parser("leaderboard", help="leaderboard over stored runs with WildBench metrics")
    lb.add_argument("--run", action="append", metavar="RUN_ID", help="only these runs (default: all)")
    lb.add_argument("--out", help="also write leaderboard.json here")
    lb.add_argument("--length-penalty", type=int, metavar="K", help="K for pairwise rewards (default: each run's)")
    lb.add_argument("--db")


def run_options(a: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``run``'s metric options: ``--option`` pairs plus the WildBench shorthands."""
    out: dict[str, dict[str, Any]] = {}
    for v in getattr(a, "option", None) or []:
        key, sep, value = v.partition("=")
        metric, dot, param = key.strip().partition(".")
        if not sep or not dot or not param:
            raise UsageError(f"--option takes METRIC.PARAM=VALUE, got '{v}'")
        out.setdefault(metric, {})[param.strip()] = value.strip()
    metrics = [m.strip() for m in (getattr(a, "metrics", "") or "").split(",")]
    if getattr(a, "length_penalty", None) is not None or getattr(a, "both_orders", False):
        if "wildbench_pairwise" not in metrics:
            raise UsageError("--length-penalty and --both-orders apply to wildbench_pairwise, which is not in --metrics")
        if a.length_penalty is not None:
            out.setdefault("wildbench_pairwise", {})["length_penalty"] = a.length_penalty
        if a.both_orders:
            out.setdefault("wildbench_pairwise", {})["both_orders"] = True
    return out


def _f(v: Any, nd: int = 4) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def print_board(board: dict[str, dict[str, Any]], out=None) -> None:
    out = out or sys.stdout  # the stream in force now, not the one at import (a test's may be closed)
    rows = [("model", "records", "WB_score", "95% CI", "task_macro", "WB_reward (mixture)", "95% CI")]
    for model, agg in sorted(board.items(), key=lambda kv: -(kv[1].get("WB_score") or -1e9)):
        ci = agg.get("WB_score_ci95") or [None, None]
        mci = agg.get("mixture_of_rewards_ci95") or [None, None]
        rows.append((model, str(agg.get("records", agg.get("pairwise_records", "-"))), _f(agg.get("WB_score")),
                     "-" if ci[0] is None else f"{ci[0]:.2f}..{ci[1]:.2f}", _f(agg.get("WB_score.task_macro")),
                     _f(agg.get("mixture_of_rewards")),
                     "-" if mci[0] is None else f"{mci[0]:.2f}..{mci[1]:.2f}"))
    say_table(rows, out)


def _write(out_dir: str, board: dict) -> Path:
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    target = path / "leaderboard.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(board, indent=2, sort_keys=True, ensure_ascii=False), encoding="utf-8")
    tmp.replace(target)  # never a half-written leaderboard
    return target


def main(a: argparse.Namespace) -> int:
    from evaluators.store.store import Store
    from evaluators.suites.wildbench import ImportFormatError, import_files, leaderboard

    store = Store(a.db)
    if a.wb_command == "import":
        try:
            runs, board = import_files(store, a.files, a.length_penalty)
        except ImportFormatError as e:
            raise UsageError(str(e)) from None
        for r in runs:
            what = f"{r.model}" + (f" vs {r.reference}" if r.reference else "")
            say(f"{'kept' if r.reused else 'imported'} {r.path}: {r.mode}, {what}, {r.records} records -> run {r.run_id}")
        target = _write(a.out, board)
        say(f"wrote {target}")
        print_board(board)
        return 0
    from evaluators.read.results import open_results

    runs = [r for r in store.list_runs() if not a.run or r["id"] in a.run]
    picked, names = [], []
    for r in runs:
        kinds = {m for m in r["spec"]["metrics"] if m.startswith("wildbench_")}
        if kinds:
            picked.append(open_results(store, r["id"]))
            names.append(r["name"])
    if not picked:
        raise UsageError("no stored run has a WildBench metric" + (" among --run" if a.run else ""))
    board = leaderboard(picked, a.length_penalty, names)
    if a.out:
        say(f"wrote {_write(a.out, board)}")
    print_board(board)
    return 0


COMMANDS = {"wildbench": main}  # dispatched by evaluators.cli.main
