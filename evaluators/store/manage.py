"""Renaming, archiving and deleting runs and datasets (a section of :class:`evaluators.store.store.Store`).

Each change is one statement in one transaction. Archiving keeps everything and sets ``archived_at`` (lists and
pickers hide the item by default). Deleting a run takes its results, reviews, review queues, chunks and batches
with it (the tables' ``ON DELETE CASCADE``), and is refused while a worker holds the run. Deleting a dataset that
runs use is refused, naming them: their results would lose the rows they score. Who may do any of this is the
dashboard's rule (ui.auth.may_change); the store checks only what keeps it consistent.
"""
from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from evaluators.core.errors import UsageError
from evaluators.store.schema import DatasetRow, RunRow, utcnow

MAX_NAME = 300  # the name columns' length


class DatasetInUse(UsageError):
    """A dataset that runs use cannot be deleted. ``runs``: (id, name) of each, newest first."""

    def __init__(self, dataset: str, runs: list[tuple[str, str]]):
        self.runs = runs
        names = ", ".join(f"{name} ({rid})" for rid, name in runs[:10]) + (
            f" and {len(runs) - 10} more" if len(runs) > 10 else "")
        super().__init__(f"dataset {dataset} is used by {len(runs)} run{'s' if len(runs) != 1 else ''}: {names}. "
                         "Delete those runs first, or archive the dataset instead (archiving keeps everything).")


def checked_name(name: str) -> str:
    """A new name as stored: surrounding blanks dropped; refused when empty or longer than the column."""
    text = " ".join(str(name).split())
    if not text:
        raise UsageError("a name cannot be empty")
    if len(text) > MAX_NAME:
        raise UsageError(f"a name holds at most {MAX_NAME} characters ({len(text)} given)")
    return text


class ManageMixin:
    """Rename, archive (and back) and delete runs and datasets."""

    def _change(self, model, item_id: str, what: str, **values) -> None:
        with self.session() as s:
            if s.execute(update(model).where(model.id == item_id).values(**values)).rowcount != 1:
                raise UsageError(f"no {what} {item_id}")
            s.commit()

    def rename_run(self, run_id: str, name: str) -> str:
        """Give a run another name; returns the name as stored (:func:`checked_name`)."""
        name = checked_name(name)
        self._change(RunRow, run_id, "run", name=name)
        return name

    def archive_run(self, run_id: str, archived: bool = True) -> None:
        """Hide a run from lists and pickers (``archived=False``: show it again); nothing of it is removed."""
        self._change(RunRow, run_id, "run", archived_at=utcnow() if archived else None)

    def delete_run(self, run_id: str) -> None:
        """Delete a run and everything of it (results, reviews, queues, chunks, batches), unless a worker holds
        it now (refused: cancel it first). One conditional DELETE, so a worker claiming the run at the same
        moment either keeps it or finds it gone."""
        with self.session() as s:
            gone = s.execute(delete(RunRow).where(RunRow.id == run_id, ~self._held())).rowcount
            s.commit()
        if gone:
            return
        with self.session() as s:
            exists = s.scalar(select(RunRow.name).where(RunRow.id == run_id))
        if exists is None:
            raise UsageError(f"no run {run_id}")
        raise UsageError(f"run {exists} ({run_id}) is going on: cancel it (or wait for it to end), then delete it")

    def rename_dataset(self, dataset_id: str, name: str) -> str:
        """Give a dataset another name; returns the name as stored."""
        name = checked_name(name)
        self._change(DatasetRow, dataset_id, "dataset", name=name)
        return name

    def archive_dataset(self, dataset_id: str, archived: bool = True) -> None:
        """Hide a dataset from lists and pickers (``archived=False``: show it again); its runs are untouched."""
        self._change(DatasetRow, dataset_id, "dataset", archived_at=utcnow() if archived else None)

    def runs_of_dataset(self, dataset_id: str) -> list[tuple[str, str]]:
        """(id, name) of the runs on a dataset, newest first."""
        with self.session() as s:
            return [tuple(r) for r in s.execute(select(RunRow.id, RunRow.name).where(RunRow.dataset_id == dataset_id)
                                                .order_by(RunRow.created_at.desc()))]

    def delete_dataset(self, dataset_id: str) -> None:
        """Delete a dataset and its records; refused (:class:`DatasetInUse`, naming them) while runs use it. A run
        started on it meanwhile makes the database refuse the delete (the runs' foreign key): refused the same."""
        with self.session() as s:
            name = s.scalar(select(DatasetRow.name).where(DatasetRow.id == dataset_id))
        if name is None:
            raise UsageError(f"no dataset {dataset_id}")
        users = self.runs_of_dataset(dataset_id)
        if users:
            raise DatasetInUse(f"{name} ({dataset_id})", users)
        try:
            with self.session() as s:
                s.execute(delete(DatasetRow).where(DatasetRow.id == dataset_id))
                s.commit()
        except IntegrityError:
            raise DatasetInUse(f"{name} ({dataset_id})", self.runs_of_dataset(dataset_id)) from None
