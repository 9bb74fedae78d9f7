"""Alignment's splits: each reviewed row of a metric (run, row, metric) assigned once to train, dev or test, and
how many times each metric's test split has been used for a decision; and the provenance of each promoted
candidate (the saved metric version it became: which run and reviews, which rules and examples, the gate).

A row is assigned the first time alignment sees its verdict and never again: rows already stored keep their split
(an insert that meets one does nothing), so a judge tuned on train and chosen on dev is gated on rows that no
earlier step ever read. New rows are dealt within their stratum (the human verdict), in the order of a hash of
(seed, run, row, metric), each to the split furthest below its share: the same reviewed rows always make the same
splits, and each verdict's rows are split 20 / 40 / 40 (by default) as closely as whole rows allow.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Iterable

from sqlalchemy import JSON, ForeignKey, Integer, String, func, select, update
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.store.schema import Base, utcnow

SPLITS = ("train", "dev", "test")
DEFAULT_SHARES = (0.2, 0.4, 0.4)


class AlignSplitRow(Base):
    """One reviewed row's split for one metric (written once)."""

    __tablename__ = "align_splits"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    row_idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(100), primary_key=True)
    split: Mapped[str] = mapped_column(String(5))  # train | dev | test
    stratum: Mapped[str] = mapped_column(String(20))  # the human verdict it was dealt in: pass | fail
    seed: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class AlignTestUseRow(Base):
    """How many decisions a metric's test split has been used for."""

    __tablename__ = "align_test_uses"
    metric: Mapped[str] = mapped_column(String(100), primary_key=True)
    uses: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class AlignPromotionRow(Base):
    """Where a saved metric version promoted by alignment came from (``saved_metrics``' name and version)."""

    __tablename__ = "align_promotions"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    provenance: Mapped[dict] = mapped_column(JSON)  # run, metric, method, rules, examples, the gate's numbers
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


def row_hash(seed: int, run_id: str, row_idx: int, metric: str) -> str:
    """The key new rows are dealt in (a function of the row alone: no row's place depends on the clock)."""
    return hashlib.sha256(f"{seed}\x1f{run_id}\x1f{int(row_idx)}\x1f{metric}".encode()).hexdigest()


def deal(rows: list[tuple[str, int]], counts: dict[str, int], shares: tuple[float, float, float]) -> dict:
    """Each of ``rows`` (already in hash order, one stratum) -> the split furthest below its share of the
    stratum's rows, counting those assigned before (``counts``, updated in place)."""
    out = {}
    for key in rows:
        total = sum(counts.values()) + 1
        best = max(SPLITS, key=lambda s: (shares[SPLITS.index(s)] * total - counts[s], -SPLITS.index(s)))
        counts[best] += 1
        out[key] = best
    return out


class AlignSplitsMixin:
    """Splits' reads and writes of :class:`evaluators.store.store.Store` (which provides ``session``)."""

    def align_splits(self, metric: str, run_ids: Iterable[str] | None = None) -> dict[tuple[str, int], str]:
        """(run, row) -> split of every row of ``metric`` assigned so far (of some runs only, if given)."""
        q = select(AlignSplitRow.run_id, AlignSplitRow.row_idx, AlignSplitRow.split).where(
            AlignSplitRow.metric == metric)
        if run_ids is not None:
            q = q.where(AlignSplitRow.run_id.in_(list(run_ids)))
        with self.session() as s:
            return {(r, int(i)): sp for r, i, sp in s.execute(q)}

    def assign_splits(self, metric: str, verdicts: dict[tuple[str, int], str], seed: int = 0,
                      shares: tuple[float, float, float] = DEFAULT_SHARES) -> dict[tuple[str, int], str]:
        """Give every reviewed row not yet assigned its split, and return the splits of all of ``verdicts``.

        Args:
            verdicts: (run, row) -> the human verdict ("pass" / "fail"), the stratum a new row is dealt in.
            seed: orders new rows (stored with each; rows assigned before keep theirs whatever it is now).
            shares: train, dev and test's shares of each stratum.
        Returns:
            (run, row) -> "train" | "dev" | "test", as stored (a row assigned by another process meanwhile keeps
            what that one stored).
        """
        if abs(sum(shares) - 1.0) > 1e-9 or min(shares) < 0:
            raise ValueError(f"split shares must be three non-negative numbers adding up to 1, not {shares}")
        stored = self.align_splits(metric)
        counts: dict[str, dict[str, int]] = {}
        with self.session() as s:
            for stratum, sp, n in s.execute(select(AlignSplitRow.stratum, AlignSplitRow.split, func.count())
                                            .where(AlignSplitRow.metric == metric)
                                            .group_by(AlignSplitRow.stratum, AlignSplitRow.split)):
                counts.setdefault(stratum, dict.fromkeys(SPLITS, 0))[sp] = int(n)
        new = [k for k in verdicts if k not in stored]
        rows = []
        for stratum in sorted({verdicts[k] for k in new}):
            mine = sorted((k for k in new if verdicts[k] == stratum), key=lambda k: row_hash(seed, k[0], k[1], metric))
            dealt = deal(mine, counts.setdefault(stratum, dict.fromkeys(SPLITS, 0)), shares)
            rows += [dict(run_id=k[0], row_idx=int(k[1]), metric=metric, split=sp, stratum=stratum, seed=seed,
                          created_at=utcnow()) for k, sp in dealt.items()]
        if rows:
            self._insert_unassigned(AlignSplitRow, rows)
        stored = self.align_splits(metric, {k[0] for k in verdicts})
        return {k: stored[k] for k in verdicts if k in stored}

    def _insert_unassigned(self, model, rows: list[dict]) -> None:
        """INSERT, leaving every row whose key is stored already as it is (never reassigned)."""
        dialect = self.engine.dialect.name
        with self.session() as s:
            if dialect in ("sqlite", "postgresql"):
                if dialect == "sqlite":
                    from sqlalchemy.dialects.sqlite import insert
                else:
                    from sqlalchemy.dialects.postgresql import insert
                for k in range(0, len(rows), 500):
                    s.execute(insert(model.__table__).on_conflict_do_nothing(), rows[k:k + 500])
            else:
                have = {tuple(r) for r in s.execute(select(*model.__table__.primary_key.columns))}
                keys = [c.name for c in model.__table__.primary_key.columns]
                s.add_all(model(**r) for r in rows if tuple(r[c] for c in keys) not in have)
            s.commit()

    def test_split_uses(self, metric: str) -> int:
        """How many decisions ``metric``'s test split has been used for."""
        with self.session() as s:
            n = s.scalar(select(AlignTestUseRow.uses).where(AlignTestUseRow.metric == metric))
        return int(n or 0)

    def count_test_use(self, metric: str) -> int:
        """Count one more use of ``metric``'s test split (atomically); the count after it."""
        self._insert_unassigned(AlignTestUseRow, [dict(metric=metric, uses=0, updated_at=utcnow())])
        with self.session() as s:
            s.execute(update(AlignTestUseRow).where(AlignTestUseRow.metric == metric)
                      .values(uses=AlignTestUseRow.uses + 1, updated_at=utcnow()))
            s.commit()
        return self.test_split_uses(metric)

    def save_promotion(self, name: str, version: int, provenance: dict[str, Any], created_by: str | None = None) -> None:
        """Record where saved metric ``name`` version ``version`` came from (once: a second record is refused)."""
        with self.session() as s:
            s.add(AlignPromotionRow(name=name, version=int(version), provenance=provenance, created_by=created_by))
            s.commit()

    def promotion(self, name: str, version: int) -> dict[str, Any] | None:
        """The provenance of a promoted version, or None when alignment did not make it."""
        with self.session() as s:
            row = s.get(AlignPromotionRow, (name, int(version)))
            return None if row is None else {"name": row.name, "version": row.version, "provenance": row.provenance,
                                             "created_at": row.created_at, "created_by": row.created_by}
