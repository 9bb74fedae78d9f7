"""The store's judge batches: each batch a run submitted to a provider's Batch API, with its requests'
custom ids and the provider's state, written before and after each step so a resumed run polls it again."""
from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from evaluators.store.schema import BatchRow, new_id, utcnow


def _batch_dict(b: BatchRow) -> dict[str, Any]:
    return {c.name: getattr(b, c.name) for c in BatchRow.__table__.columns}


class BatchesMixin:
    """Batch reads and writes of :class:`evaluators.store.store.Store` (which provides ``session``)."""

    def add_batch(self, run_id: str, custom_ids: list[str], round_: int, input_file_id: str) -> str:
        """Record a batch's uploaded input before the provider is asked to make the batch; returns its id."""
        bid = new_id()
        with self.session() as s:
            s.add(BatchRow(id=bid, run_id=run_id, round=round_, input_file_id=input_file_id, custom_ids=custom_ids,
                           total=len(custom_ids)))
            s.commit()
        return bid

    def update_batch(self, bid: str, **values: Any) -> None:
        with self.session() as s:
            s.execute(update(BatchRow).where(BatchRow.id == bid).values(updated_at=utcnow(), **values))
            s.commit()

    def run_batches(self, run_id: str, with_ids: bool = True) -> list[dict[str, Any]]:
        """The run's batches, oldest first (``custom_ids`` left out unless ``with_ids``: a dashboard's read)."""
        cols = [c for c in BatchRow.__table__.columns if with_ids or c.name != "custom_ids"]
        with self.session() as s:
            rows = s.execute(select(*cols).where(BatchRow.run_id == run_id).order_by(BatchRow.created_at)).all()
        return [dict(r._mapping) for r in rows]
