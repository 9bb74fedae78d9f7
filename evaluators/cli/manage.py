"""``python -m evaluators runs|datasets rename|archive|unarchive|delete``: what the Runs and Datasets pages do.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`. A delete asks
first on a terminal and otherwise needs ``--yes``; names are printed with control characters removed.
"""
from __future__ import annotations

import sys

from evaluators.cli.text import clean, say
from evaluators.core.errors import UsageError

ACTIONS = ("rename", "archive", "unarchive", "delete")


def add_commands(sub) -> None:
    for kind in ("runs", "datasets"):
        one = kind[:-1]
        p = sub.add_parser(kind, help=f"rename, archive (hide from lists and pickers), unarchive or delete a {one}")
        ps = p.add_subparsers(dest="manage_command", required=True)
        for action in ACTIONS:
            a = ps.add_parser(action, help=f"{action} a {one}" + (
                " and everything of it (asks first; --yes on no terminal)" if action == "delete" and kind == "runs"
                else " (refused while runs use it)" if action == "delete" else ""))
            a.add_argument("id", help=f"the {one}'s id")
            if action == "rename":
                a.add_argument("name", help="the new name")
            if action == "delete":
                a.add_argument("--yes", action="store_true", help="delete without asking")
            a.add_argument("--db", help="SQLAlchemy URL of the store (default: EVAL_DATABASE_URL or ~/.evaldash/evals.db)")


def _confirmed(a, what: str) -> bool:
    if a.yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(f"delete {what}: add --yes to delete without a terminal to ask on (it cannot be undone)")
    return input(f"Delete {what}? This cannot be undone. [y/N] ").strip().lower() in ("y", "yes")


def cmd_manage(a) -> int:
    from evaluators.cli.common import EXIT_OK
    from evaluators.store.store import Store

    store = Store(a.db)
    runs = a.command == "runs"
    if runs:
        try:
            name = store.get_run(a.id)["name"]
        except KeyError:
            raise UsageError(f"no run {a.id}") from None
    else:
        name = next((d["name"] for d in store.list_datasets() if d["id"] == a.id), None)
        if name is None:
            raise UsageError(f"no dataset {a.id}")
    what = f"{'run' if runs else 'dataset'} {clean(name)} ({a.id})"
    if a.manage_command == "rename":
        new = store.rename_run(a.id, a.name) if runs else store.rename_dataset(a.id, a.name)
        say(f"renamed {what} to {clean(new)}")
    elif a.manage_command in ("archive", "unarchive"):
        (store.archive_run if runs else store.archive_dataset)(a.id, archived=a.manage_command == "archive")
        say(f"{a.manage_command}d {what}")
    else:
        if not _confirmed(a, what + (" and its results, reviews and review queues" if runs else "")):
            say("nothing deleted")
            return EXIT_OK
        (store.delete_run if runs else store.delete_dataset)(a.id)
        if runs:
            from evaluators.read.columns import forget_views

            forget_views(store, a.id)  # its columns and cost kept beside the store
        say(f"deleted {what}")
    return EXIT_OK


COMMANDS = {"runs": cmd_manage, "datasets": cmd_manage}
